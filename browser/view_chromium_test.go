//go:build !js

package browser

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// testPage serves a page whose one big button reports each click to /clicked.
func testPage(t testing.TB) (string, *atomic.Int32) {
	var clicks atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><head><title>Porthole test page</title>
<style>body{margin:0} button{position:absolute;left:0;top:0;width:300px;height:200px;font-size:30px}</style></head>
<body><button id=b onclick="fetch('/clicked',{method:'POST'});this.textContent='clicked '+(++window.n||(window.n=1))">click me</button>
<input id=t style="position:absolute;left:0;top:250px;width:300px;height:40px"></body></html>`)
	})
	mux.HandleFunc("/clicked", func(w http.ResponseWriter, r *http.Request) { clicks.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/", &clicks
}

func (v *testViewer) frameCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.frames)
}

func (v *testViewer) tabTitle(title string) func() bool {
	return func() bool {
		tabs, _ := v.last[OpTabs].(Tabs)
		for _, t := range tabs.Tabs {
			if t.Active && t.Title == title {
				return true
			}
		}
		return false
	}
}

func (v *testViewer) holds() func() bool {
	return func() bool {
		c, _ := v.last[OpControl].(Control)
		h, _ := v.last[OpHello].(Hello)
		return c.HolderID != "" && c.HolderID == h.ViewerID
	}
}

// clickAt presses and releases the left button at (x, y).
func (v *testViewer) clickAt(x, y uint16) {
	v.send(Pointer{X: x, Y: y})
	v.send(Pointer{X: x, Y: y, Buttons: ButtonLeft})
	v.send(Pointer{X: x, Y: y})
}

// TestViewChromium drives a real headless Chromium through the live view: a driver
// navigates, sees the page's title and a JPEG frame of it, clicks the page's button and the
// page records it; a watcher's clicks (and navigation) never reach the page.
func TestViewChromium(t *testing.T) {
	page, clicks := testPage(t)
	s := newTestService(t, func() cdpClient { return startPipeChromium(t) })
	base := viewServer(t, s)

	alice := dialViewer(t, base, "owner", "drive", false)
	bob := dialViewer(t, base, "bob", "watch", false)
	alice.wait(20*time.Second, "hello and tabs", func() bool { return alice.last[OpHello] != nil && alice.last[OpTabs] != nil })

	// A watcher cannot navigate, take control, or click.
	bob.send(Navigate{URL: page})
	bob.send(TakeControl{})
	bob.wait(5*time.Second, "watch-only errors", func() bool { return len(bob.errs) >= 2 })
	for _, e := range bob.errs {
		if e.Code != ErrCodeWatchOnly {
			t.Errorf("watcher got error %d %q, want watch-only", e.Code, e.Message)
		}
	}

	alice.send(Resize{W: 800, H: 600})
	alice.send(TakeControl{})
	alice.wait(5*time.Second, "control", alice.holds())
	alice.send(Navigate{URL: page})
	alice.wait(20*time.Second, "the page's title", alice.tabTitle("Porthole test page"))
	bob.wait(5*time.Second, "the page's title (watcher)", bob.tabTitle("Porthole test page"))
	alice.wait(10*time.Second, "nav", func() bool { n, _ := alice.last[OpNav].(Nav); return n.URL == page })

	// A frame of the page: a JPEG of the page's viewport.
	alice.wait(10*time.Second, "a frame", func() bool { return len(alice.frames) > 0 })
	bob.wait(10*time.Second, "a frame (watcher)", func() bool { return len(bob.frames) > 0 })
	alice.mu.Lock()
	f := alice.frames[len(alice.frames)-1]
	alice.mu.Unlock()
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(f.Data))
	if err != nil {
		t.Fatalf("frame is not a JPEG: %v", err)
	}
	if f.W == 0 || f.H == 0 || cfg.Width == 0 || cfg.Width > 800 || cfg.Height > 600 {
		t.Errorf("frame: page %dx%d, image %dx%d; want a page size and an image within the viewer's 800x600", f.W, f.H, cfg.Width, cfg.Height)
	}
	t.Logf("frame: page %dx%d CSS px, JPEG %dx%d, %d bytes", f.W, f.H, cfg.Width, cfg.Height, len(f.Data))

	// The watcher clicks the button: nothing reaches the page.
	bob.clickAt(100, 100)
	time.Sleep(700 * time.Millisecond)
	if n := clicks.Load(); n != 0 {
		t.Fatalf("the page recorded %d clicks from a watcher", n)
	}
	// The driver clicks: the page records it, and its new text reaches the viewers.
	before := alice.frameCount()
	alice.clickAt(100, 100)
	deadline := time.Now().Add(10 * time.Second)
	for clicks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := clicks.Load(); n != 1 {
		t.Fatalf("the page recorded %d clicks from the driver, want 1", n)
	}
	alice.wait(10*time.Second, "a new frame after the click", func() bool { return len(alice.frames) > before })

	// Typing reaches the page through the Input domain.
	alice.clickAt(100, 270)
	alice.send(Text{Text: "hi"})
	alice.send(Key{Down: true, Code: "KeyX"})
	alice.send(Key{Code: "KeyX"})
	// History: a second page, back, forward.
	second := page + "?second"
	alice.send(Navigate{URL: second})
	alice.wait(20*time.Second, "the second page", func() bool { n, _ := alice.last[OpNav].(Nav); return n.URL == second && n.CanBack })
	alice.send(History{Action: HistBack})
	alice.wait(20*time.Second, "back", func() bool { n, _ := alice.last[OpNav].(Nav); return n.URL == page && n.CanForward })
	alice.send(History{Action: HistForward})
	alice.wait(20*time.Second, "forward", func() bool { n, _ := alice.last[OpNav].(Nav); return n.URL == second })

	// Tabs: a new tab becomes the active one and the view follows it; switch back; close.
	var first string
	alice.mu.Lock()
	for _, tb := range alice.last[OpTabs].(Tabs).Tabs {
		if tb.Active {
			first = tb.ID
		}
	}
	alice.mu.Unlock()
	n := alice.frameCount()
	alice.send(TabNew{URL: "data:text/html,<title>second tab</title>"})
	alice.wait(20*time.Second, "the new tab, active", alice.tabTitle("second tab"))
	bob.wait(20*time.Second, "the new tab, active (watcher)", bob.tabTitle("second tab"))
	alice.wait(20*time.Second, "a frame of the new tab", func() bool { return len(alice.frames) > n })
	var newID string
	alice.mu.Lock()
	for _, tb := range alice.last[OpTabs].(Tabs).Tabs {
		if tb.Active {
			newID = tb.ID
		}
	}
	alice.mu.Unlock()
	n = alice.frameCount()
	alice.send(TabSwitch{ID: first})
	alice.wait(20*time.Second, "back on the first tab", func() bool {
		for _, tb := range alice.last[OpTabs].(Tabs).Tabs {
			if tb.Active {
				return tb.ID == first
			}
		}
		return false
	})
	alice.wait(20*time.Second, "a frame of the first tab again", func() bool { return len(alice.frames) > n })
	alice.send(TabClose{ID: newID})
	alice.wait(20*time.Second, "one tab left", func() bool { return len(alice.last[OpTabs].(Tabs).Tabs) == 1 })

	alice.send(Navigate{URL: "javascript:alert(1)"})
	alice.wait(5*time.Second, "a refused javascript: URL", func() bool {
		for _, e := range alice.errs {
			if e.Code == ErrCodeRefused {
				return true
			}
		}
		return false
	})
}
