//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// changes counts Config.OnChange calls per agent.
type changes struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *changes) changed(agentID string) {
	c.mu.Lock()
	c.n[agentID]++
	c.mu.Unlock()
}

func (c *changes) count(agentID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[agentID]
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testJPEG is a w×h JPEG of one colour with a darker band (something to scale).
func testJPEG(t testing.TB, w, h int, c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			p := c
			if y > h/3 && y < h/2 {
				p = color.RGBA{c.R / 4, c.G / 4, c.B / 4, 255}
			}
			img.SetRGBA(x, y, p)
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pushFrame sends a screencast frame with data (a JPEG) on the fake's attached tab.
func (f *fakeCDP) pushFrame(data []byte, w, h int) {
	f.in <- []byte(fmt.Sprintf(`{"method":"Page.screencastFrame","sessionId":"S1","params":{"data":%q,"metadata":{"deviceWidth":%d,"deviceHeight":%d,"scrollOffsetX":0,"scrollOffsetY":0},"sessionId":1}}`,
		base64.StdEncoding.EncodeToString(data), w, h))
}

// decodeThumb checks st's thumbnail: a JPEG that fits in 320×320 and is a few KB.
func decodeThumb(t *testing.T, st surface.Status) image.Image {
	t.Helper()
	if st.ImageType != "image/jpeg" {
		t.Fatalf("ImageType %q, want image/jpeg", st.ImageType)
	}
	img, err := jpeg.Decode(bytes.NewReader(st.Image))
	if err != nil {
		t.Fatalf("the thumbnail does not decode: %v", err)
	}
	b := img.Bounds()
	if b.Dx() > thumbMaxW || b.Dy() > thumbMaxH || b.Dx() < 1 {
		t.Fatalf("thumbnail %d×%d, want within %d×%d", b.Dx(), b.Dy(), thumbMaxW, thumbMaxH)
	}
	if len(st.Image) > 16<<10 {
		t.Errorf("thumbnail of %d bytes, want a few KB", len(st.Image))
	}
	return img
}

// TestStatusDashboard: the browser on the dashboard. Nothing while no browser is connected;
// Sessions 1 and Changed once a live view connects; after frames, a decodable JPEG thumbnail
// at most 320 px wide of the newest frame (made once per frame), and Changed per frame; an
// automation connection alone counts as a session; after CloseAgent, no session and no
// thumbnail, and Changed.
func TestStatusDashboard(t *testing.T) {
	ch := &changes{n: map[string]int{}}
	f := newFakeCDP()
	s := NewService(Config{Logger: testLogger(t), OnChange: ch.changed}, nil)
	s.viewClient = func(ctx context.Context, agent api.Agent) (cdpClient, error) { return f, nil }
	t.Cleanup(s.Close)
	base := viewServer(t, s)

	if st := s.Status("a1"); st.Sessions != 0 || st.Image != nil || !st.Active.IsZero() {
		t.Fatalf("before any viewer: %+v, want nothing", st)
	}

	v := dialViewer(t, base, "owner", "watch", false)
	v.wait(5*time.Second, "tabs", func() bool { return v.last[OpTabs] != nil })
	waitFor(t, "Changed on connect", func() bool { return ch.count("a1") >= 1 })
	if st := s.Status("a1"); st.Sessions != 1 || st.Image != nil {
		t.Fatalf("connected, no frame yet: Sessions %d, %d image bytes; want 1 session, no image", st.Sessions, len(st.Image))
	}

	before := ch.count("a1")
	start := time.Now()
	red := testJPEG(t, 1280, 800, color.RGBA{200, 30, 30, 255})
	f.pushFrame(red, 1280, 800)
	v.wait(5*time.Second, "the frame", func() bool { return len(v.frames) >= 1 })
	waitFor(t, "Changed on a frame", func() bool { return ch.count("a1") > before })
	st := s.Status("a1")
	if st.Sessions != 1 {
		t.Errorf("Sessions %d while viewing, want 1", st.Sessions)
	}
	img := decodeThumb(t, st)
	if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 200 {
		t.Errorf("thumbnail of a 1280×800 frame is %d×%d, want 320×200", b.Dx(), b.Dy())
	}
	if r, g, _, _ := img.At(10, 10).RGBA(); r>>8 < 150 || g>>8 > 80 {
		t.Errorf("thumbnail pixel (%d,%d,…), want the frame's red", r>>8, g>>8)
	}
	if st.Active.Before(start) {
		t.Errorf("Active %v, want the frame's time (after %v)", st.Active, start)
	}
	t.Logf("thumbnail: %d bytes from a %d-byte 1280×800 frame", len(st.Image), len(red))
	if again := s.Status("a1"); len(again.Image) == 0 || &again.Image[0] != &st.Image[0] {
		t.Error("a second Status of the same frame made a new thumbnail, want the cached one")
	}

	// A portrait frame (a phone-sized viewer) fits the height.
	before = ch.count("a1")
	f.pushFrame(testJPEG(t, 390, 844, color.RGBA{30, 30, 200, 255}), 390, 844)
	waitFor(t, "Changed on the second frame", func() bool { return ch.count("a1") > before })
	img = decodeThumb(t, s.Status("a1"))
	if b := img.Bounds(); b.Dx() != 147 || b.Dy() != 320 {
		t.Errorf("thumbnail of a 390×844 frame is %d×%d, want 147×320", b.Dx(), b.Dy())
	}
	if _, _, b, _ := img.At(10, 10).RGBA(); b>>8 < 150 {
		t.Error("the thumbnail is not of the newest frame")
	}

	// A frame that is not a JPEG (the sandbox sends what it likes): no thumbnail, no harm.
	before = ch.count("a1")
	f.pushFrame([]byte("not a jpeg"), 800, 600)
	waitFor(t, "Changed on the third frame", func() bool { return ch.count("a1") > before })
	if st := s.Status("a1"); st.Sessions != 1 || st.Image != nil || st.ImageType != "" {
		t.Errorf("after a broken frame: Sessions %d, %d image bytes, type %q; want 1, none", st.Sessions, len(st.Image), st.ImageType)
	}

	before = ch.count("a1")
	s.CloseAgent("a1")
	if ch.count("a1") == before {
		t.Error("CloseAgent did not call Changed")
	}
	if st := s.Status("a1"); st.Sessions != 0 || st.Image != nil {
		t.Errorf("after CloseAgent: Sessions %d, %d image bytes; want none", st.Sessions, len(st.Image))
	}

	// The agent's own automation holds the browser too (no live view: no thumbnail).
	before = ch.count("a1")
	auto := Viewer{ID: "token:t1", Name: "agent", Conn: 7}
	s.addAutomation("a1", auto)
	if ch.count("a1") == before {
		t.Error("an automation connection did not call Changed")
	}
	if st := s.Status("a1"); st.Sessions != 1 || st.Image != nil {
		t.Errorf("automation only: Sessions %d, %d image bytes; want 1, none", st.Sessions, len(st.Image))
	}
	before = ch.count("a1")
	s.removeAutomation("a1", auto)
	if ch.count("a1") == before {
		t.Error("an automation connection closing did not call Changed")
	}
	if st := s.Status("a1"); st.Sessions != 0 {
		t.Errorf("automation gone: Sessions %d, want 0", st.Sessions)
	}
}

// TestStatusViewEnds: when the live view ends by itself (the browser's connection ended), the
// dashboard is told and Status drops the session and the thumbnail.
func TestStatusViewEnds(t *testing.T) {
	ch := &changes{n: map[string]int{}}
	f := newFakeCDP()
	s := NewService(Config{Logger: testLogger(t), OnChange: ch.changed}, nil)
	s.viewClient = func(ctx context.Context, agent api.Agent) (cdpClient, error) { return f, nil }
	t.Cleanup(s.Close)
	v := dialViewer(t, viewServer(t, s), "owner", "watch", false)
	v.wait(5*time.Second, "tabs", func() bool { return v.last[OpTabs] != nil })
	f.pushFrame(testJPEG(t, 640, 480, color.RGBA{0, 200, 0, 255}), 640, 480)
	waitFor(t, "a thumbnail", func() bool { return s.Status("a1").Image != nil })
	before := ch.count("a1")
	f.Close() // the browser is gone
	waitFor(t, "no session", func() bool { return s.Status("a1").Sessions == 0 })
	waitFor(t, "Changed after the view ended", func() bool { return ch.count("a1") > before })
	if st := s.Status("a1"); st.Image != nil {
		t.Errorf("%d image bytes after the view ended, want none", len(st.Image))
	}
}

// TestThumbnailBounds: a frame whose header claims a huge size is refused before decoding.
func TestThumbnailBounds(t *testing.T) {
	huge := hugeJPEGHeader(t)
	if _, err := thumbnail(huge); err == nil {
		t.Fatal("a 65535×65535 frame made a thumbnail, want an error")
	} else {
		t.Logf("refused: %v", err)
	}
	for _, c := range []struct{ w, h, tw, th int }{
		{1280, 800, 320, 200}, {200, 100, 200, 100}, {5000, 1, 320, 1}, {1, 5000, 1, 320}, {320, 320, 320, 320},
	} {
		if w, h := thumbSize(c.w, c.h); w != c.tw || h != c.th {
			t.Errorf("thumbSize(%d, %d) = %d×%d, want %d×%d", c.w, c.h, w, h, c.tw, c.th)
		}
	}
}

// hugeJPEGHeader is a small JPEG whose frame header says 65535×65535.
func hugeJPEGHeader(t testing.TB) []byte {
	b := bytes.Clone(testJPEG(t, 16, 16, color.RGBA{1, 2, 3, 255}))
	for i := 0; i+8 < len(b); i++ {
		if b[i] == 0xFF && b[i+1] == 0xC0 { // SOF0: length(2) precision(1) height(2) width(2)
			b[i+5], b[i+6], b[i+7], b[i+8] = 0xFF, 0xFF, 0xFF, 0xFF
			return b
		}
	}
	t.Fatal("no SOF0 in the test JPEG")
	return nil
}

// FuzzThumbnail: whatever a frame holds, thumbnail returns an error or a JPEG within bounds.
func FuzzThumbnail(f *testing.F) {
	f.Add(testJPEG(f, 64, 48, color.RGBA{10, 20, 30, 255}))
	f.Add(hugeJPEGHeader(f))
	f.Add([]byte("frame-1"))
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, err := thumbnail(frame)
		if err != nil {
			return
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("the thumbnail does not decode: %v", err)
		}
		if cfg.Width > thumbMaxW || cfg.Height > thumbMaxH {
			t.Fatalf("thumbnail %d×%d", cfg.Width, cfg.Height)
		}
	})
}

// BenchmarkThumbnail: one dashboard thumbnail of a 1280×800 screencast frame (decode, scale,
// encode); made at most once per frame while a dashboard is open.
func BenchmarkThumbnail(b *testing.B) {
	frame := testJPEG(b, 1280, 800, color.RGBA{200, 30, 30, 255})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := thumbnail(frame); err != nil {
			b.Fatal(err)
		}
	}
}
