//go:build !js

package desktop

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// helperStreamSeeds are helper streams, valid and not: a screen with rects, overlapping
// and partial, a resize mid-frame, cursor, clipboard, an unsolicited screenshot, and broken
// frames.
func helperStreamSeeds() [][]byte {
	cat := func(ms ...Message) []byte {
		var b bytes.Buffer
		for _, m := range ms {
			WriteStreamFrame(&b, m)
		}
		return b.Bytes()
	}
	r := func(x, y, w, h uint16) Rect {
		return Rect{X: x, Y: y, W: w, H: h, Enc: EncJPEG, Data: []byte{0xff, 0xd8, byte(x), byte(y)}}
	}
	return [][]byte{
		cat(Screen{W: 256, H: 192}, r(0, 0, 256, 192), FrameEnd{Seq: 1}, r(10, 10, 5, 5), r(60, 60, 10, 10), FrameEnd{Seq: 2}),
		cat(Screen{W: 128, H: 64}, r(0, 0, 64, 64), r(0, 0, 32, 32), r(32, 0, 32, 32), r(0, 32, 64, 32), FrameEnd{Seq: 1}),
		cat(Screen{W: 256, H: 192}, r(0, 0, 100, 100), Screen{W: 64, H: 64}, r(0, 0, 64, 64), FrameEnd{Seq: 1}),
		cat(Screen{W: 64, H: 64}, CursorShape{W: 1, H: 1, RGBA: []byte{1, 2, 3, 4}}, CursorPos{X: 3, Y: 4}, Clipboard{Text: "hi"}),
		cat(Screen{W: 64, H: 64}, Screenshot{Format: EncPNG, W: 64, H: 64, Data: []byte("png")}),
		cat(Screen{W: 64, H: 64}, r(60, 60, 10, 10), FrameEnd{Seq: 1}),
		cat(r(0, 0, 1, 1)),
		cat(FrameEnd{Seq: 9}),
		cat(Screen{W: 64, H: 64}, TakeControl{}),
		{0, 0, 0, 1, 0x7e},
		{0xff, 0xff, 0xff, 0xff, 0},
		{0, 0, 0, 5, byte(OpScreen), 0, 64},
		// Copies (a window dragged), chained, overlapping, off the screen, before a Screen; a
		// ClipRect, which only the gateway makes.
		cat(Screen{W: 256, H: 192}, r(0, 0, 256, 192), r(20, 30, 100, 60), FrameEnd{Seq: 1},
			Copy{SrcX: 20, SrcY: 30, X: 28, Y: 33, W: 100, H: 60}, r(20, 30, 8, 63), FrameEnd{Seq: 2},
			Copy{SrcX: 28, SrcY: 33, X: 40, Y: 30, W: 100, H: 60}, Copy{SrcX: 0, SrcY: 0, X: 1, Y: 1, W: 255, H: 191}, FrameEnd{Seq: 3}),
		cat(Screen{W: 128, H: 128}, r(0, 0, 128, 128), Copy{SrcX: 0, SrcY: 0, X: 64, Y: 64, W: 64, H: 64}, r(64, 64, 10, 10),
			Copy{SrcX: 60, SrcY: 60, X: 0, Y: 0, W: 68, H: 68}, FrameEnd{Seq: 1}),
		cat(Screen{W: 64, H: 64}, Copy{SrcX: 0, SrcY: 0, X: 10, Y: 0, W: 60, H: 10}),
		cat(Copy{SrcX: 0, SrcY: 0, X: 1, Y: 1, W: 2, H: 2}),
		cat(Screen{W: 64, H: 64}, ClipRect{CW: 1, CH: 1, W: 1, H: 1, Enc: EncJPEG, Data: []byte{1}}),
		// A clipboard the helper had to cut; a cut with no clipboard before it.
		cat(Screen{W: 64, H: 64}, Clipboard{Text: "hi"}, ClipboardCut{Size: 2 << 20}),
		cat(ClipboardCut{Size: 3 << 20}, ClipboardCut{Size: 3 << 20}),
	}
}

// FuzzHelperStream feeds arbitrary bytes, as a compromised helper could send them, to the
// gateway's handling of a desktop stream, with a viewer taking frames after each one:
// nothing panics, a bad frame is an ErrBadHelper, the model's byte count is exact and
// within its cap, every tile's entries each show a pixel, and the viewer only gets frames
// that decode, with Rects inside the current screen.
func FuzzHelperStream(f *testing.F) {
	for _, s := range helperStreamSeeds() {
		f.Add(s)
	}
	svc := NewService(Config{MaxModelBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	defer svc.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHub(svc, api.Agent{ID: "fuzz"})
		defer h.cancel(nil)
		s := &session{h: h, mode: ModeDrive, conn: surface.NewViewerConn(nil), log: h.log, keyframe: true}
		if err := h.join(s); err != nil {
			t.Fatal(err)
		}
		rd := bytes.NewReader(data)
		var screen Screen
		for {
			frame, err := ReadStreamFrame(rd, nil, MaxStreamFrame)
			if err != nil {
				return
			}
			if err := h.helperFrame(frame); err != nil {
				if !errors.Is(err, ErrBadHelper) {
					t.Fatalf("helperFrame error %v is not an ErrBadHelper", err)
				}
				return
			}
			checkModel(t, &h.model, svc.cfg.MaxModelBytes)
			for _, out := range h.take(s, nil) {
				m, err := Decode(append(append([]byte(nil), out.a...), out.b...))
				if err != nil {
					t.Fatalf("the viewer got a frame that does not decode: %v", err)
				}
				switch m := m.(type) {
				case Screen:
					screen = m
				case Rect:
					if int(m.X)+int(m.W) > int(screen.W) || int(m.Y)+int(m.H) > int(screen.H) {
						t.Fatalf("the viewer got rect %+v outside the screen %v", m, screen)
					}
				case ClipRect:
					if int(m.CX)+int(m.CW) > int(screen.W) || int(m.CY)+int(m.CH) > int(screen.H) {
						t.Fatalf("the viewer got clip rect %+v outside the screen %v", m, screen)
					}
				case Copy:
					if int(m.SrcX)+int(m.W) > int(screen.W) || int(m.SrcY)+int(m.H) > int(screen.H) ||
						int(m.X)+int(m.W) > int(screen.W) || int(m.Y)+int(m.H) > int(screen.H) {
						t.Fatalf("the viewer got copy %+v outside the screen %v", m, screen)
					}
				}
			}
			h.mu.Lock()
			s.acked = s.seq
			h.mu.Unlock()
		}
	})
}

// checkModel checks the tile model's invariants.
func checkModel(t *testing.T, md *model, maxBytes int) {
	t.Helper()
	seen := map[*entry]int{}
	for _, list := range md.tiles {
		if len(list) > tileSize*tileSize {
			t.Fatalf("a tile holds %d entries", len(list))
		}
		for _, e := range list {
			seen[e]++
		}
	}
	sum := 0
	blobs := map[*blob]int{}
	for e, n := range seen {
		if e.refs != n {
			t.Fatalf("entry %d has refs %d, is in %d tiles", e.seq, e.refs, n)
		}
		sum += len(e.hdr)
		blobs[e.data]++
	}
	for b, n := range blobs {
		if b.refs != n {
			t.Fatalf("a blob has refs %d, is used by %d entries", b.refs, n)
		}
		sum += len(b.b)
	}
	if sum != md.bytes || md.bytes > maxBytes {
		t.Fatalf("model bytes %d, live entries hold %d (cap %d)", md.bytes, sum, maxBytes)
	}
}
