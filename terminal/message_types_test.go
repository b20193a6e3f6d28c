package terminal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sampleMessages has one of every message, with awkward values.
func sampleMessages() []Message {
	vs := []ViewerInfo{{ID: "u1", Name: "alice", Mode: ModeDrive}, {ID: "token:9", Name: "agent ☃", Mode: ModeWatch}}
	return []Message{
		Open{Tag: 7, Cols: 120, Rows: 40},
		Attach{ID: 3, Since: 1<<40 + 5, Cols: 80, Rows: 24},
		Input{ID: 3, Data: []byte("echo hi\r")},
		Input{ID: 3, Data: []byte{}},
		Resize{ID: 3, Cols: 1000, Rows: 1},
		CloseTerminal{ID: 3},
		ListRequest{},
		Ack{ID: 3, N: 65536},
		Detach{ID: 3},
		Hello{Version: ProtocolVersion, Mode: ModeWatch, Window: 256 << 10, ViewerID: "u1", ViewerName: "alice"},
		List{},
		List{Terminals: []TermInfo{{ID: 1, Cols: 80, Rows: 24, Seq: 99, Title: "vim ✓", Viewers: vs}, {ID: 2, Viewers: []ViewerInfo{}}}},
		Output{ID: 3, Seq: 12, Data: []byte("\xe2\x82")}, // half a rune: bytes, not text
		Gap{ID: 3, From: 10, To: 1 << 20},
		Exit{ID: 3, Code: -1, Reason: "agent helper exited"},
		Title{ID: 3, Title: "<b>not html</b>"},
		ErrorMsg{ID: 0, Code: ErrCodeLimit, Message: "terminal limit reached"},
		Viewers{ID: 3, Viewers: vs},
		ModeMsg{ID: 0, Mode: ModeDrive},
		Opened{Tag: 7, ID: 3},
		Size{ID: 3, Cols: 100, Rows: 30},
	}
}

// normalize makes empty and nil slices compare equal.
func normalize(m Message) Message {
	switch v := m.(type) {
	case Input:
		if len(v.Data) == 0 {
			v.Data = nil
		}
		return v
	case Output:
		if len(v.Data) == 0 {
			v.Data = nil
		}
		return v
	case List:
		if len(v.Terminals) == 0 {
			v.Terminals = nil
		}
		for i := range v.Terminals {
			if len(v.Terminals[i].Viewers) == 0 {
				v.Terminals[i].Viewers = nil
			}
		}
		return v
	case Viewers:
		if len(v.Viewers) == 0 {
			v.Viewers = nil
		}
		return v
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := Encode(m)
		if Op(b[0]) != m.Op() {
			t.Errorf("Encode(%#v)[0] = 0x%02x, want 0x%02x", m, b[0], m.Op())
		}
		got, err := Decode(b)
		if err != nil {
			t.Errorf("Decode(Encode(%#v)) error: %v", m, err)
			continue
		}
		if !reflect.DeepEqual(normalize(got), normalize(m)) {
			t.Errorf("Decode(Encode(%#v)) = %#v, want the same", m, got)
		}
	}
}

// TestLayout pins the documented byte layout (docs/terminal-protocol.md) so the doc and code cannot drift.
func TestLayout(t *testing.T) {
	tests := []struct {
		m    Message
		want []byte
	}{
		{Open{Tag: 7, Cols: 120, Rows: 40}, []byte{0x01, 0, 0, 0, 7, 0, 120, 0, 40}},
		{Ack{ID: 3, N: 258}, []byte{0x07, 0, 0, 0, 3, 0, 0, 1, 2}},
		{Opened{Tag: 7, ID: 3}, []byte{0x89, 0, 0, 0, 7, 0, 0, 0, 3}},
		{Output{ID: 3, Seq: 1, Data: []byte("hi")}, []byte{0x82, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 'h', 'i'}},
		{Title{ID: 1, Title: "ab"}, []byte{0x85, 0, 0, 0, 1, 0, 2, 'a', 'b'}},
		{Exit{ID: 1, Code: -1, Reason: ""}, []byte{0x84, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0}},
		{ModeMsg{ID: 0, Mode: ModeWatch}, []byte{0x88, 0, 0, 0, 0, 1}},
	}
	for _, tt := range tests {
		if got := Encode(tt.m); !bytes.Equal(got, tt.want) {
			t.Errorf("Encode(%#v) = % x, want % x", tt.m, got, tt.want)
		}
	}
	if got := AppendOutputHeader(nil, 3, 1); !bytes.Equal(got, Encode(Output{ID: 3, Seq: 1})) || len(got) != OutputHeaderLen {
		t.Errorf("AppendOutputHeader(3, 1) = % x, want % x (len %d)", got, Encode(Output{ID: 3, Seq: 1}), OutputHeaderLen)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, "empty frame"},
		{[]byte{0x00}, "unknown opcode 0x00"},
		{[]byte{0x7f}, "unknown opcode 0x7f"},
		{[]byte{0x01, 0, 0}, "truncated at tag"},
		{[]byte{0x01, 0, 0, 0, 1, 0, 80, 0, 24, 9}, "1 unexpected trailing bytes"},
		{[]byte{0x88, 0, 0, 0, 0, 3}, "mode 3 is neither"},
		{[]byte{0x85, 0, 0, 0, 1, 0, 9, 'a'}, "truncated at title"},
		{[]byte{0x85, 0, 0, 0, 1, 0, 1, 0xff}, "title is not valid UTF-8"},
		{[]byte{0x81, 0xff, 0xff}, "65535 terminals do not fit"},
		{[]byte{0x87, 0, 0, 0, 1, 0xff, 0xff, 1, 2}, "65535 viewers do not fit"},
		{[]byte{0x83, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1}, "gap from 9 is after to 1"},
		{append([]byte{0x03, 0, 0, 0, 1}, make([]byte, MaxInputLen+1)...), "over the 1048576-byte limit"},
	}
	for _, tt := range tests {
		m, err := Decode(tt.in)
		if err == nil || !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), tt.want) {
			name := tt.in
			if len(name) > 16 {
				name = name[:16]
			}
			t.Errorf("Decode(% x) = %v, %v; want an ErrBadFrame containing %q", name, m, err, tt.want)
		}
	}
}

func TestSanitizeTitle(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vim main.go", "vim main.go"},
		{"a\x1b[31mb\x07c\x00", "a[31mbc"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"\u0085next line", "next line"},
		{strings.Repeat("é", 200), strings.Repeat("é", 128)},
	}
	for _, tt := range tests {
		if got := SanitizeTitle(tt.in); got != tt.want {
			t.Errorf("SanitizeTitle(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClampSize(t *testing.T) {
	tests := []struct{ c, r, wc, wr uint16 }{
		{80, 24, 80, 24}, {0, 0, 80, 24}, {65535, 65535, MaxCols, MaxRows}, {1, 1, 1, 1},
	}
	for _, tt := range tests {
		if c, r := ClampSize(tt.c, tt.r); c != tt.wc || r != tt.wr {
			t.Errorf("ClampSize(%d, %d) = %d, %d, want %d, %d", tt.c, tt.r, c, r, tt.wc, tt.wr)
		}
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(Encode(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("Decode(% x) error %v does not wrap ErrBadFrame", b, err)
			}
			return
		}
		if got := Encode(m); !bytes.Equal(got, b) {
			t.Fatalf("Encode(Decode(% x)) = % x, want the input back", b, got)
		}
	})
}
