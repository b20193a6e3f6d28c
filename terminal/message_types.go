package terminal

// This file holds the terminal surface's WebSocket wire messages, shared by the
// gateway and the WASM app. It must build for GOOS=js GOARCH=wasm: no cgo, no pty,
// no gorilla here. The byte layout is documented in docs/terminal-protocol.md.
//
// Every WebSocket binary message is one frame: a 1-byte opcode followed by that
// opcode's fields. Integers are big-endian; strings are a u16 byte length then
// UTF-8 bytes; byte payloads (Input, Output) run to the end of the frame.
// Opcodes are append-only: never renumber or reuse one.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/wire"
)

// ProtocolVersion is sent in Hello; bump it only for incompatible changes.
const ProtocolVersion = 1

// Op is a frame's opcode (its first byte).
type Op uint8

// Client → server opcodes (0x01–0x7f).
const (
	OpOpen          Op = 0x01 // open a new terminal (the agent's login shell)
	OpAttach        Op = 0x02 // attach to a terminal, resuming after a byte sequence number
	OpInput         Op = 0x03 // keystrokes / pasted bytes (drivers only)
	OpResize        Op = 0x04 // this client's terminal size (drivers only)
	OpCloseTerminal Op = 0x05 // end a terminal (drivers only)
	OpListRequest   Op = 0x06 // ask for a List
	OpAck           Op = 0x07 // bytes of Output the client has written to its screen
	OpDetach        Op = 0x08 // stop receiving a terminal's output
)

// Server → client opcodes (0x80–0xff).
const (
	OpHello   Op = 0x80 // first frame of every connection
	OpList    Op = 0x81 // the agent's terminals
	OpOutput  Op = 0x82 // terminal output bytes at a sequence number
	OpGap     Op = 0x83 // output bytes [From, To) were overwritten before this client got them
	OpExit    Op = 0x84 // the terminal ended
	OpTitle   Op = 0x85 // the window title (from OSC 0/2), as text
	OpError   Op = 0x86 // a clear error message
	OpViewers Op = 0x87 // who is attached to a terminal changed
	OpMode    Op = 0x88 // you are watching / driving
	OpOpened  Op = 0x89 // answer to Open: the new terminal's id
	OpSize    Op = 0x8a // the terminal's PTY size changed
)

// Mode is a viewer's mode on the wire.
type Mode uint8

// Modes.
const (
	ModeWatch Mode = 1 // input, resize and close are dropped by the server
	ModeDrive Mode = 2
)

// ModeOf maps a permission level to a wire mode (anything below drive watches).
func ModeOf(l api.Level) Mode {
	if l.AtLeast(api.LevelDrive) {
		return ModeDrive
	}
	return ModeWatch
}

