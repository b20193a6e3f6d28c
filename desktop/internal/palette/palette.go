// Package palette is the desktop's lossless encoding for regions of few colours (text, window
// frames, flat backgrounds): a palette of at most 256 colours and the pixels' indices, packed to
// 1, 2, 4 or 8 bits and deflated when that is smaller. A one-colour region is its colour alone
// (a fill). It costs a few bytes of headers where PNG costs ~60 and JPEG ~600, and it is exact,
// so a region sent this way never needs a refresh.
//
// Layout of the data (the Rect's data when its encoding is EncPalette):
//
//	n-1         u8              palette size n, 1–256
//	colours     n × (r, g, b)   u8 each
//	(n ≥ 2 only)
//	compression u8              0 = raw, 1 = deflate (RFC 1951, no zlib header)
//	indices     bits = 1 (n = 2), 2 (n ≤ 4), 4 (n ≤ 16) or 8 per pixel, the first pixel in the
//	            most significant bits of a byte. Raw: the w·h indices one after the other,
//	            ceil(w·h·bits/8) bytes (rows are not padded: a typed character is a few bytes
//	            less). Deflate: h rows of ceil(w·bits/8) bytes each (rows start on a byte, so
//	            the same glyph in two rows compresses alike), deflated as one stream.
//
// Decode never allocates more than the image needs and rejects indices outside the palette,
// trailing bytes and a deflated stream that does not inflate to exactly the rows' size.
package palette

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
)

// Compression of the index rows.
const (
	Raw     = 0
	Deflate = 1
)

// MaxColours is the largest palette.
const MaxColours = 256

// ErrBad is wrapped by every Decode error.
var ErrBad = errors.New("bad palette data")

// Bits is the index width for a palette of n colours.
func Bits(n int) int {
	switch {
	case n <= 2:
		return 1
	case n <= 4:
		return 2
	case n <= 16:
		return 4
	}
	return 8
}

// RowBytes is the size of one packed row of w indices of a palette of n colours.
func RowBytes(w, n int) int { return (w*Bits(n) + 7) / 8 }

// Encoder encodes BGRX regions, reusing its buffers. Not safe for concurrent use.
type Encoder struct {
	idx    []byte // one index per pixel
	packed []byte
	table  [tableSize]uint32 // colour+1 (0 = empty slot)
	slot   [tableSize]uint8  // palette index of the colour in table
	used   []int             // table slots in use, to clear them
	pal    []uint32
	zbuf   bytes.Buffer
	zw     *flate.Writer
	zlevel int
}

const tableSize = 1024 // power of two, > 2·MaxColours

// Encode appends the palette data of the w×h BGRX image at pix (stride bytes per row) to dst. It
// returns ok = false, having appended nothing, when the image has more than maxColours colours
// (at most MaxColours); it stops reading the image as soon as it knows.
func (e *Encoder) Encode(dst, pix []byte, w, h, stride, maxColours int) ([]byte, bool) {
	maxColours = min(max(maxColours, 1), MaxColours)
	n, ok := e.index(pix, w, h, stride, maxColours)
	if !ok {
		return dst, false
	}
	dst = append(dst, byte(n-1))
	for _, c := range e.pal {
		dst = append(dst, byte(c>>16), byte(c>>8), byte(c))
	}
	if n == 1 {
		return dst, true
	}
	bits := Bits(n)
	perByte := 8 / bits
	raw := RawBytes(w, h, n)
	rb := RowBytes(w, n)
	if cap(e.packed) < max(rb*h, raw) {
		e.packed = make([]byte, max(rb*h, raw))
	}
	if raw < 24 { // too small for deflate to win: the indices one after the other
		return append(append(dst, Raw), pack(e.packed[:raw], e.idx[:w*h], bits, perByte)...), true
	}
	packed := e.packed[:rb*h] // rows on byte boundaries, for deflate
	clear(packed)
	for y := range h {
		src := e.idx[y*w : (y+1)*w]
		row := packed[y*rb : (y+1)*rb]
		if bits == 8 {
			copy(row, src)
			continue
		}
		for x, v := range src {
			row[x/perByte] |= v << (8 - bits*(x%perByte+1))
		}
	}
	level := flate.DefaultCompression
	if len(packed) > 64<<10 {
		level = flate.BestSpeed // large regions: speed (a 1080p screen of text is ~260 KB of bits)
	}
	if e.zw == nil || e.zlevel != level {
		e.zw, _ = flate.NewWriter(&e.zbuf, level)
		e.zlevel = level
	}
	e.zbuf.Reset()
	e.zw.Reset(&e.zbuf)
	e.zw.Write(packed)
	e.zw.Close()
	if e.zbuf.Len() < raw {
		return append(append(dst, Deflate), e.zbuf.Bytes()...), true
	}
	return append(append(dst, Raw), pack(e.packed[:raw], e.idx[:w*h], bits, perByte)...), true
}

// RawBytes is the size of the raw indices of a w×h region of a palette of n colours.
func RawBytes(w, h, n int) int { return (w*h*Bits(n) + 7) / 8 }

