package wire

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var errBad = errors.New("bad frame")

// Every read is bounded by the frame; the first error is kept, names the opcode and the
// field, and wraps the protocol's sentinel; later reads return zero values.
func TestDecoder(t *testing.T) {
	tests := []struct {
		name    string
		frame   []byte
		read    func(d *Decoder) any
		want    any
		wantErr string // "" = no error
	}{
		{"u16 and u32", []byte{7, 0x01, 0x02, 0, 0, 1, 0}, func(d *Decoder) any { return [2]uint64{uint64(d.U16("a")), uint64(d.U32("b"))} }, [2]uint64{0x0102, 256}, ""},
		{"u64", []byte{7, 0, 0, 0, 0, 0, 0, 0, 9}, func(d *Decoder) any { return d.U64("n") }, uint64(9), ""},
		{"truncated", []byte{7, 0x01}, func(d *Decoder) any { return d.U16("w") }, uint16(0), "opcode 0x07: truncated at w: need 2 bytes, have 1"},
		{"flag 2", []byte{7, 2}, func(d *Decoder) any { return d.Flag("down") }, false, "down is 2, want 0 or 1"},
		{"mode 3", []byte{7, 3}, func(d *Decoder) any { return d.Mode() }, uint8(3), "mode 3 is neither watch (1) nor drive (2)"},
		{"mode drive", []byte{7, 2}, func(d *Decoder) any { return d.Mode() }, uint8(2), ""},
		{"string", []byte{7, 0, 2, 'h', 'i'}, func(d *Decoder) any { return d.Str("s") }, "hi", ""},
		{"string not UTF-8", []byte{7, 0, 1, 0xff}, func(d *Decoder) any { return d.Str("s") }, "", "s is not valid UTF-8"},
		{"string longer than the frame", []byte{7, 0xff, 0xff, 'x'}, func(d *Decoder) any { return d.Str("s") }, "", "truncated at s: need 65535 bytes, have 1"},
		{"long string over its limit", []byte{7, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e'}, func(d *Decoder) any { return d.LongStr("clip", 4) }, "", "clip of 5 bytes is over the 4-byte limit"},
		{"long string at its limit", []byte{7, 0, 0, 0, 4, 'a', 'b', 'c', 'd'}, func(d *Decoder) any { return d.LongStr("clip", 4) }, "abcd", ""},
		{"the first error is kept", []byte{7, 5}, func(d *Decoder) any { d.Flag("f"); return d.U16("later") }, uint16(0), "f is 5, want 0 or 1"},
		{"rest", []byte{7, 1, 2, 3}, func(d *Decoder) any { d.U8("x"); return string(d.Rest()) }, "\x02\x03", ""},
	}
	for _, tt := range tests {
		d := NewDecoder(tt.frame, errBad)
		got := tt.read(&d)
		if got != tt.want {
			t.Errorf("%s: read %x = %v, want %v", tt.name, tt.frame, got, tt.want)
		}
		switch {
		case tt.wantErr == "" && d.Err != nil:
			t.Errorf("%s: error %v, want none", tt.name, d.Err)
		case tt.wantErr != "" && (d.Err == nil || !strings.Contains(d.Err.Error(), tt.wantErr) || !errors.Is(d.Err, errBad)):
			t.Errorf("%s: error %v, want one wrapping %v with %q", tt.name, d.Err, errBad, tt.wantErr)
		}
	}
}

func TestCutUTF8(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"}, // a cut on a rune boundary keeps the last rune whole
		{"a€b", 1, "a"},
		{"a€b", 2, "a"}, // inside €
		{"a€b", 3, "a"},
		{"a€b", 4, "a€"},
		{"€", 0, ""},
		{"😀😀", 5, "😀"},
		{"😀😀", 7, "😀"},
		{"😀😀", 8, "😀😀"},
	} {
		if got := CutUTF8(c.s, c.n); got != c.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestAppendStrDecodes(t *testing.T) {
	long := strings.Repeat("é", 40000) // 80000 bytes: over a u16 length
	for _, s := range []string{"", "hello", "bad \xff utf-8", long} {
		b := AppendStr([]byte{7}, s)
		d := NewDecoder(b, errors.New("bad"))
		got := d.Str("s")
		if d.Err != nil || len(d.B) != 0 || !utf8.ValidString(got) || len(got) > 0xffff {
			t.Errorf("AppendStr(%.20q) decodes to %d bytes, %v", s, len(got), d.Err)
		}
		if utf8.ValidString(s) && !strings.HasPrefix(s, got) {
			t.Errorf("AppendStr(%.20q) decodes to a string that is not its prefix", s)
		}
	}
	b := AppendLongStr([]byte{7}, long, 1001)
	d := NewDecoder(b, errors.New("bad"))
	if got := d.LongStr("s", 1001); d.Err != nil || got != strings.Repeat("é", 500) {
		t.Errorf("AppendLongStr cut at 1001 bytes decodes to %d bytes, %v; want 1000", len(got), d.Err)
	}
}