func (m Mode) String() string {
	switch m {
	case ModeWatch:
		return "watching"
	case ModeDrive:
		return "driving"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ErrCode classifies an Error frame.
type ErrCode uint16

// Error codes (append-only).
const (
	ErrCodeBadMessage ErrCode = 1 // the frame could not be decoded
	ErrCodeNotFound   ErrCode = 2 // no such terminal (ended, or another agent's)
	ErrCodeLimit      ErrCode = 3 // too many terminals (per agent or per server)
	ErrCodeWatchOnly  ErrCode = 4 // a watcher tried to open a terminal
	ErrCodeHelper     ErrCode = 5 // the agent's helper could not be reached or exited
	ErrCodeInternal   ErrCode = 6
	ErrCodeSlow       ErrCode = 7 // the client fell too far behind on control messages
)

// Limits on the wire.
const (
	MaxCols     = 1000 // sizes are clamped to [1, MaxCols] × [1, MaxRows]
	MaxRows     = 500
	MaxTitle    = 256     // bytes of a Title after sanitizing
	MaxInputLen = 1 << 20 // bytes of one Input frame
)

// Message is one wire frame.
type Message interface {
	Op() Op
	appendTo(b []byte) []byte
}

// Client → server messages.
type (
	// Open asks for a new terminal running the agent's login shell; Tag comes back in Opened.
	Open struct {
		Tag        uint32
		Cols, Rows uint16
	}
	// Attach starts receiving a terminal's output from byte sequence number Since
	// (0 = the whole scrollback; the client's last seq+len on reconnect).
	// Cols/Rows are this client's size (0 = unknown); a driver's size counts toward the PTY size.
	Attach struct {
		ID         uint32
		Since      uint64
		Cols, Rows uint16
	}
	// Input is bytes typed or pasted into terminal ID.
	Input struct {
		ID   uint32
		Data []byte
	}
	// Resize reports this client's size for terminal ID.
	Resize struct {
		ID         uint32
		Cols, Rows uint16
	}
	// CloseTerminal ends terminal ID (hangs up its shell).
	CloseTerminal struct{ ID uint32 }
	// ListRequest asks for a List.
	ListRequest struct{}
	// Ack reports N more bytes of terminal ID's Output written to the screen.
	Ack struct {
		ID uint32
		N  uint32
	}
	// Detach stops this client's output of terminal ID; the terminal keeps running.
	Detach struct{ ID uint32 }
)

// Server → client messages.
type (
	// Hello is the first frame: protocol version, your mode, and the flow-control window
	// (bytes of Output per terminal the server sends before it waits for Acks).
	Hello struct {
		Version    uint16
		Mode       Mode
		Window     uint32
		ViewerID   string
		ViewerName string
	}
	// List is the agent's terminals.
	List struct{ Terminals []TermInfo }
	// Output is terminal ID's bytes [Seq, Seq+len(Data)).
	Output struct {
		ID   uint32
		Seq  uint64
		Data []byte
	}
	// Gap says bytes [From, To) of terminal ID were overwritten in the scrollback
	// before this client received them; Output resumes at To.
	Gap struct {
		ID       uint32
		From, To uint64
	}
	// Exit says terminal ID ended: Code is the shell's exit status (-1 when unknown),
	// Reason is human-readable ("exited", "closed by alice", "agent helper exited", ...).
	Exit struct {
		ID     uint32
		Code   int32
		Reason string
	}
	// Title is terminal ID's window title, to be shown as text.
	Title struct {
		ID    uint32
		Title string
	}
	// ErrorMsg is a clear error; ID is the terminal it concerns (0 = none).
	ErrorMsg struct {
		ID      uint32
		Code    ErrCode
		Message string
	}
	// Viewers is who is attached to terminal ID now.
	Viewers struct {
		ID      uint32
		Viewers []ViewerInfo
	}
	// ModeMsg tells the client its mode for terminal ID (0 = the whole connection).
	ModeMsg struct {
		ID   uint32
		Mode Mode
	}
	// Opened answers Open(Tag): the new terminal is ID, and this client is attached to it.
	Opened struct {
		Tag uint32
		ID  uint32
	}
	// Size is terminal ID's PTY size (the smallest driver's); watchers scale to it.
	Size struct {
		ID         uint32
		Cols, Rows uint16
	}
)

// TermInfo describes one terminal in a List.
type TermInfo struct {
	ID         uint32
	Cols, Rows uint16
	Seq        uint64 // sequence number of the next output byte
	Title      string
	Viewers    []ViewerInfo
}

// ViewerInfo is one attached viewer.
type ViewerInfo struct {
	ID   string
	Name string
	Mode Mode
}

func (Open) Op() Op          { return OpOpen }
func (Attach) Op() Op        { return OpAttach }
func (Input) Op() Op         { return OpInput }
func (Resize) Op() Op        { return OpResize }
func (CloseTerminal) Op() Op { return OpCloseTerminal }
func (ListRequest) Op() Op   { return OpListRequest }
func (Ack) Op() Op           { return OpAck }
func (Detach) Op() Op        { return OpDetach }
func (Hello) Op() Op         { return OpHello }
func (List) Op() Op          { return OpList }
func (Output) Op() Op        { return OpOutput }
func (Gap) Op() Op           { return OpGap }
func (Exit) Op() Op          { return OpExit }
func (Title) Op() Op         { return OpTitle }
func (ErrorMsg) Op() Op      { return OpError }
func (Viewers) Op() Op       { return OpViewers }
func (ModeMsg) Op() Op       { return OpMode }
func (Opened) Op() Op        { return OpOpened }
func (Size) Op() Op          { return OpSize }

// Encode returns m's frame.
func Encode(m Message) []byte { return AppendEncode(nil, m) }

// AppendEncode appends m's frame to dst.
func AppendEncode(dst []byte, m Message) []byte { return m.appendTo(append(dst, byte(m.Op()))) }

var be = binary.BigEndian

func (m Open) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.Tag)
	b = be.AppendUint16(b, m.Cols)
	return be.AppendUint16(b, m.Rows)
}
func (m Attach) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint64(b, m.Since)
	b = be.AppendUint16(b, m.Cols)
	return be.AppendUint16(b, m.Rows)
}
func (m Input) appendTo(b []byte) []byte { return append(be.AppendUint32(b, m.ID), m.Data...) }
func (m Resize) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint16(b, m.Cols)
	return be.AppendUint16(b, m.Rows)
}
func (m CloseTerminal) appendTo(b []byte) []byte { return be.AppendUint32(b, m.ID) }
func (ListRequest) appendTo(b []byte) []byte     { return b }
func (m Ack) appendTo(b []byte) []byte           { return be.AppendUint32(be.AppendUint32(b, m.ID), m.N) }
func (m Detach) appendTo(b []byte) []byte        { return be.AppendUint32(b, m.ID) }

