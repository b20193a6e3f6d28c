package browser

// This file holds the browser surface's viewer wire messages, shared by the gateway (view.go)
// and the WASM app. It must build for GOOS=js GOARCH=wasm: no chromedp, no gorilla here. The
// byte layout is documented in docs/browser-protocol.md.
//
// Every message is one binary WebSocket message: a 1-byte opcode followed by that opcode's
// fields. Integers are big-endian; strings are a u16 byte length then UTF-8 bytes; byte
// payloads (a frame's JPEG, a file chunk) run to the end of the message. Opcodes are
// append-only: never renumber or reuse one.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/porthole/porthole/internal/wire"
)

// ProtocolVersion is sent in Hello; bump it only for incompatible changes.
const ProtocolVersion = 1

// Op is a message's opcode (its first byte).
type Op uint8

// Viewer → gateway opcodes (0x01–0x3f).
const (
	OpPointer        Op = 0x01 // pointer position and button state, page CSS px
	OpWheel          Op = 0x02 // scroll by CSS px at a position
	OpKey            Op = 0x03 // a key down/up, by DOM KeyboardEvent.code (and .key)
	OpText           Op = 0x04 // text typed (IME, phone keyboards, paste-as-typing)
	OpAck            Op = 0x05 // the viewer has drawn every frame up to Seq
	OpTakeControl    Op = 0x06 // become the one driver of the browser
	OpReleaseControl Op = 0x07 // give control up
	OpResize         Op = 0x08 // the viewer's drawing size: the screencast follows the largest
	OpNavigate       Op = 0x09 // load a URL in the active tab
	OpHistory        Op = 0x0a // back, forward, reload, stop
	OpTabNew         Op = 0x0b // open a tab (and make it active)
	OpTabSwitch      Op = 0x0c // make a tab active
	OpTabClose       Op = 0x0d // close a tab
	OpDialogAnswer   Op = 0x0e // answer the open JavaScript dialog
	OpFileBegin      Op = 0x0f // a file for the open file chooser starts: name, size
	OpFileData       Op = 0x10 // the next bytes of that file
	OpFileDone       Op = 0x11 // set the files sent onto the chooser's input (or cancel)
	OpRefresh        Op = 0x12 // send the latest frame again
	OpSelectChoose   Op = 0x13 // choose an option of the open <select> popup (or close it)
)

