// Package wire is the reading half that the surfaces' binary protocols share: a decoder of
// big-endian fields that bounds every read by the frame and keeps the first error.
package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Decoder reads the fields of one frame, in order. After the first error every read returns
// a zero value and Err keeps that error, so a protocol's Decode reads a whole message and
// checks Err once.
type Decoder struct {
	Op  uint8  // the frame's opcode, named in errors
	B   []byte // what is left to read
	Err error  // the first error, wrapping the protocol's sentinel
	bad error
}

// NewDecoder returns a decoder of frame b (not empty: b[0] is the opcode) whose errors wrap
// bad, the protocol's sentinel for a malformed frame.
func NewDecoder(b []byte, bad error) Decoder { return Decoder{Op: b[0], B: b[1:], bad: bad} }

// Fail records an error about the frame (unless one is recorded already).
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: opcode 0x%02x: %s", d.bad, d.Op, fmt.Sprintf(format, args...))
	}
}

// Take reads n bytes (nil once an error is recorded, or when fewer are left).
func (d *Decoder) Take(n int, field string) []byte {
	if d.Err != nil {
		return nil
	}
	if len(d.B) < n {
		d.Fail("truncated at %s: need %d bytes, have %d", field, n, len(d.B))
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// U8 reads one byte.
func (d *Decoder) U8(field string) uint8 {
	if v := d.Take(1, field); v != nil {
		return v[0]
	}
	return 0
}

// Flag reads a byte that must be 0 or 1.
func (d *Decoder) Flag(field string) bool {
	v := d.U8(field)
	if v > 1 {
		d.Fail("%s is %d, want 0 or 1", field, v)
	}
	return v == 1
}

// U16 reads a big-endian uint16.
func (d *Decoder) U16(field string) uint16 {
	if v := d.Take(2, field); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// U32 reads a big-endian uint32.
func (d *Decoder) U32(field string) uint32 {
	if v := d.Take(4, field); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// U64 reads a big-endian uint64.
func (d *Decoder) U64(field string) uint64 {
	if v := d.Take(8, field); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Mode reads a viewer's mode byte: watch (1) or drive (2), as every surface numbers it.
func (d *Decoder) Mode() uint8 {
	v := d.U8("mode")
	if d.Err == nil && v != 1 && v != 2 {
		d.Fail("mode %d is neither watch (1) nor drive (2)", v)
	}
	return v
}

// UTF8 checks that v, a field just read, is UTF-8, and returns it as a string.
func (d *Decoder) UTF8(field string, v []byte) string {
	if d.Err != nil {
		return ""
	}
	if !utf8.Valid(v) {
		d.Fail("%s is not valid UTF-8", field)
		return ""
	}
	return string(v)
}

// Str reads a UTF-8 string after its uint16 length.
func (d *Decoder) Str(field string) string {
	n := d.U16(field + " length")
	return d.UTF8(field, d.Take(int(n), field))
}

// LongStr reads a UTF-8 string after its uint32 length, which must not exceed limit.
func (d *Decoder) LongStr(field string, limit int) string {
	n := d.U32(field + " length")
	if d.Err == nil && int64(n) > int64(limit) {
		d.Fail("%s of %d bytes is over the %d-byte limit", field, n, limit)
		return ""
	}
	return d.UTF8(field, d.Take(int(n), field))
}

// Rest reads what is left of the frame.
func (d *Decoder) Rest() []byte {
	if d.Err != nil {
		return nil
	}
	v := d.B
	d.B = nil
	return v
}

// The writing half: what every surface's encoder appends for a string field.

// AppendStr appends s after its uint16 length: cut to 65535 bytes on a rune boundary, invalid
// UTF-8 replaced (U+FFFD), so that the field always decodes with Str.
func AppendStr(b []byte, s string) []byte {
	s = CutUTF8(validUTF8(s), 0xffff)
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}

// AppendLongStr appends s after its uint32 length, cut to limit bytes on a rune boundary,
// invalid UTF-8 replaced, so that the field decodes with LongStr(limit).
func AppendLongStr(b []byte, s string, limit int) []byte {
	s = CutUTF8(validUTF8(s), limit)
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// CutUTF8 shortens valid UTF-8 s to at most n bytes without splitting a rune.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	// Drop the last rune if the cut split it: at most utf8.UTFMax-1 bytes of it are left.
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if r, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size <= 1 {
				return s[:i]
			}
			break
		}
	}
	return s
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}
