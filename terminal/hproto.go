//go:build !js

package terminal

// The internal gateway ↔ helper protocol on one terminal stream (see docs/terminal-protocol.md):
// frames of type u8, length u32 (big-endian), payload.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Frame types, gateway → helper.
const (
	hStart  byte = 1 // cols u16, rows u16
	hInput  byte = 2 // bytes
	hResize byte = 3 // cols u16, rows u16
	hHangup byte = 4 // —
)

// Frame types, helper → gateway.
const (
	hStarted byte = 0x81 // pid u32
	hOutput  byte = 0x82 // bytes
	hExit    byte = 0x83 // code i32
	hError   byte = 0x84 // message str
)

const (
	hHeaderLen = 5
	hMaxFrame  = 1<<20 + 16
	// hOutputChunk is the largest Output payload the helper sends.
	hOutputChunk = 64 << 10
)

// appendHFrame appends a whole frame.
func appendHFrame(b []byte, typ byte, payload []byte) []byte {
	b = append(b, typ)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// putHHeader writes a frame header into b[:5].
func putHHeader(b []byte, typ byte, n int) {
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
}

func sizePayload(cols, rows uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, cols), rows)
}

func parseSize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("size payload of %d bytes, want 4", len(p))
	}
	c, r := ClampSize(binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]))
	return c, r, nil
}

// hReader reads frames; a payload is valid until the next call.
type hReader struct {
	r   *bufio.Reader
	buf []byte
}

func newHReader(r io.Reader) *hReader { return &hReader{r: bufio.NewReaderSize(r, 64<<10)} }

func (h *hReader) next() (typ byte, payload []byte, err error) {
	var hdr [hHeaderLen]byte
	if _, err := io.ReadFull(h.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > hMaxFrame {
		return 0, nil, fmt.Errorf("terminal stream frame of %d bytes is over the %d-byte limit", n, hMaxFrame)
	}
	if cap(h.buf) < int(n) {
		h.buf = make([]byte, n)
	}
	p := h.buf[:n]
	if _, err := io.ReadFull(h.r, p); err != nil {
		return 0, nil, fmt.Errorf("terminal stream frame: %w", io.ErrUnexpectedEOF)
	}
	return hdr[0], p, nil
}