// Gateway → viewer opcodes (0x80–0xbf).
const (
	OpHello       Op = 0x80 // first message to a viewer
	OpFrame       Op = 0x81 // one screencast frame (JPEG) and its metadata
	OpTabs        Op = 0x82 // the tabs
	OpNav         Op = 0x83 // the active tab's URL and navigation state
	OpDialog      Op = 0x84 // a JavaScript dialog opened or closed
	OpFileChooser Op = 0x85 // the page opened (or the gateway closed) a file chooser
	OpDownloads   Op = 0x86 // the downloads
	OpControl     Op = 0x87 // who holds control, whether the agent's automation is on
	OpViewers     Op = 0x88 // who is attached
	OpError       Op = 0x89 // a clear error message
	OpMode        Op = 0x8a // you are watching / driving (your permission, not control)
	OpSelectPopup Op = 0x8b // a <select>'s popup opened (its options) or closed
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

// Pointer buttons (bit mask, as the desktop's).
const (
	ButtonLeft   uint8 = 1 << 0
	ButtonMiddle uint8 = 1 << 1
	ButtonRight  uint8 = 1 << 2
	buttonsAll         = ButtonLeft | ButtonMiddle | ButtonRight
)

// Modifier keys (bit mask, CDP's Input domain values).
const (
	ModAlt   uint8 = 1
	ModCtrl  uint8 = 2
	ModMeta  uint8 = 4
	ModShift uint8 = 8
	modsAll        = ModAlt | ModCtrl | ModMeta | ModShift
)

// History actions.
const (
	HistBack    uint8 = 1
	HistForward uint8 = 2
	HistReload  uint8 = 3
	HistStop    uint8 = 4
)

// Download states.
const (
	DownloadProgress  uint8 = 1
	DownloadCompleted uint8 = 2
	DownloadCanceled  uint8 = 3
)

// ErrCode classifies an Error message.
type ErrCode uint16

// Error codes (append-only).
const (
	ErrCodeBadMessage ErrCode = 1 // the message could not be decoded
	ErrCodeWatchOnly  ErrCode = 2 // input from a watcher (dropped)
	ErrCodeNotHolder  ErrCode = 3 // input without holding control (dropped)
	ErrCodeBrowser    ErrCode = 4 // the browser could not be reached, crashed or exited
	ErrCodeInternal   ErrCode = 5
	ErrCodeTooLarge   ErrCode = 6 // text, URL or upload over its limit
	ErrCodeRefused    ErrCode = 7 // a request the browser refused (bad URL, no such tab, ...)
)

// Limits on the wire.
const (
	MaxText      = 4 << 10  // bytes of one Text message
	MaxCode      = 64       // bytes of a key code or key
	MaxURL       = 16 << 10 // bytes of a URL sent by a viewer
	MaxTabs      = 256      // tabs listed
	MaxDownloads = 256      // downloads listed
	MaxViewers   = 1024
	MaxFrameData = 16 << 20 // bytes of one frame's JPEG
	MaxChunk     = 256 << 10
	MaxUpload    = 64 << 20 // bytes of one uploaded file
	MaxFiles     = 32       // files set on one chooser
	MaxViewSize  = 7680     // a viewer's size is clamped to [MinViewSize, MaxViewSize]
	MinViewSize  = 16
	MaxOptions   = 1024 // options of a <select> popup
)

// Message is one wire message.
type Message interface {
	Op() Op
	appendTo(b []byte) []byte
}

// Viewer → gateway.
type (
	// Pointer moves the pointer to (X, Y), page CSS px, with Buttons held (a change of
	// Buttons presses or releases buttons there) and Modifiers.
	Pointer struct {
		X, Y      uint16
		Buttons   uint8
		Modifiers uint8
	}
	// Wheel scrolls DX, DY CSS px (positive: right, down) at (X, Y).
	Wheel struct {
		X, Y      uint16
		DX, DY    int16
		Modifiers uint8
	}
	// Key presses (Down) or releases a key named by its DOM KeyboardEvent.code; Key is the
	// KeyboardEvent.key when the viewer knows it ("" = derived from Code on a US layout).
	// Modifiers are the keys held, as the viewer sees them.
	Key struct {
		Down      bool
		Modifiers uint8
		Code      string
		Key       string
	}
	// Text types text as if from a keyboard (Input.insertText).
	Text struct{ Text string }
	// Ack says the viewer has drawn every frame up to Seq.
	Ack struct{ Seq uint32 }
	// TakeControl asks to be the browser's one driver.
	TakeControl struct{}
	// ReleaseControl gives control up.
	ReleaseControl struct{}
	// Resize is the viewer's drawing size in device pixels; the screencast's size follows
	// the largest viewer.
	Resize struct{ W, H uint16 }
	// Navigate loads URL in the active tab ("example.org" means https://example.org).
	Navigate struct{ URL string }
	// History is back, forward, reload or stop on the active tab.
	History struct{ Action uint8 }
	// TabNew opens a tab on URL ("" = about:blank) and makes it active.
	TabNew struct{ URL string }
	// TabSwitch makes tab ID active.
	TabSwitch struct{ ID string }
	// TabClose closes tab ID.
	TabClose struct{ ID string }
	// DialogAnswer accepts or dismisses the open JavaScript dialog; Prompt is a prompt's text.
	DialogAnswer struct {
		Accept bool
		Prompt string
	}
	// FileBegin starts a file for the open file chooser: Size bytes follow in FileData.
	FileBegin struct {
		Name string
		Size uint32
	}
	// FileData is the next bytes of the current file.
	FileData struct{ Data []byte }
	// FileDone sets the files sent since the chooser opened onto its input, or cancels.
	FileDone struct{ Cancel bool }
	// Refresh asks for the latest frame again.
	Refresh struct{}
	// SelectChoose picks option Index of the open <select> popup; -1 closes it unchanged.
	SelectChoose struct{ Index int32 }
)

// Gateway → viewer.
type (
	// Hello is the first message to a viewer.
	Hello struct {
		Version    uint16
		Mode       Mode
		ViewerID   string
		ViewerName string
	}
	// Frame is one screencast frame: Data is a JPEG of the page's viewport, W×H page CSS px
	// (the image may be smaller: scale pointer positions by W/width), scrolled to
	// (ScrollX, ScrollY). The viewer acks Seq once drawn.
	Frame struct {
		Seq              uint32
		W, H             uint16
		ScrollX, ScrollY int32
		Data             []byte
	}
	// Tabs are the browser's tabs, one of them Active.
	Tabs struct{ Tabs []TabInfo }
	// Nav is the active tab's state.
	Nav struct {
		URL        string
		CanBack    bool
		CanForward bool
		Loading    bool
	}
	// Dialog is a JavaScript dialog (Type alert, confirm, prompt, beforeunload) opened, or
	// closed (Open false).
	Dialog struct {
		Open    bool
		Type    string
		Message string
		Default string
		URL     string
	}
	// FileChooser says the page asks for files (Open), or the request is over.
	FileChooser struct {
		Open     bool
		Multiple bool
	}
	// Downloads are the downloads of this browser session.
	Downloads struct{ Downloads []DownloadInfo }
	// Control says who holds control ("" = nobody) and whether the agent's own automation
	// is connected (Automating: its input is refused while a person holds control).
	Control struct {
		HolderID   string
		HolderName string
		Automating bool
	}
	// Viewers is who is attached.
	Viewers struct{ Viewers []ViewerInfo }
	// ErrorMsg is a clear error.
	ErrorMsg struct {
		Code    ErrCode
		Message string
	}
	// ModeMsg tells the viewer its permission.
	ModeMsg struct{ Mode Mode }
	// SelectPopup says a <select>'s popup opened with Options, Selected being chosen now
	// (-1: none), or closed (Open false). Headless Chromium does not draw it in frames.
	SelectPopup struct {
		Open     bool
		Selected int32
		Options  []SelectOption
	}
)

// SelectOption is one option of a <select> popup.
type SelectOption struct {
	Label    string
	Disabled bool
}

// TabInfo is one tab. Favicon is "" or a data URL of a PNG (FaviconPrefix), drawn by the
// agent's own browser and re-encoded by the gateway; clients show only a Favicon that starts
// with FaviconPrefix, as an image.
type TabInfo struct {
	ID, Title, URL, Favicon string
	Active                  bool
}

// FaviconPrefix starts every non-empty TabInfo.Favicon.
const FaviconPrefix = "data:image/png;base64,"

// DownloadInfo is one download; Name is its file name in /home/agent/Downloads.
type DownloadInfo struct {
	ID, Name, URL   string
	Received, Total uint64
	State           uint8
}

// ViewerInfo is one attached viewer.
type ViewerInfo struct {
	ID   string
	Name string
	Mode Mode
}

func (Pointer) Op() Op        { return OpPointer }
func (Wheel) Op() Op          { return OpWheel }
func (Key) Op() Op            { return OpKey }
func (Text) Op() Op           { return OpText }
func (Ack) Op() Op            { return OpAck }
func (TakeControl) Op() Op    { return OpTakeControl }
func (ReleaseControl) Op() Op { return OpReleaseControl }
func (Resize) Op() Op         { return OpResize }
func (Navigate) Op() Op       { return OpNavigate }
func (History) Op() Op        { return OpHistory }
func (TabNew) Op() Op         { return OpTabNew }
func (TabSwitch) Op() Op      { return OpTabSwitch }
func (TabClose) Op() Op       { return OpTabClose }
func (DialogAnswer) Op() Op   { return OpDialogAnswer }
func (FileBegin) Op() Op      { return OpFileBegin }
func (FileData) Op() Op       { return OpFileData }
func (FileDone) Op() Op       { return OpFileDone }
func (Refresh) Op() Op        { return OpRefresh }
func (SelectChoose) Op() Op   { return OpSelectChoose }
func (SelectPopup) Op() Op    { return OpSelectPopup }
func (Hello) Op() Op          { return OpHello }
func (Frame) Op() Op          { return OpFrame }
func (Tabs) Op() Op           { return OpTabs }
func (Nav) Op() Op            { return OpNav }
func (Dialog) Op() Op         { return OpDialog }
func (FileChooser) Op() Op    { return OpFileChooser }
func (Downloads) Op() Op      { return OpDownloads }
func (Control) Op() Op        { return OpControl }
func (Viewers) Op() Op        { return OpViewers }
func (ErrorMsg) Op() Op       { return OpError }
func (ModeMsg) Op() Op        { return OpMode }

// IsInput reports whether op is input or a browser command that only the control holder may
// send (a watcher's is dropped by the gateway and never reaches Chromium).
func IsInput(op Op) bool {
	switch op {
	case OpPointer, OpWheel, OpKey, OpText, OpNavigate, OpHistory, OpTabNew, OpTabSwitch,
		OpTabClose, OpDialogAnswer, OpFileBegin, OpFileData, OpFileDone, OpSelectChoose:
		return true
	}
	return false
}

// Encode returns m's message.
func Encode(m Message) []byte { return AppendEncode(nil, m) }

// AppendEncode appends m's message to dst.
func AppendEncode(dst []byte, m Message) []byte { return m.appendTo(append(dst, byte(m.Op()))) }

var be = binary.BigEndian

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func (m Pointer) appendTo(b []byte) []byte {
	return append(be.AppendUint16(be.AppendUint16(b, m.X), m.Y), m.Buttons, m.Modifiers)
}
func (m Wheel) appendTo(b []byte) []byte {
	b = be.AppendUint16(be.AppendUint16(b, m.X), m.Y)
	return append(be.AppendUint16(be.AppendUint16(b, uint16(m.DX)), uint16(m.DY)), m.Modifiers)
}
func (m Key) appendTo(b []byte) []byte {
	return wire.AppendStr(wire.AppendStr(append(b, b2u(m.Down), m.Modifiers), m.Code), m.Key)
}
func (m Text) appendTo(b []byte) []byte         { return wire.AppendStr(b, m.Text) }
func (m Ack) appendTo(b []byte) []byte          { return be.AppendUint32(b, m.Seq) }
func (TakeControl) appendTo(b []byte) []byte    { return b }
func (ReleaseControl) appendTo(b []byte) []byte { return b }
func (m Resize) appendTo(b []byte) []byte       { return be.AppendUint16(be.AppendUint16(b, m.W), m.H) }
func (m Navigate) appendTo(b []byte) []byte     { return wire.AppendStr(b, m.URL) }
func (m History) appendTo(b []byte) []byte      { return append(b, m.Action) }
func (m TabNew) appendTo(b []byte) []byte       { return wire.AppendStr(b, m.URL) }
func (m TabSwitch) appendTo(b []byte) []byte    { return wire.AppendStr(b, m.ID) }
func (m TabClose) appendTo(b []byte) []byte     { return wire.AppendStr(b, m.ID) }
func (m DialogAnswer) appendTo(b []byte) []byte {
	return wire.AppendStr(append(b, b2u(m.Accept)), m.Prompt)
}
func (m FileBegin) appendTo(b []byte) []byte {
	return be.AppendUint32(wire.AppendStr(b, m.Name), m.Size)
}
func (m FileData) appendTo(b []byte) []byte     { return append(b, m.Data...) }
func (m FileDone) appendTo(b []byte) []byte     { return append(b, b2u(m.Cancel)) }
func (Refresh) appendTo(b []byte) []byte        { return b }
func (m SelectChoose) appendTo(b []byte) []byte { return be.AppendUint32(b, uint32(m.Index)) }
func (m SelectPopup) appendTo(b []byte) []byte {
	n := min(len(m.Options), MaxOptions)
	b = be.AppendUint16(be.AppendUint32(append(b, b2u(m.Open)), uint32(m.Selected)), uint16(n))
	for _, o := range m.Options[:n] {
		b = append(wire.AppendStr(b, o.Label), b2u(o.Disabled))
	}
	return b
}

func (m Hello) appendTo(b []byte) []byte {
	b = append(be.AppendUint16(b, m.Version), byte(m.Mode))
	return wire.AppendStr(wire.AppendStr(b, m.ViewerID), m.ViewerName)
}
func (m Frame) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.Seq)
	b = be.AppendUint16(be.AppendUint16(b, m.W), m.H)
	b = be.AppendUint32(be.AppendUint32(b, uint32(m.ScrollX)), uint32(m.ScrollY))
	return append(b, m.Data...)
}
func (m Tabs) appendTo(b []byte) []byte {
	n := min(len(m.Tabs), MaxTabs)
	b = be.AppendUint16(b, uint16(n))
	for _, t := range m.Tabs[:n] {
		b = wire.AppendStr(wire.AppendStr(wire.AppendStr(wire.AppendStr(b, t.ID), t.Title), t.URL), t.Favicon)
		b = append(b, b2u(t.Active))
	}
	return b
}
func (m Nav) appendTo(b []byte) []byte {
	return append(wire.AppendStr(b, m.URL), b2u(m.CanBack), b2u(m.CanForward), b2u(m.Loading))
}
func (m Dialog) appendTo(b []byte) []byte {
	b = append(b, b2u(m.Open))
	return wire.AppendStr(wire.AppendStr(wire.AppendStr(wire.AppendStr(b, m.Type), m.Message), m.Default), m.URL)
}
func (m FileChooser) appendTo(b []byte) []byte { return append(b, b2u(m.Open), b2u(m.Multiple)) }
func (m Downloads) appendTo(b []byte) []byte {
	n := min(len(m.Downloads), MaxDownloads)
	b = be.AppendUint16(b, uint16(n))
	for _, d := range m.Downloads[:n] {
		b = wire.AppendStr(wire.AppendStr(wire.AppendStr(b, d.ID), d.Name), d.URL)
		b = be.AppendUint64(be.AppendUint64(b, d.Received), d.Total)
		b = append(b, d.State)
	}
	return b
}
func (m Control) appendTo(b []byte) []byte {
	return append(wire.AppendStr(wire.AppendStr(b, m.HolderID), m.HolderName), b2u(m.Automating))
}
func (m Viewers) appendTo(b []byte) []byte {
	n := min(len(m.Viewers), MaxViewers)
	b = be.AppendUint16(b, uint16(n))
	for _, v := range m.Viewers[:n] {
		b = append(wire.AppendStr(wire.AppendStr(b, v.ID), v.Name), byte(v.Mode))
	}
	return b
}
func (m ErrorMsg) appendTo(b []byte) []byte {
	return wire.AppendStr(be.AppendUint16(b, uint16(m.Code)), m.Message)
}
func (m ModeMsg) appendTo(b []byte) []byte { return append(b, byte(m.Mode)) }

