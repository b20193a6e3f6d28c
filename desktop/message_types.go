package desktop

// This file holds the desktop surface's wire messages, shared by the helper (inside the
// agent's sandbox), the gateway and the WASM app. It must build for GOOS=js GOARCH=wasm: no
// cgo, no X11, no gorilla here. The byte layout is documented in docs/desktop-protocol.md.
//
// Every message is one frame: a 1-byte opcode followed by that opcode's fields. On a viewer's
// WebSocket one binary message is one frame; on the helper's stream each frame is preceded
// by its length (u32). Integers are big-endian; strings are a u16 byte length then UTF-8
// bytes (Clipboard: u32 length); byte payloads (Rect data, cursor pixels, screenshots) run to
// the end of the frame. Opcodes are append-only: never renumber or reuse one.
//
// Frames the helper produces (Rect, FrameEnd, Screen, Cursor*, Clipboard, Screenshot) travel
// to viewers byte for byte: the helper encodes once, the gateway fans the same bytes out.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/porthole/porthole/internal/wire"
)

// ProtocolVersion is sent in Hello; bump it only for incompatible changes.
const ProtocolVersion = 1

// Op is a frame's opcode (its first byte).
type Op uint8

// Viewer → gateway opcodes (0x01–0x3f). Input opcodes (Pointer … Refresh) are forwarded to
// the helper as they are, after the gateway checked the viewer drives and holds control, and
// clamped coordinates to the display.
const (
	OpPointer        Op = 0x01 // pointer position and button state
	OpWheel          Op = 0x02 // scroll steps at a position
	OpKey            Op = 0x03 // a physical key down/up, by DOM KeyboardEvent.code
	OpText           Op = 0x04 // text typed (IME, phone keyboards, paste-as-typing)
	OpAck            Op = 0x05 // the viewer has drawn every frame up to Seq
	OpTakeControl    Op = 0x06 // become the one driver of the display
	OpReleaseControl Op = 0x07 // give control up
	OpResizeRequest  Op = 0x08 // change the display's size (RandR)
	OpSetClipboard   Op = 0x09 // put text on the display's clipboard
	OpRefresh        Op = 0x0a // ask for a keyframe of the whole screen
)

// Gateway → helper opcodes (0x40–0x7f), besides the forwarded input above.
const (
	OpScreenshotRequest Op = 0x40 // encode the current screen whole (computer-use API)
	OpLag               Op = 0x41 // how far behind the viewers are (lowers quality)
)

// Gateway → viewer opcodes (0x80–0xbf). Rect, FrameEnd, Screen, CursorShape, CursorPos and
// Clipboard also travel helper → gateway.
const (
	OpHello       Op = 0x80 // first frame to a viewer
	OpScreen      Op = 0x81 // the display's size; a keyframe follows
	OpRect        Op = 0x82 // an encoded region of the screen
	OpFrameEnd    Op = 0x83 // the Rects since the last FrameEnd form one frame: draw, then Ack Seq
	OpCursorShape Op = 0x84 // the pointer's image
	OpCursorPos   Op = 0x85 // the pointer's position
	OpControl     Op = 0x86 // who holds control now
	OpViewers     Op = 0x87 // who is attached now
	OpClipboard   Op = 0x88 // the display's clipboard text changed
	OpError       Op = 0x89 // a clear error message
	OpMode        Op = 0x8a // you are watching / driving (your permission, not control)
	OpCopy        Op = 0x8b // copy a region of the viewer's own picture (a moved window)
	OpClipRect    Op = 0x8c // a Rect's image drawn only within a clip (the gateway's record of a copy)
)

// Helper → gateway opcodes (0xc0–0xff), besides the shared ones above.
const (
	OpScreenshot   Op = 0xc0 // answer to ScreenshotRequest
	OpClipboardCut Op = 0xc1 // the Clipboard just sent is the first MaxClipboard bytes of a longer one
)

// Mode is a viewer's permission on the wire.
type Mode uint8

// Modes.
const (
	ModeWatch Mode = 1 // input is dropped by the server
	ModeDrive Mode = 2 // may take control and send input
)