func (m Hello) appendTo(b []byte) []byte {
	b = be.AppendUint16(b, m.Version)
	b = append(b, byte(m.Mode))
	b = be.AppendUint32(b, m.Window)
	b = wire.AppendStr(b, m.ViewerID)
	return wire.AppendStr(b, m.ViewerName)
}
func (m List) appendTo(b []byte) []byte {
	n := min(len(m.Terminals), 0xffff)
	b = be.AppendUint16(b, uint16(n))
	for _, t := range m.Terminals[:n] {
		b = be.AppendUint32(b, t.ID)
		b = be.AppendUint16(b, t.Cols)
		b = be.AppendUint16(b, t.Rows)
		b = be.AppendUint64(b, t.Seq)
		b = wire.AppendStr(b, t.Title)
		b = appendViewers(b, t.Viewers)
	}
	return b
}

// AppendOutputHeader appends an Output frame's opcode and fixed fields; the data bytes follow it.
func AppendOutputHeader(b []byte, id uint32, seq uint64) []byte {
	b = append(b, byte(OpOutput))
	b = be.AppendUint32(b, id)
	return be.AppendUint64(b, seq)
}

// OutputHeaderLen is the size of an Output frame without its data.
const OutputHeaderLen = 1 + 4 + 8

func (m Output) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint64(b, m.Seq)
	return append(b, m.Data...)
}
func (m Gap) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint64(b, m.From)
	return be.AppendUint64(b, m.To)
}
func (m Exit) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint32(b, uint32(m.Code))
	return wire.AppendStr(b, m.Reason)
}
func (m Title) appendTo(b []byte) []byte { return wire.AppendStr(be.AppendUint32(b, m.ID), m.Title) }
func (m ErrorMsg) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint16(b, uint16(m.Code))
	return wire.AppendStr(b, m.Message)
}
func (m Viewers) appendTo(b []byte) []byte { return appendViewers(be.AppendUint32(b, m.ID), m.Viewers) }
func (m ModeMsg) appendTo(b []byte) []byte { return append(be.AppendUint32(b, m.ID), byte(m.Mode)) }
func (m Opened) appendTo(b []byte) []byte  { return be.AppendUint32(be.AppendUint32(b, m.Tag), m.ID) }
func (m Size) appendTo(b []byte) []byte {
	b = be.AppendUint32(b, m.ID)
	b = be.AppendUint16(b, m.Cols)
	return be.AppendUint16(b, m.Rows)
}

func appendViewers(b []byte, vs []ViewerInfo) []byte {
	n := min(len(vs), 0xffff)
	b = be.AppendUint16(b, uint16(n))
	for _, v := range vs[:n] {
		b = wire.AppendStr(b, v.ID)
		b = wire.AppendStr(b, v.Name)
		b = append(b, byte(v.Mode))
	}
	return b
}

// ErrBadFrame is wrapped by every Decode error.
var ErrBadFrame = errors.New("bad terminal frame")

