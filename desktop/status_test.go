//go:build !js

package desktop

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"sync"
	"testing"
	"time"
)

// changes counts the OnChange calls per agent.
type changes struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *changes) add(id string) {
	c.mu.Lock()
	c.n[id]++
	c.mu.Unlock()
}

func (c *changes) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func solidJPEG(t testing.TB, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 0xff
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func near(got color.Color, want color.RGBA) bool {
	r, g, b, _ := got.RGBA()
	d := func(a uint32, w uint8) bool { x := int(a>>8) - int(w); return x > -24 && x < 24 }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

// The dashboard sees the desktop a viewer watches: one session, a small JPEG of the screen
// (a JPEG rect and a palette rect), made once per model state, and the newest frame's time;
// OnChange is told when the hub starts, on each frame and when it ends.
func TestStatusThumbnail(t *testing.T) {
	ch := &changes{n: map[string]int{}}
	e := newEnv(t, Config{OnChange: ch.add})
	if st := e.svc.Status(e.agent.ID); st.Sessions != 0 || st.Image != nil {
		t.Fatalf("before any viewer: %+v, want no session and no image", st)
	}
	use, err := e.svc.acquire(e.agent) // a viewer's or an API call's use of the hub
	if err != nil {
		t.Fatal(err)
	}
	f := e.helper()
	waitFor(t, "OnChange on the hub's start", func() bool { return ch.get(e.agent.ID) >= 1 })
	started := ch.get(e.agent.ID)
	if st := e.svc.Status(e.agent.ID); st.Sessions != 1 {
		t.Fatalf("Sessions = %d while the hub runs, want 1", st.Sessions)
	}

	red, blue := color.RGBA{R: 220, G: 20, B: 20, A: 255}, color.RGBA{R: 10, G: 30, B: 230, A: 255}
	before := time.Now()
	f.send(Screen{W: 1280, H: 720})
	f.send(Rect{X: 0, Y: 0, W: 640, H: 720, Enc: EncJPEG, Data: solidJPEG(t, 640, 720, red)})
	f.send(Rect{X: 640, Y: 0, W: 640, H: 720, Enc: EncPalette, Data: []byte{0, blue.R, blue.G, blue.B}})
	f.send(FrameEnd{Seq: 1})
	waitFor(t, "OnChange on the frame", func() bool { return ch.get(e.agent.ID) > started })
	waitFor(t, "Status with the frame", func() bool { return !e.svc.Status(e.agent.ID).Active.IsZero() })

	st := e.svc.Status(e.agent.ID)
	if st.Sessions != 1 || st.ImageType != "image/jpeg" || st.Active.Before(before) {
		t.Fatalf("Status = {Sessions %d, ImageType %q, Active %v}, want 1, image/jpeg, after %v", st.Sessions, st.ImageType, st.Active, before)
	}
	img, err := jpeg.Decode(bytes.NewReader(st.Image))
	if err != nil {
		t.Fatalf("the thumbnail is no JPEG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 180 {
		t.Fatalf("thumbnail of %dx%d, want 320x180", b.Dx(), b.Dy())
	}
	if got := img.At(80, 90); !near(got, red) {
		t.Errorf("the JPEG rect's half is %v, want ≈ %v", got, red)
	}
	if got := img.At(240, 90); !near(got, blue) {
		t.Errorf("the palette rect's half is %v, want ≈ %v", got, blue)
	}
	t.Logf("thumbnail: %d bytes", len(st.Image))
	st2 := e.svc.Status(e.agent.ID)
	if !bytes.Equal(st2.Image, st.Image) || &st2.Image[0] != &st.Image[0] {
		t.Fatal("a second Status made the thumbnail again")
	}

	// A new frame: a new thumbnail (the left half turns blue).
	f.send(Rect{X: 0, Y: 0, W: 640, H: 720, Enc: EncPalette, Data: []byte{0, blue.R, blue.G, blue.B}})
	f.send(FrameEnd{Seq: 2})
	waitFor(t, "a new thumbnail", func() bool {
		img, err := jpeg.Decode(bytes.NewReader(e.svc.Status(e.agent.ID).Image))
		return err == nil && near(img.At(80, 90), blue)
	})

	use.Release()
	n := ch.get(e.agent.ID)
	e.svc.CloseAgent(e.agent.ID)
	waitFor(t, "OnChange on the hub's end", func() bool { return ch.get(e.agent.ID) > n })
	waitFor(t, "Sessions 0 after CloseAgent", func() bool {
		st := e.svc.Status(e.agent.ID)
		return st.Sessions == 0 && st.Image == nil
	})
	if st := e.svc.Status(e.agent.ID); st.Active.IsZero() {
		t.Fatal("Active forgot the last frame")
	}
}

// The helper is untrusted: a huge screen is refused, rects outside the screen or not
// matching their images are skipped, the rest still draws.
func TestComposeThumbBounded(t *testing.T) {
	if _, err := composeThumb(thumbMaxScreenW+1, 100, nil); err == nil {
		t.Fatal("a screen wider than the largest display was composed")
	}
	green := []byte{0, 0, 200, 0}
	bad := []drawOp{
		{data: green, enc: EncPalette, ix0: 0, iy0: 0, ix1: 200, iy1: 10, x0: 0, y0: 0, x1: 200, y1: 10},       // past the right edge
		{data: green, enc: EncPalette, ix0: -5, iy0: 0, ix1: 10, iy1: 10, x0: -5, y0: 0, x1: 10, y1: 10},       // past the left edge
		{data: green, enc: EncPalette, ix0: 0, iy0: 0, ix1: 10, iy1: 10, x0: 0, y0: 0, x1: 20, y1: 10},         // clip past the image
		{data: solidJPEG(t, 64, 64, color.RGBA{}), enc: EncJPEG, ix0: 0, iy0: 0, ix1: 8, iy1: 8, x1: 8, y1: 8}, // image larger than its rect
		{data: []byte{1, 2, 3}, enc: EncPNG, ix0: 0, iy0: 0, ix1: 8, iy1: 8, x1: 8, y1: 8},
		{data: green, enc: 9, ix0: 0, iy0: 0, ix1: 8, iy1: 8, x1: 8, y1: 8},
	}
	for i, o := range bad {
		thumb, err := composeThumb(100, 50, []drawOp{o, {data: green, enc: EncPalette, flags: RectScaled, ix1: 100, iy1: 50, x1: 100, y1: 50}})
		if err == nil {
			t.Errorf("op %d: drawn, want refused", i)
			continue
		}
		img, derr := jpeg.Decode(bytes.NewReader(thumb))
		if derr != nil {
			t.Fatalf("op %d: %v", i, derr)
		}
		if got := img.At(50, 25); !near(got, color.RGBA{G: 200}) {
			t.Errorf("op %d: the good rect drew %v, want green", i, got)
		}
	}
}

// FuzzComposeThumb draws one arbitrary rect on a small screen: no panic, no huge allocation.
func FuzzComposeThumb(f *testing.F) {
	f.Add(uint16(64), uint16(48), []byte{0, 1, 2, 3}, EncPalette, uint8(0), int16(0), int16(0), uint16(64), uint16(48), uint16(0), uint16(0), uint16(64), uint16(48))
	f.Add(uint16(64), uint16(48), []byte{1, 1, 2, 3, 4, 5, 6, 0, 0xaa}, EncPalette, RectScaled, int16(-3), int16(2), uint16(9), uint16(1), uint16(0), uint16(2), uint16(6), uint16(1))
	f.Add(uint16(10), uint16(10), []byte{0xff, 0xd8, 0xff}, EncJPEG, uint8(0), int16(0), int16(0), uint16(10), uint16(10), uint16(0), uint16(0), uint16(10), uint16(10))
	f.Fuzz(func(t *testing.T, w, h uint16, data []byte, enc, flags uint8, ix, iy int16, iw, ih, cx, cy, cw, ch uint16) {
		sw, sh := int(w%512)+1, int(h%512)+1
		o := drawOp{data: data, enc: enc, flags: flags, ix0: int(ix), iy0: int(iy), ix1: int(ix) + int(iw), iy1: int(iy) + int(ih),
			x0: int(cx), y0: int(cy), x1: int(cx) + int(cw), y1: int(cy) + int(ch)}
		thumb, _ := composeThumb(sw, sh, []drawOp{o})
		if thumb == nil {
			t.Fatal("no thumbnail of a small screen")
		}
	})
}
