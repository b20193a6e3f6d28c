//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pngOf encodes a w×h image of colour c (noise: every pixel random).
func pngOf(t testing.TB, w, h int, c color.Color, noise bool) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewSource(1))
	for y := range h {
		for x := range w {
			if noise {
				c = color.RGBA{uint8(r.Intn(256)), uint8(r.Intn(256)), uint8(r.Intn(256)), 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var red = color.RGBA{255, 0, 0, 255}

// decodeIcon decodes a favicon data URL and reports whether its centre pixel is red.
func iconIsRed(t testing.TB, icon string) (bool, image.Rectangle) {
	t.Helper()
	if !strings.HasPrefix(icon, FaviconPrefix) {
		t.Fatalf("favicon %.60q does not start with %q", icon, FaviconPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(icon[len(FaviconPrefix):])
	if err != nil {
		t.Fatalf("favicon base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("favicon PNG: %v", err)
	}
	b := img.Bounds()
	r, g, bl, a := img.At(b.Dx()/2, b.Dy()/2).RGBA()
	return r>>8 > 200 && g>>8 < 60 && bl>>8 < 60 && a>>8 > 200, b
}

// TestSanitizeFavicon: only a small valid PNG data URL passes, re-encoded by the gateway.
func TestSanitizeFavicon(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	good := pngOf(t, 16, 16, red, false)
	polyglot := append(bytes.Clone(good), []byte("<script>alert(1)</script>")...)
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"red 16x16", FaviconPrefix + b64(good), true},
		{"32x32", FaviconPrefix + b64(pngOf(t, 32, 32, red, false)), true},
		{"trailing bytes after IEND", FaviconPrefix + b64(polyglot), true},
		{"empty", "", false},
		{"prefix only", FaviconPrefix, false},
		{"jpeg prefix", "data:image/jpeg;base64," + b64(good), false},
		{"svg", "data:image/svg+xml;base64," + b64([]byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)), false},
		{"an http URL", "https://example.org/favicon.ico", false},
		{"javascript", "javascript:alert(1)", false},
		{"uppercase prefix", "DATA:image/png;base64," + b64(good), false},
		{"bad base64", FaviconPrefix + "!!!!", false},
		{"not a PNG", FaviconPrefix + b64([]byte("GIF89a not a png at all")), false},
		{"truncated PNG", FaviconPrefix + b64(good[:len(good)/2]), false},
		{"huge (noise 64x64, over 8 KiB)", FaviconPrefix + b64(pngOf(t, 64, 64, nil, true)), false},
		{"too long a string", FaviconPrefix + strings.Repeat("A", 20000), false},
		{"too wide (100x1)", FaviconPrefix + b64(pngOf(t, 100, 1, red, false)), false},
		{"claims 30000x30000", FaviconPrefix + b64(bigHeader(good, 30000, 30000)), false},
	} {
		got := sanitizeFavicon(c.in)
		if (got != "") != c.ok {
			t.Errorf("sanitizeFavicon(%q) = %.40q, want ok %v", c.name, got, c.ok)
			continue
		}
		if !c.ok {
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, FaviconPrefix))
		if bytes.Contains(raw, []byte("<script>")) {
			t.Errorf("sanitizeFavicon(%q) kept the bytes after the image", c.name)
		}
		if isRed, _ := iconIsRed(t, got); !isRed {
			t.Errorf("sanitizeFavicon(%q) is not the red image", c.name)
		}
	}
}

// bigHeader rewrites a PNG's IHDR to claim w×h (its CRC left wrong: the decoder must refuse
// it either way).
func bigHeader(p []byte, w, h uint32) []byte {
	p = bytes.Clone(p)
	// 8-byte signature, 4-byte length, "IHDR", then width and height.
	for i, v := range []uint32{w, h} {
		o := 16 + 4*i
		p[o], p[o+1], p[o+2], p[o+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	return p
}

// TestViewFaviconChromium: a real Chromium draws the page's icon inside the page (the viewer
// never loads it): a page with a red 16×16 PNG icon gives the viewer's Tabs a PNG data URL
// of a red image; a page without one (its /favicon.ico is 404) gives "". The icon is fetched
// once per page URL, not again on a reload.
func TestViewFaviconChromium(t *testing.T) {
	icon := pngOf(t, 16, 16, red, false)
	var iconHits, icoHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/with", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><head><title>with icon</title><link rel="icon" type="image/png" href="/red.png"></head><body>hi</body></html>`)
	})
	mux.HandleFunc("/without", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><head><title>without icon</title></head><body>hi</body></html>`)
	})
	mux.HandleFunc("/red.png", func(w http.ResponseWriter, r *http.Request) {
		iconHits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(icon)
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		icoHits.Add(1)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var fetches atomic.Int32 // the page's answers to faviconJS that drew (not skipped)
	s := newTestService(t, func() cdpClient {
		return &countingClient{cdpClient: startPipeChromium(t), n: &fetches, what: []byte(`"late":false`)}
	})
	v := dialViewer(t, viewServer(t, s), "owner", "drive", false)
	v.wait(20*time.Second, "hello and tabs", func() bool { return v.last[OpTabs] != nil })
	v.send(TakeControl{})
	v.wait(5*time.Second, "control", v.holds())
	active := func() TabInfo {
		tabs, _ := v.last[OpTabs].(Tabs)
		for _, tb := range tabs.Tabs {
			if tb.Active {
				return tb
			}
		}
		return TabInfo{}
	}

	with := srv.URL + "/with"
	v.send(Navigate{URL: with})
	var got TabInfo
	v.wait(20*time.Second, "the page's favicon", func() bool { got = active(); return got.URL == with && got.Favicon != "" })
	isRed, bounds := iconIsRed(t, got.Favicon)
	if !isRed {
		t.Errorf("the favicon of %s is not red", with)
	}
	if bounds.Dx() != FaviconSize || bounds.Dy() != FaviconSize {
		t.Errorf("favicon is %v, want %dx%d", bounds, FaviconSize, FaviconSize)
	}
	t.Logf("favicon: %d bytes of data URL, %v", len(got.Favicon), bounds)

	if iconHits.Load() == 0 {
		t.Errorf("the test server never served the icon")
	}

	// A reload is the same page URL: the view does not draw its icon again. (Headless
	// Chromium fetches the icon for itself too: the server's count says nothing here.)
	n := fetches.Load()
	v.send(History{Action: HistReload})
	v.wait(20*time.Second, "the reload started", func() bool { nv, _ := v.last[OpNav].(Nav); return nv.Loading })
	v.wait(20*time.Second, "the reload done", func() bool { nv, _ := v.last[OpNav].(Nav); return !nv.Loading })
	time.Sleep(time.Second)
	if m := fetches.Load(); m != n {
		t.Errorf("the icon was drawn %d more times after a reload, want 0", m-n)
	}

	without := srv.URL + "/without"
	v.send(Navigate{URL: without})
	v.wait(20*time.Second, "no favicon on a page without one", func() bool { got = active(); return got.URL == without && got.Favicon == "" })
	deadline := time.Now().Add(10 * time.Second)
	for icoHits.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if icoHits.Load() == 0 {
		t.Errorf("the page without an icon link was not asked for /favicon.ico")
	}
	if m := fetches.Load(); m != n+1 {
		t.Errorf("the icon was drawn %d times for the page without one, want 1", m-n)
	}
}

// countingClient counts the messages from Chromium that contain what.
type countingClient struct {
	cdpClient
	n    *atomic.Int32
	what []byte
}

func (c *countingClient) Recv(ctx context.Context) ([]byte, error) {
	b, err := c.cdpClient.Recv(ctx)
	if err == nil && bytes.Contains(b, c.what) {
		c.n.Add(1)
	}
	return b, err
}

// FuzzSanitizeFavicon: whatever the page hands over, the gateway never panics and sends ""
// or a PNG data URL of at most 8 KiB and 64×64 pixels.
func FuzzSanitizeFavicon(f *testing.F) {
	good := pngOf(f, 16, 16, red, false)
	f.Add(FaviconPrefix + base64.StdEncoding.EncodeToString(good))
	f.Add(FaviconPrefix + base64.StdEncoding.EncodeToString(bigHeader(good, 1<<20, 1)))
	f.Add(FaviconPrefix + base64.StdEncoding.EncodeToString(good[:40]))
	f.Add("data:image/png;base64,")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		out := sanitizeFavicon(s)
		if out == "" {
			return
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(out, FaviconPrefix))
		if !strings.HasPrefix(out, FaviconPrefix) || err != nil || len(raw) > maxFaviconPNG {
			t.Fatalf("sanitizeFavicon(%.80q) = %.80q: not a bounded PNG data URL", s, out)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(raw))
		if err != nil || cfg.Width > maxFaviconSide || cfg.Height > maxFaviconSide {
			t.Fatalf("sanitizeFavicon(%.80q): %v, %dx%d", s, err, cfg.Width, cfg.Height)
		}
	})
}