func (m Mode) String() string {
	switch m {
	case ModeWatch:
		return "watching"
	case ModeDrive:
		return "driving"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Pointer buttons (bit mask).
const (
	ButtonLeft   uint8 = 1 << 0
	ButtonMiddle uint8 = 1 << 1
	ButtonRight  uint8 = 1 << 2
	buttonsAll         = ButtonLeft | ButtonMiddle | ButtonRight
)

// Rect encodings.
const (
	EncJPEG uint8 = 1
	EncPNG  uint8 = 2
	// EncPalette: lossless, a palette of 1–256 colours and the pixels' packed indices, raw or
	// deflated (docs/desktop-protocol.md; DecodePalette). One colour is a fill.
	EncPalette uint8 = 3
)

// Rect flags.
const (
	// RectScaled: the image is half the rect's size in each dimension (large motion); draw it
	// stretched to W×H.
	RectScaled   uint8 = 1 << 0
	rectFlagsAll       = RectScaled
)

// ErrCode classifies an Error frame.
type ErrCode uint16

// Error codes (append-only).
const (
	ErrCodeBadMessage ErrCode = 1 // the frame could not be decoded
	ErrCodeWatchOnly  ErrCode = 2 // input from a watcher (dropped)
	ErrCodeNotHolder  ErrCode = 3 // input without holding control (dropped)
	ErrCodeHelper     ErrCode = 4 // the agent's helper could not be reached or exited
	ErrCodeDisplay    ErrCode = 5 // the display could not start (Xvfb missing, ...)
	ErrCodeInternal   ErrCode = 6
	ErrCodeTooLarge   ErrCode = 7 // clipboard or text over its limit
)

// Limits on the wire.
const (
	MaxDisplayW    = 7680 // display sizes are clamped to [MinDisplay, MaxDisplayW] × [MinDisplay, MaxDisplayH]
	MaxDisplayH    = 4320
	MinDisplay     = 64
	MaxCursor      = 256     // cursor images are at most MaxCursor × MaxCursor
	MaxText        = 4 << 10 // bytes of one Text frame
	MaxCode        = 64      // bytes of a key code
	MaxClipboard   = 1 << 20 // bytes of clipboard text
	MaxScreenshot  = 32 << 20
	MaxRectData    = 16 << 20
	MaxStreamFrame = MaxScreenshot + 64 // the longest frame on the helper's stream
	MaxViewers     = 1024
)

// Message is one wire frame.
type Message interface {
	Op() Op
	appendTo(b []byte) []byte
}

// Input and requests (viewer → gateway → helper).
type (
	// Pointer moves the pointer to (X, Y) with Buttons held (a change of Buttons presses or
	// releases buttons there).
	Pointer struct {
		X, Y    uint16
		Buttons uint8
	}
	// Wheel scrolls DX, DY steps (positive: right, down) at (X, Y).
	Wheel struct {
		X, Y   uint16
		DX, DY int16
	}
	// Key presses (Down) or releases a physical key named by its DOM KeyboardEvent.code
	// ("KeyA", "Enter", "ControlLeft", ...).
	Key struct {
		Down bool
		Code string
	}
	// Text types text as if from a keyboard.
	Text struct{ Text string }
	// Ack says the viewer has drawn every frame up to Seq.
	Ack struct{ Seq uint32 }
	// TakeControl asks to be the display's one driver.
	TakeControl struct{}
	// ReleaseControl gives control up.
	ReleaseControl struct{}
	// ResizeRequest asks for a display of W×H (clamped).
	ResizeRequest struct{ W, H uint16 }
	// SetClipboard puts Text on the display's clipboard.
	SetClipboard struct{ Text string }
	// Refresh asks for a keyframe.
	Refresh struct{}
	// ScreenshotRequest asks the helper for the whole screen in Format (EncPNG or EncJPEG),
	// scaled to Scale percent (1–100; 0 = 100).
	ScreenshotRequest struct {
		Format uint8
		Scale  uint8
	}
	// Lag tells the helper how many frames the slowest viewer is behind (0 = none).
	Lag struct{ Frames uint8 }
)

// Screen updates and state (helper/gateway → viewer).
type (
	// Hello is the first frame to a viewer.
	Hello struct {
		Version    uint16
		Mode       Mode
		ViewerID   string
		ViewerName string
	}
	// Screen is the display's size; a keyframe follows.
	Screen struct{ W, H uint16 }
	// Rect is region (X, Y, W, H) encoded as Enc; Data is the image (half size when Scaled).
	Rect struct {
		X, Y, W, H uint16
		Enc        uint8
		Flags      uint8
		Data       []byte
	}
	// FrameEnd ends a frame; viewers draw it and Ack Seq.
	FrameEnd struct{ Seq uint32 }
	// Copy copies the W×H pixels the viewer shows at (SrcX, SrcY) to (X, Y), as if through a
	// scratch image (the two may overlap), in order with the frame's other messages.
	Copy struct {
		SrcX, SrcY, X, Y, W, H uint16
	}
	// ClipRect draws a Rect's image placed at (X, Y) (which may lie off the screen's top or left
	// edge) with size W×H, but only its pixels within the clip (CX, CY, CW, CH), which lies on
	// the screen and inside the placement. The gateway makes it from a Rect a Copy moved, to
	// draw a moved region for a viewer that did not get the Copy (a keyframe, a lagging viewer).
	ClipRect struct {
		CX, CY, CW, CH uint16
		X, Y           int16
		W, H           uint16
		Enc            uint8
		Flags          uint8
		Data           []byte
	}
	// CursorShape is the pointer's image: W×H straight RGBA pixels, hot spot (HotX, HotY).
	CursorShape struct {
		W, H, HotX, HotY uint16
		RGBA             []byte
	}
	// CursorPos is the pointer's position.
	CursorPos struct{ X, Y uint16 }
	// Control says who holds control ("" = nobody); Agent is true when it is the agent's API.
	Control struct {
		HolderID   string
		HolderName string
		Agent      bool
	}
	// Viewers is who is attached.
	Viewers struct{ Viewers []ViewerInfo }
	// Clipboard is the display's clipboard text.
	Clipboard struct{ Text string }
	// ErrorMsg is a clear error.
	ErrorMsg struct {
		Code    ErrCode
		Message string
	}
	// ModeMsg tells the viewer its permission.
	ModeMsg struct{ Mode Mode }
	// Screenshot answers ScreenshotRequest: an image of W×H in Format.
	Screenshot struct {
		Format uint8
		W, H   uint16
		Data   []byte
	}
	// ClipboardCut follows a Clipboard that carried only the first MaxClipboard bytes of the
	// display's clipboard, which held at least Size bytes. The gateway tells drivers in its
	// own words (the helper shares the agent's sandbox: it sends a number, never text to show).
	ClipboardCut struct{ Size uint32 }
)

// ViewerInfo is one attached viewer.
type ViewerInfo struct {
	ID   string
	Name string
	Mode Mode
}

func (Pointer) Op() Op           { return OpPointer }
func (Wheel) Op() Op             { return OpWheel }
func (Key) Op() Op               { return OpKey }
func (Text) Op() Op              { return OpText }
func (Ack) Op() Op               { return OpAck }
func (TakeControl) Op() Op       { return OpTakeControl }
func (ReleaseControl) Op() Op    { return OpReleaseControl }
func (ResizeRequest) Op() Op     { return OpResizeRequest }
func (SetClipboard) Op() Op      { return OpSetClipboard }
func (Refresh) Op() Op           { return OpRefresh }
func (ScreenshotRequest) Op() Op { return OpScreenshotRequest }
func (Lag) Op() Op               { return OpLag }
func (Hello) Op() Op             { return OpHello }
func (Screen) Op() Op            { return OpScreen }
func (Rect) Op() Op              { return OpRect }
func (FrameEnd) Op() Op          { return OpFrameEnd }
func (CursorShape) Op() Op       { return OpCursorShape }
func (CursorPos) Op() Op         { return OpCursorPos }
func (Control) Op() Op           { return OpControl }
func (Viewers) Op() Op           { return OpViewers }
func (Clipboard) Op() Op         { return OpClipboard }
func (ErrorMsg) Op() Op          { return OpError }
func (ModeMsg) Op() Op           { return OpMode }
func (Screenshot) Op() Op        { return OpScreenshot }
func (ClipboardCut) Op() Op      { return OpClipboardCut }
func (Copy) Op() Op              { return OpCopy }
func (ClipRect) Op() Op          { return OpClipRect }

// IsInput reports whether op is input that only the control holder's frames may carry.
func IsInput(op Op) bool {
	switch op {
	case OpPointer, OpWheel, OpKey, OpText, OpSetClipboard, OpResizeRequest:
		return true
	}
	return false
}

// Encode returns m's frame.
func Encode(m Message) []byte { return AppendEncode(nil, m) }

// AppendEncode appends m's frame to dst.
func AppendEncode(dst []byte, m Message) []byte { return m.appendTo(append(dst, byte(m.Op()))) }

var be = binary.BigEndian

func (m Pointer) appendTo(b []byte) []byte {
	return append(be.AppendUint16(be.AppendUint16(b, m.X), m.Y), m.Buttons)
}
func (m Wheel) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.X), m.Y)
	return be.AppendUint16(be.AppendUint16(b, uint16(m.DX)), uint16(m.DY))
}
func (m Key) appendTo(b []byte) []byte {
	d := byte(0)
	if m.Down {
		d = 1
	}
	return wire.AppendStr(append(b, d), m.Code)
}
func (m Text) appendTo(b []byte) []byte         { return wire.AppendStr(b, m.Text) }
func (m Ack) appendTo(b []byte) []byte          { return be.AppendUint32(b, m.Seq) }
func (TakeControl) appendTo(b []byte) []byte    { return b }
func (ReleaseControl) appendTo(b []byte) []byte { return b }
func (m ResizeRequest) appendTo(b []byte) []byte {
	return be.AppendUint16(be.AppendUint16(b, m.W), m.H)
}
func (m SetClipboard) appendTo(b []byte) []byte      { return wire.AppendLongStr(b, m.Text, MaxClipboard) }
func (Refresh) appendTo(b []byte) []byte             { return b }
func (m ScreenshotRequest) appendTo(b []byte) []byte { return append(b, m.Format, m.Scale) }
func (m Lag) appendTo(b []byte) []byte               { return append(b, m.Frames) }