// ErrBadMessage is wrapped by every Decode error.
var ErrBadMessage = errors.New("bad browser message")

// Decode parses one message. Byte slices in the result alias b. It never panics; malformed
// input (truncated, trailing bytes, out-of-range sizes, invalid UTF-8, unknown opcode) gets
// an error wrapping ErrBadMessage that names the problem. Coordinates are not clamped here:
// the gateway clamps them to the page.
func Decode(b []byte) (Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrBadMessage)
	}
	d := decoder{wire.NewDecoder(b, ErrBadMessage)}
	var m Message
	switch Op(d.Op) {
	case OpPointer:
		p := Pointer{X: d.U16("x"), Y: d.U16("y"), Buttons: d.U8("buttons"), Modifiers: d.mods()}
		if d.Err == nil && p.Buttons&^buttonsAll != 0 {
			d.Fail("unknown buttons 0x%02x", p.Buttons)
		}
		m = p
	case OpWheel:
		m = Wheel{X: d.U16("x"), Y: d.U16("y"), DX: int16(d.U16("dx")), DY: int16(d.U16("dy")), Modifiers: d.mods()}
	case OpKey:
		k := Key{Down: d.Flag("down"), Modifiers: d.mods(), Code: d.Str("code"), Key: d.Str("key")}
		if d.Err == nil && (k.Code == "" && k.Key == "" || len(k.Code) > MaxCode || len(k.Key) > MaxCode) {
			d.Fail("key code of %d bytes and key of %d bytes, want one of them, each at most %d", len(k.Code), len(k.Key), MaxCode)
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
	case OpResize:
		m = Resize{W: d.U16("w"), H: d.U16("h")}
	case OpNavigate:
		m = Navigate{URL: d.url("url")}
	case OpHistory:
		h := History{Action: d.U8("action")}
		if d.Err == nil && (h.Action < HistBack || h.Action > HistStop) {
			d.Fail("history action %d is not 1-4", h.Action)
		}
		m = h
	case OpTabNew:
		m = TabNew{URL: d.url("url")}
	case OpTabSwitch:
		m = TabSwitch{ID: d.Str("tab id")}
	case OpTabClose:
		m = TabClose{ID: d.Str("tab id")}
	case OpDialogAnswer:
		m = DialogAnswer{Accept: d.Flag("accept"), Prompt: d.Str("prompt")}
	case OpFileBegin:
		f := FileBegin{Name: d.Str("file name"), Size: d.U32("size")}
		if d.Err == nil && (f.Name == "" || f.Size > MaxUpload) {
			d.Fail("file %q of %d bytes: want a name and at most %d bytes", f.Name, f.Size, MaxUpload)
		}
		m = f
	case OpFileData:
		f := FileData{Data: d.Rest()}
		if d.Err == nil && (len(f.Data) == 0 || len(f.Data) > MaxChunk) {
			d.Fail("file chunk of %d bytes, want 1-%d", len(f.Data), MaxChunk)
		}
		m = f
	case OpFileDone:
		m = FileDone{Cancel: d.Flag("cancel")}
	case OpRefresh:
		m = Refresh{}
	case OpSelectChoose:
		c := SelectChoose{Index: int32(d.U32("index"))}
		if d.Err == nil && (c.Index < -1 || c.Index >= MaxOptions) {
			d.Fail("option %d is not -1 or 0-%d", c.Index, MaxOptions-1)
		}
		m = c
	case OpSelectPopup:
		p := SelectPopup{Open: d.Flag("open"), Selected: int32(d.U32("selected"))}
		n := int(d.U16("option count"))
		// Each option takes at least 3 bytes: never allocate more than the message can hold.
		if d.Err == nil && (n > MaxOptions || n*3 > len(d.B) || p.Selected < -1 || p.Selected >= int32(max(n, 1))) {
			d.Fail("%d options (selected %d) do not fit in %d bytes", n, p.Selected, len(d.B))
		}
		for i := 0; i < n && d.Err == nil; i++ {
			p.Options = append(p.Options, SelectOption{Label: d.Str("label"), Disabled: d.Flag("disabled")})
		}
		m = p
	case OpHello:
		m = Hello{Version: d.U16("version"), Mode: Mode(d.Mode()), ViewerID: d.Str("viewer id"), ViewerName: d.Str("viewer name")}
	case OpFrame:
		f := Frame{Seq: d.U32("seq"), W: d.U16("w"), H: d.U16("h"), ScrollX: int32(d.U32("scroll x")), ScrollY: int32(d.U32("scroll y")), Data: d.Rest()}
		if d.Err == nil && (len(f.Data) == 0 || len(f.Data) > MaxFrameData) {
			d.Fail("frame of %d bytes, want 1-%d", len(f.Data), MaxFrameData)
		}
		m = f
	case OpTabs:
		n := int(d.U16("tab count"))
		// Each tab takes at least 9 bytes: never allocate more than the message can hold.
		if d.Err == nil && (n > MaxTabs || n*9 > len(d.B)) {
			d.Fail("%d tabs do not fit in %d bytes", n, len(d.B))
		}
		var ts []TabInfo
		for i := 0; i < n && d.Err == nil; i++ {
			ts = append(ts, TabInfo{ID: d.Str("tab id"), Title: d.Str("title"), URL: d.Str("url"), Favicon: d.Str("favicon"), Active: d.Flag("active")})
		}
		m = Tabs{Tabs: ts}
	case OpNav:
		m = Nav{URL: d.Str("url"), CanBack: d.Flag("can back"), CanForward: d.Flag("can forward"), Loading: d.Flag("loading")}
	case OpDialog:
		m = Dialog{Open: d.Flag("open"), Type: d.Str("type"), Message: d.Str("message"), Default: d.Str("default"), URL: d.Str("url")}
	case OpFileChooser:
		m = FileChooser{Open: d.Flag("open"), Multiple: d.Flag("multiple")}
	case OpDownloads:
		n := int(d.U16("download count"))
		if d.Err == nil && (n > MaxDownloads || n*23 > len(d.B)) {
			d.Fail("%d downloads do not fit in %d bytes", n, len(d.B))
		}
		var ds []DownloadInfo
		for i := 0; i < n && d.Err == nil; i++ {
			x := DownloadInfo{ID: d.Str("download id"), Name: d.Str("name"), URL: d.Str("url"), Received: d.U64("received"), Total: d.U64("total"), State: d.U8("state")}
			if d.Err == nil && (x.State < DownloadProgress || x.State > DownloadCanceled) {
				d.Fail("download state %d is not 1-3", x.State)
			}
			ds = append(ds, x)
		}
		m = Downloads{Downloads: ds}
	case OpControl:
		m = Control{HolderID: d.Str("holder id"), HolderName: d.Str("holder name"), Automating: d.Flag("automating")}
	case OpViewers:
		n := int(d.U16("viewer count"))
		if d.Err == nil && (n > MaxViewers || n*5 > len(d.B)) {
			d.Fail("%d viewers do not fit in %d bytes", n, len(d.B))
		}
		var vs []ViewerInfo
		for i := 0; i < n && d.Err == nil; i++ {
			vs = append(vs, ViewerInfo{ID: d.Str("viewer id"), Name: d.Str("viewer name"), Mode: Mode(d.Mode())})
		}
		m = Viewers{Viewers: vs}
	case OpError:
		m = ErrorMsg{Code: ErrCode(d.U16("code")), Message: d.Str("message")}
	case OpMode:
		m = ModeMsg{Mode: Mode(d.Mode())}
	default:
		return nil, fmt.Errorf("%w: unknown opcode 0x%02x", ErrBadMessage, b[0])
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d unexpected trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return m, nil
}

type decoder struct{ wire.Decoder }

func (d *decoder) mods() uint8 {
	v := d.U8("modifiers")
	if d.Err == nil && v&^modsAll != 0 {
		d.Fail("unknown modifiers 0x%02x", v)
	}
	return v
}

func (d *decoder) url(field string) string {
	s := d.Str(field)
	if d.Err == nil && len(s) > MaxURL {
		d.Fail("%s of %d bytes is over the %d-byte limit", field, len(s), MaxURL)
	}
	return s
}
