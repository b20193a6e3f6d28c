//go:build !js

package terminal

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzHelperStream feeds arbitrary bytes, as a compromised helper could send them, to the
// gateway's reader of a terminal stream: every frame is bounded, sizes are clamped, and
// nothing panics.
func FuzzHelperStream(f *testing.F) {
	f.Add(appendHFrame(nil, hStarted, binary.BigEndian.AppendUint32(nil, 42)))
	f.Add(appendHFrame(appendHFrame(nil, hOutput, []byte("hi\r\n\xe2\x82")), hOutput, []byte("\xac")))
	f.Add(appendHFrame(nil, hExit, binary.BigEndian.AppendUint32(nil, 130)))
	f.Add(appendHFrame(nil, hError, append([]byte{0, 3}, "bad"...)))
	f.Add(appendHFrame(nil, hResize, sizePayload(0, 65535)))
	f.Add([]byte{hOutput, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{hOutput, 0, 0, 0, 9, 'x'})

	f.Fuzz(func(t *testing.T, data []byte) {
		rd := newHReader(bytes.NewReader(data))
		for {
			typ, p, err := rd.next()
			if err != nil {
				return
			}
			if len(p) > hMaxFrame {
				t.Fatalf("frame type %#x with %d bytes passed the %d-byte limit", typ, len(p), hMaxFrame)
			}
			if cols, rows, err := parseSize(p); err == nil {
				if c, r := ClampSize(cols, rows); c != cols || r != rows {
					t.Fatalf("parseSize(%x) = %d×%d, not clamped (%d×%d)", p, cols, rows, c, r)
				}
			}
		}
	})
}