func (m Hello) appendTo(b []byte) []byte {
	b = append(be.AppendUint16(b, m.Version), byte(m.Mode))
	return wire.AppendStr(wire.AppendStr(b, m.ViewerID), m.ViewerName)
}
func (m Screen) appendTo(b []byte) []byte { return be.AppendUint16(be.AppendUint16(b, m.W), m.H) }
func (m Rect) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.X), m.Y)
	b = be.AppendUint16(be.AppendUint16(b, m.W), m.H)
	return append(append(b, m.Enc, m.Flags), m.Data...)
}
func (m FrameEnd) appendTo(b []byte) []byte { return be.AppendUint32(b, m.Seq) }
func (m Copy) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.SrcX), m.SrcY)
	b = be.AppendUint16(be.AppendUint16(b, m.X), m.Y)
	return be.AppendUint16(be.AppendUint16(b, m.W), m.H)
}
func (m ClipRect) appendTo(b []byte) []byte {
	return append(m.fields(b), m.Data...)
}

// ClipRectHeader is the length of a ClipRect frame before its data.
const ClipRectHeader = 1 + 8 + 8 + 2

// AppendHeader appends m's frame without its data (the data follows to the end of the frame).
func (m ClipRect) AppendHeader(b []byte) []byte { return m.fields(append(b, byte(OpClipRect))) }