// Decode parses one frame. Byte slices in the result (Input.Data, Output.Data) alias b.
// It never panics; malformed input gets an error wrapping ErrBadFrame that names the problem.
func Decode(b []byte) (Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrBadFrame)
	}
	d := decoder{wire.NewDecoder(b, ErrBadFrame)}
	var m Message
	switch Op(d.Op) {
	case OpOpen:
		m = Open{Tag: d.U32("tag"), Cols: d.U16("cols"), Rows: d.U16("rows")}
	case OpAttach:
		m = Attach{ID: d.U32("id"), Since: d.U64("since"), Cols: d.U16("cols"), Rows: d.U16("rows")}
	case OpInput:
		id := d.U32("id")
		data := d.Rest()
		if d.Err == nil && len(data) > MaxInputLen {
			d.Fail("input of %d bytes is over the %d-byte limit", len(data), MaxInputLen)
		}
		m = Input{ID: id, Data: data}
	case OpResize:
		m = Resize{ID: d.U32("id"), Cols: d.U16("cols"), Rows: d.U16("rows")}
	case OpCloseTerminal:
		m = CloseTerminal{ID: d.U32("id")}
	case OpListRequest:
		m = ListRequest{}
	case OpAck:
		m = Ack{ID: d.U32("id"), N: d.U32("n")}
	case OpDetach:
		m = Detach{ID: d.U32("id")}
	case OpHello:
		m = Hello{Version: d.U16("version"), Mode: Mode(d.Mode()), Window: d.U32("window"), ViewerID: d.Str("viewer id"), ViewerName: d.Str("viewer name")}
	case OpList:
		n := int(d.U16("terminal count"))
		// Each entry takes at least 20 bytes: never allocate more than the frame can hold.
		if d.Err == nil && n*20 > len(d.B) {
			d.Fail("%d terminals do not fit in %d bytes", n, len(d.B))
		}
		var ts []TermInfo
		for i := 0; i < n && d.Err == nil; i++ {
			ts = append(ts, TermInfo{ID: d.U32("id"), Cols: d.U16("cols"), Rows: d.U16("rows"), Seq: d.U64("seq"), Title: d.Str("title"), Viewers: d.viewers()})
		}
		m = List{Terminals: ts}
	case OpOutput:
		m = Output{ID: d.U32("id"), Seq: d.U64("seq"), Data: d.Rest()}
	case OpGap:
		g := Gap{ID: d.U32("id"), From: d.U64("from"), To: d.U64("to")}
		if d.Err == nil && g.From > g.To {
			d.Fail("gap from %d is after to %d", g.From, g.To)
		}
		m = g
	case OpExit:
		m = Exit{ID: d.U32("id"), Code: int32(d.U32("code")), Reason: d.Str("reason")}
	case OpTitle:
		m = Title{ID: d.U32("id"), Title: d.Str("title")}
	case OpError:
		m = ErrorMsg{ID: d.U32("id"), Code: ErrCode(d.U16("code")), Message: d.Str("message")}
	case OpViewers:
		m = Viewers{ID: d.U32("id"), Viewers: d.viewers()}
	case OpMode:
		m = ModeMsg{ID: d.U32("id"), Mode: Mode(d.Mode())}
	case OpOpened:
		m = Opened{Tag: d.U32("tag"), ID: d.U32("id")}
	case OpSize:
		m = Size{ID: d.U32("id"), Cols: d.U16("cols"), Rows: d.U16("rows")}
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

type decoder struct{ wire.Decoder }

func (d *decoder) viewers() []ViewerInfo {
	n := int(d.U16("viewer count"))
	// Each viewer takes at least 5 bytes.
	if d.Err == nil && n*5 > len(d.B) {
		d.Fail("%d viewers do not fit in %d bytes", n, len(d.B))
	}
	var vs []ViewerInfo
	for i := 0; i < n && d.Err == nil; i++ {
		vs = append(vs, ViewerInfo{ID: d.Str("viewer id"), Name: d.Str("viewer name"), Mode: Mode(d.Mode())})
	}
	return vs
}

// ClampSize clamps a requested size into [1, MaxCols] × [1, MaxRows]; 0 becomes 80×24's part.
func ClampSize(cols, rows uint16) (uint16, uint16) {
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	return min(cols, MaxCols), min(rows, MaxRows)
}

// SanitizeTitle makes an agent-controlled title safe to show as text: valid UTF-8,
// no control characters, at most MaxTitle bytes.
func SanitizeTitle(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
	if len(s) > MaxTitle {
		s = s[:MaxTitle]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