// pack packs the indices one after the other into out (RawBytes long).
func pack(out, idx []byte, bits, perByte int) []byte {
	if bits == 8 {
		copy(out, idx)
		return out
	}
	clear(out)
	for i, v := range idx {
		out[i/perByte] |= v << (8 - bits*(i%perByte+1))
	}
	return out
}

// index fills e.idx and e.pal; false when there are more than max colours.
func (e *Encoder) index(pix []byte, w, h, stride, max int) (int, bool) {
	for _, s := range e.used {
		e.table[s] = 0
	}
	e.used = e.used[:0]
	e.pal = e.pal[:0]
	if cap(e.idx) < w*h {
		e.idx = make([]byte, w*h)
	}
	idx := e.idx[:w*h]
	last, lastIdx := uint32(0xffffffff), byte(0)
	for y := range h {
		row := pix[y*stride : y*stride+w*4]
		out := idx[y*w : (y+1)*w]
		for x := range w {
			c := uint32(row[4*x+2])<<16 | uint32(row[4*x+1])<<8 | uint32(row[4*x])
			if c == last {
				out[x] = lastIdx
				continue
			}
			s := (c * 2654435761) >> 22 & (tableSize - 1)
			for {
				if v := e.table[s]; v == c+1 {
					break
				} else if v == 0 {
					if len(e.pal) == max {
						return 0, false
					}
					e.table[s] = c + 1
					e.slot[s] = byte(len(e.pal))
					e.used = append(e.used, int(s))
					e.pal = append(e.pal, c)
					break
				}
				s = (s + 1) & (tableSize - 1)
			}
			last, lastIdx = c, e.slot[s]
			out[x] = lastIdx
		}
	}
	return len(e.pal), true
}

// Decode turns palette data of a w×h region into RGBA pixels (4·w·h bytes, alpha 255).
func Decode(data []byte, w, h int) ([]byte, error) {
	if w <= 0 || h <= 0 || w > 8192 || h > 8192 {
		return nil, fmt.Errorf("%w: size %dx%d", ErrBad, w, h)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBad, len(data))
	}
	n := int(data[0]) + 1
	if len(data) < 1+3*n {
		return nil, fmt.Errorf("%w: palette of %d colours in %d bytes", ErrBad, n, len(data))
	}
	pal := data[1 : 1+3*n]
	rest := data[1+3*n:]
	out := make([]byte, w*h*4)
	if n == 1 {
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w: %d bytes after a one-colour palette", ErrBad, len(rest))
		}
		for i := 0; i < len(out); i += 4 {
			out[i], out[i+1], out[i+2], out[i+3] = pal[0], pal[1], pal[2], 255
		}
		return out, nil
	}
	if len(rest) < 1 {
		return nil, fmt.Errorf("%w: no compression byte", ErrBad)
	}
	rb := RowBytes(w, n)
	bits := Bits(n)
	perByte := 8 / bits
	mask := byte(1<<bits - 1)
	var rows []byte
	switch rest[0] {
	case Raw:
		idx := rest[1:]
		if len(idx) != RawBytes(w, h, n) {
			return nil, fmt.Errorf("%w: %d bytes of indices, want %d", ErrBad, len(idx), RawBytes(w, h, n))
		}
		for i := range w * h {
			v := idx[i/perByte] >> (8 - bits*(i%perByte+1)) & mask
			if int(v) >= n {
				return nil, fmt.Errorf("%w: index %d of a %d-colour palette", ErrBad, v, n)
			}
			p := pal[3*int(v):]
			out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = p[0], p[1], p[2], 255
		}
		return out, nil
	case Deflate:
		rows = make([]byte, rb*h)
		br := bytes.NewReader(rest[1:]) // an io.ByteReader: flate reads no further than its stream
		zr := flate.NewReader(br)
		if _, err := io.ReadFull(zr, rows); err != nil {
			return nil, fmt.Errorf("%w: inflate: %v", ErrBad, err)
		}
		var one [1]byte
		if k, err := zr.Read(one[:]); k != 0 {
			return nil, fmt.Errorf("%w: the indices inflate to more than %d bytes", ErrBad, rb*h)
		} else if err != io.EOF {
			return nil, fmt.Errorf("%w: inflate: the stream does not end after the indices: %v", ErrBad, err)
		} else if br.Len() != 0 {
			return nil, fmt.Errorf("%w: %d bytes after the deflated indices", ErrBad, br.Len())
		}
	default:
		return nil, fmt.Errorf("%w: compression %d", ErrBad, rest[0])
	}
	for y := range h {
		row := rows[y*rb : (y+1)*rb]
		for x := range w {
			var v byte
			if bits == 8 {
				v = row[x]
			} else {
				v = row[x/perByte] >> (8 - bits*(x%perByte+1)) & mask
			}
			if int(v) >= n {
				return nil, fmt.Errorf("%w: index %d of a %d-colour palette", ErrBad, v, n)
			}
			o := (y*w + x) * 4
			p := pal[3*int(v):]
			out[o], out[o+1], out[o+2], out[o+3] = p[0], p[1], p[2], 255
		}
	}
	return out, nil
}