func (m ClipRect) fields(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.CX), m.CY)
	b = be.AppendUint16(be.AppendUint16(b, m.CW), m.CH)
	b = be.AppendUint16(be.AppendUint16(b, uint16(m.X)), uint16(m.Y))
	b = be.AppendUint16(be.AppendUint16(b, m.W), m.H)
	return append(b, m.Enc, m.Flags)
}

// RectHeader is the length of a Rect frame before its data.
const RectHeader = 1 + 8 + 2

func (m CursorShape) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.W), m.H)
	b = be.AppendUint16(be.AppendUint16(b, m.HotX), m.HotY)
	return append(b, m.RGBA...)
}
func (m CursorPos) appendTo(b []byte) []byte { return be.AppendUint16(be.AppendUint16(b, m.X), m.Y) }
func (m Control) appendTo(b []byte) []byte {
	a := byte(0)
	if m.Agent {
		a = 1
	}
	return append(wire.AppendStr(wire.AppendStr(b, m.HolderID), m.HolderName), a)
}
func (m Viewers) appendTo(b []byte) []byte {
	n := min(len(m.Viewers), MaxViewers)
	b = be.AppendUint16(b, uint16(n))
	for _, v := range m.Viewers[:n] {
		b = append(wire.AppendStr(wire.AppendStr(b, v.ID), v.Name), byte(v.Mode))
	}
	return b
}
func (m Clipboard) appendTo(b []byte) []byte { return wire.AppendLongStr(b, m.Text, MaxClipboard) }
func (m ErrorMsg) appendTo(b []byte) []byte {
	return wire.AppendStr(be.AppendUint16(b, uint16(m.Code)), m.Message)
}
func (m ModeMsg) appendTo(b []byte) []byte      { return append(b, byte(m.Mode)) }
func (m ClipboardCut) appendTo(b []byte) []byte { return be.AppendUint32(b, m.Size) }
func (m Screenshot) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(append(b, m.Format), m.W), m.H)
	return append(b, m.Data...)
}

// ErrBadFrame is wrapped by every Decode error.
var ErrBadFrame = errors.New("bad desktop frame")

// Decode parses one frame. Byte slices in the result alias b. It never panics; malformed
// input (truncated, trailing bytes, out-of-range sizes, invalid UTF-8, unknown opcode) gets an
// error wrapping ErrBadFrame that names the problem. Coordinates are not clamped here: the
// receiver clamps them to its display.
func Decode(b []byte) (Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrBadFrame)
	}
	d := decoder{wire.NewDecoder(b, ErrBadFrame)}
	var m Message
	switch Op(d.Op) {
	case OpPointer:
		p := Pointer{X: d.U16("x"), Y: d.U16("y"), Buttons: d.U8("buttons")}
		if d.Err == nil && p.Buttons&^buttonsAll != 0 {
			d.Fail("unknown buttons 0x%02x", p.Buttons)
		}
		m = p
	case OpWheel:
		m = Wheel{X: d.U16("x"), Y: d.U16("y"), DX: int16(d.U16("dx")), DY: int16(d.U16("dy"))}
	case OpKey:
		k := Key{Down: d.Flag("down"), Code: d.Str("code")}
		if d.Err == nil && (k.Code == "" || len(k.Code) > MaxCode) {
			d.Fail("key code of %d bytes, want 1-%d", len(k.Code), MaxCode)
		}
		m = k
	case OpText:
		t := Text{Text: d.Str("text")}
		if d.Err == nil && len(t.Text) > MaxText {
			d.Fail("text of %d bytes is over the %d-byte limit", len(t.Text), MaxText)
		}
		m = t
	case OpAck:
		m = Ack{Seq: d.U32("seq")}
	case OpTakeControl:
		m = TakeControl{}
	case OpReleaseControl:
		m = ReleaseControl{}
	case OpResizeRequest:
		m = ResizeRequest{W: d.U16("w"), H: d.U16("h")}
	case OpSetClipboard:
		m = SetClipboard{Text: d.LongStr("clipboard", MaxClipboard)}
	case OpRefresh:
		m = Refresh{}
	case OpScreenshotRequest:
		r := ScreenshotRequest{Format: d.U8("format"), Scale: d.U8("scale")}
		if d.Err == nil && r.Format != EncPNG && r.Format != EncJPEG {
			d.Fail("screenshot format %d is neither JPEG (1) nor PNG (2)", r.Format)
		}
		if d.Err == nil && r.Scale > 100 {
			d.Fail("screenshot scale %d%% is over 100", r.Scale)
		}
		m = r
	case OpLag:
		m = Lag{Frames: d.U8("frames")}
	case OpHello:
		m = Hello{Version: d.U16("version"), Mode: Mode(d.Mode()), ViewerID: d.Str("viewer id"), ViewerName: d.Str("viewer name")}
	case OpScreen:
		s := Screen{W: d.U16("w"), H: d.U16("h")}
		if d.Err == nil && (s.W < MinDisplay || s.H < MinDisplay || s.W > MaxDisplayW || s.H > MaxDisplayH) {
			d.Fail("screen %dx%d is outside %dx%d-%dx%d", s.W, s.H, MinDisplay, MinDisplay, MaxDisplayW, MaxDisplayH)
		}
		m = s
	case OpRect:
		r := Rect{X: d.U16("x"), Y: d.U16("y"), W: d.U16("w"), H: d.U16("h"), Enc: d.U8("encoding"), Flags: d.U8("flags"), Data: d.Rest()}
		switch {
		case d.Err != nil:
		case r.W == 0 || r.H == 0 || int(r.X)+int(r.W) > MaxDisplayW || int(r.Y)+int(r.H) > MaxDisplayH:
			d.Fail("rect %dx%d at %d,%d is outside the largest display", r.W, r.H, r.X, r.Y)
		case !validEnc(r.Enc):
			d.Fail("rect encoding %d is not JPEG (1), PNG (2) or palette (3)", r.Enc)
		case r.Flags&^rectFlagsAll != 0:
			d.Fail("unknown rect flags 0x%02x", r.Flags)
		case len(r.Data) == 0 || len(r.Data) > MaxRectData:
			d.Fail("rect data of %d bytes, want 1-%d", len(r.Data), MaxRectData)
		}
		m = r
	case OpFrameEnd:
		m = FrameEnd{Seq: d.U32("seq")}
	case OpCopy:
		c := Copy{SrcX: d.U16("source x"), SrcY: d.U16("source y"), X: d.U16("x"), Y: d.U16("y"), W: d.U16("w"), H: d.U16("h")}
		switch {
		case d.Err != nil:
		case c.W == 0 || c.H == 0 || int(c.SrcX)+int(c.W) > MaxDisplayW || int(c.SrcY)+int(c.H) > MaxDisplayH ||
			int(c.X)+int(c.W) > MaxDisplayW || int(c.Y)+int(c.H) > MaxDisplayH:
			d.Fail("copy of %dx%d from %d,%d to %d,%d is outside the largest display", c.W, c.H, c.SrcX, c.SrcY, c.X, c.Y)
		}
		m = c
	case OpClipRect:
		r := ClipRect{CX: d.U16("clip x"), CY: d.U16("clip y"), CW: d.U16("clip w"), CH: d.U16("clip h"),
			X: int16(d.U16("x")), Y: int16(d.U16("y")), W: d.U16("w"), H: d.U16("h"),
			Enc: d.U8("encoding"), Flags: d.U8("flags"), Data: d.Rest()}
		switch {
		case d.Err != nil:
		case r.CW == 0 || r.CH == 0 || int(r.CX)+int(r.CW) > MaxDisplayW || int(r.CY)+int(r.CH) > MaxDisplayH:
			d.Fail("clip %dx%d at %d,%d is outside the largest display", r.CW, r.CH, r.CX, r.CY)
		case int(r.X) > int(r.CX) || int(r.Y) > int(r.CY) || int(r.X)+int(r.W) < int(r.CX)+int(r.CW) || int(r.Y)+int(r.H) < int(r.CY)+int(r.CH):
			d.Fail("clip %dx%d at %d,%d is not inside the image's %dx%d at %d,%d", r.CW, r.CH, r.CX, r.CY, r.W, r.H, r.X, r.Y)
		case !validEnc(r.Enc):
			d.Fail("rect encoding %d is not JPEG (1), PNG (2) or palette (3)", r.Enc)
		case r.Flags&^rectFlagsAll != 0:
			d.Fail("unknown rect flags 0x%02x", r.Flags)
		case len(r.Data) == 0 || len(r.Data) > MaxRectData:
			d.Fail("rect data of %d bytes, want 1-%d", len(r.Data), MaxRectData)
		}
		m = r
	case OpCursorShape:
		c := CursorShape{W: d.U16("w"), H: d.U16("h"), HotX: d.U16("hot x"), HotY: d.U16("hot y")}
		switch {
		case d.Err != nil:
		case c.W > MaxCursor || c.H > MaxCursor:
			d.Fail("cursor %dx%d is over %dx%d", c.W, c.H, MaxCursor, MaxCursor)
		case c.HotX > c.W || c.HotY > c.H:
			d.Fail("cursor hot spot %d,%d is outside %dx%d", c.HotX, c.HotY, c.W, c.H)
		case len(d.B) != int(c.W)*int(c.H)*4:
			d.Fail("cursor %dx%d needs %d bytes of RGBA, have %d", c.W, c.H, int(c.W)*int(c.H)*4, len(d.B))
		}
		c.RGBA = d.Rest()
		m = c
	case OpCursorPos:
		m = CursorPos{X: d.U16("x"), Y: d.U16("y")}
	case OpControl:
		m = Control{HolderID: d.Str("holder id"), HolderName: d.Str("holder name"), Agent: d.Flag("agent")}
	case OpViewers:
		n := int(d.U16("viewer count"))
		// Each viewer takes at least 5 bytes: never allocate more than the frame can hold.
		if d.Err == nil && (n > MaxViewers || n*5 > len(d.B)) {
			d.Fail("%d viewers do not fit in %d bytes", n, len(d.B))
		}
		var vs []ViewerInfo
		for i := 0; i < n && d.Err == nil; i++ {
			vs = append(vs, ViewerInfo{ID: d.Str("viewer id"), Name: d.Str("viewer name"), Mode: Mode(d.Mode())})
		}
		m = Viewers{Viewers: vs}
	case OpClipboard:
		m = Clipboard{Text: d.LongStr("clipboard", MaxClipboard)}
	case OpError:
		m = ErrorMsg{Code: ErrCode(d.U16("code")), Message: d.Str("message")}
	case OpMode:
		m = ModeMsg{Mode: Mode(d.Mode())}
	case OpScreenshot:
		s := Screenshot{Format: d.U8("format"), W: d.U16("w"), H: d.U16("h"), Data: d.Rest()}
		switch {
		case d.Err != nil:
		case s.Format != EncPNG && s.Format != EncJPEG:
			d.Fail("screenshot format %d is neither JPEG (1) nor PNG (2)", s.Format)
		case s.W == 0 || s.H == 0 || s.W > MaxDisplayW || s.H > MaxDisplayH:
			d.Fail("screenshot %dx%d is outside the largest display", s.W, s.H)
		case len(s.Data) == 0 || len(s.Data) > MaxScreenshot:
			d.Fail("screenshot of %d bytes, want 1-%d", len(s.Data), MaxScreenshot)
		}
		m = s
	case OpClipboardCut:
		c := ClipboardCut{Size: d.U32("size")}
		if d.Err == nil && c.Size <= MaxClipboard {
			d.Fail("clipboard cut at %d bytes, within the %d-byte limit", c.Size, MaxClipboard)
		}
		m = c
	default:
		return nil, fmt.Errorf("%w: unknown opcode 0x%02x", ErrBadFrame, b[0])
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d unexpected trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return m, nil
}

func validEnc(e uint8) bool { return e == EncJPEG || e == EncPNG || e == EncPalette }

type decoder struct{ wire.Decoder }

// ErrFrameTooLarge: a stream frame's length prefix is over the limit the reader allows.
var ErrFrameTooLarge = errors.New("desktop stream frame too large")

// WriteStreamFrame writes m's frame on the helper's stream: its length (u32), then the frame.
func WriteStreamFrame(w io.Writer, m Message) error {
	return WriteRawStreamFrame(w, Encode(m))
}

// WriteRawStreamFrame writes an already encoded frame on the helper's stream.
func WriteRawStreamFrame(w io.Writer, frame []byte) error {
	b := make([]byte, 4, 4+len(frame))
	be.PutUint32(b, uint32(len(frame)))
	_, err := w.Write(append(b, frame...))
	return err
}

// ReadStreamFrame reads one length-prefixed frame of at most max bytes from the helper's
// stream, reusing buf when it is large enough. It does not decode the frame.
func ReadStreamFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(be.Uint32(hdr[:]))
	if n == 0 || n > max {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, max)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// ClampDisplay clamps a requested display size into the allowed range (0 = the default 1280×800).
func ClampDisplay(w, h uint16) (uint16, uint16) {
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	return min(max(w, MinDisplay), MaxDisplayW), min(max(h, MinDisplay), MaxDisplayH)
}

// Default display size.
const (
	DefaultWidth  = 1280
	DefaultHeight = 800
)
