//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// inputPage serves a page that reports what reaches it: its <input>'s value (/value), its
// scroll position (/scroll), each load of it (a hit count); /slow is a page whose image never
// finishes loading (until the request is abandoned: /hang's aborted count).
type inputPage struct {
	url, slow        string
	loads, aborted   atomic.Int32
	mu               sync.Mutex
	value            string
	scrollY, scrolls int
	seq              int // the newest report's number
}

func newInputPage(t *testing.T) *inputPage {
	p := &inputPage{}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		p.loads.Add(1)
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, `<!doctype html><html><head><title>input page</title>
<style>body{margin:0;height:6000px} input{position:absolute;left:0;top:0;width:300px;height:40px}</style></head>
<body><input id=t oninput="fetch('/value?n=' + (++n) + '&v=' + encodeURIComponent(this.value))">
<script>let n = 0; onscroll = () => fetch('/scroll?n=' + (++n) + '&y=' + Math.round(scrollY));</script></body></html>`)
	})
	// The page's reports may arrive out of order: the newest (its n) wins.
	mux.HandleFunc("/value", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		p.mu.Lock()
		if n > p.seq {
			p.seq, p.value = n, r.URL.Query().Get("v")
		}
		p.mu.Unlock()
	})
	mux.HandleFunc("/scroll", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		y, _ := strconv.Atoi(r.URL.Query().Get("y"))
		p.mu.Lock()
		if n > p.seq {
			p.seq, p.scrollY = n, y
		}
		p.scrolls++
		p.mu.Unlock()
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>slow page</title><img src="/hang">`)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			p.aborted.Add(1)
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets /hang end so Close returns
	p.url, p.slow = srv.URL+"/page", srv.URL+"/slow"
	return p
}

// waitPage waits until cond holds of the page's reports.
func (p *inputPage) waitPage(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		ok := cond()
		v, y, n := p.value, p.scrollY, p.scrolls
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out (value %q, scrollY %d after %d scrolls, %d loads, %d aborted)",
				what, v, y, n, p.loads.Load(), p.aborted.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestViewChromiumInput: a driver's input reaches a real page through the live view: typed
// text and keys are the <input>'s value, the wheel scrolls the page, Reload loads the page
// again, Stop ends a load that would never finish.
func TestViewChromiumInput(t *testing.T) {
	pg := newInputPage(t)
	s := newTestService(t, func() cdpClient { return startPipeChromium(t) })
	v := dialViewer(t, viewServer(t, s), "owner", "drive", false)
	v.wait(20*time.Second, "hello and tabs", func() bool { return v.last[OpTabs] != nil })
	v.send(Resize{W: 800, H: 600})
	v.send(TakeControl{})
	v.wait(5*time.Second, "control", v.holds())
	v.send(Navigate{URL: pg.url})
	v.wait(20*time.Second, "the page", v.tabTitle("input page"))
	v.wait(10*time.Second, "a frame of the page", func() bool {
		f, ok := v.last[OpFrame].(Frame)
		return ok && f.W >= 300 && len(v.frames) > 0
	})

	// Typing: a click focuses the input; Text is typed as by an IME, keys as a US keyboard.
	v.clickAt(100, 20)
	v.send(Text{Text: "hé"})
	v.send(Key{Down: true, Code: "KeyX"})
	v.send(Key{Code: "KeyX"})
	v.send(Key{Down: true, Code: "ShiftLeft", Modifiers: ModShift})
	v.send(Key{Down: true, Code: "KeyY", Modifiers: ModShift})
	v.send(Key{Code: "KeyY", Modifiers: ModShift})
	v.send(Key{Code: "ShiftLeft"})
	pg.waitPage(t, 10*time.Second, `the input's value "héxY"`, func() bool { return pg.value == "héxY" })
	v.send(Key{Down: true, Code: "Backspace"})
	v.send(Key{Code: "Backspace"})
	pg.waitPage(t, 10*time.Second, `the input's value "héx" after Backspace`, func() bool { return pg.value == "héx" })

	// The wheel scrolls the page down (and back up).
	v.send(Wheel{X: 400, Y: 300, DY: 500})
	pg.waitPage(t, 10*time.Second, "the page scrolled down", func() bool { return pg.scrollY >= 300 })
	v.send(Wheel{X: 400, Y: 300, DY: -2000})
	pg.waitPage(t, 10*time.Second, "the page scrolled back to the top", func() bool { return pg.scrollY == 0 })

	// Reload loads the page again.
	loads := pg.loads.Load()
	v.send(History{Action: HistReload})
	deadline := time.Now().Add(20 * time.Second)
	for pg.loads.Load() == loads && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := pg.loads.Load(); n != loads+1 {
		t.Fatalf("the page was loaded %d times by Reload, want 1", n-loads)
	}

	// Stop ends a load that would never finish on its own.
	v.send(Navigate{URL: pg.slow})
	v.wait(20*time.Second, "the slow page, loading", func() bool {
		n, _ := v.last[OpNav].(Nav)
		return n.URL == pg.slow && n.Loading
	})
	time.Sleep(500 * time.Millisecond)
	v.mu.Lock()
	stillLoading := v.last[OpNav].(Nav).Loading
	v.mu.Unlock()
	if !stillLoading {
		t.Fatal("the slow page stopped loading by itself: Stop would prove nothing")
	}
	v.send(History{Action: HistStop})
	v.wait(10*time.Second, "the load stopped", func() bool { n, _ := v.last[OpNav].(Nav); return n.URL == pg.slow && !n.Loading })
	deadline = time.Now().Add(10 * time.Second)
	for pg.aborted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if pg.aborted.Load() == 0 {
		t.Error("Stop did not abandon the page's pending request")
	}
}

// screencastRecorder is a cdpClient that records the max sizes of Page.startScreencast.
type screencastRecorder struct {
	cdpClient
	mu    sync.Mutex
	sizes [][2]int
}

func (r *screencastRecorder) Send(ctx context.Context, msg []byte) error {
	var m struct {
		Method string
		Params struct{ MaxWidth, MaxHeight int }
	}
	if json.Unmarshal(msg, &m) == nil && m.Method == "Page.startScreencast" {
		r.mu.Lock()
		r.sizes = append(r.sizes, [2]int{m.Params.MaxWidth, m.Params.MaxHeight})
		r.mu.Unlock()
	}
	return r.cdpClient.Send(ctx, msg)
}

func (r *screencastRecorder) last() [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sizes) == 0 {
		return [2]int{}
	}
	return r.sizes[len(r.sizes)-1]
}

// TestViewChromiumScreencastSize: the screencast Chromium paints follows the largest viewer:
// a second, larger viewer makes the hub ask for its size (and the frames grow), and when it
// leaves the screencast shrinks back to the first viewer's.
func TestViewChromiumScreencastSize(t *testing.T) {
	rec := &screencastRecorder{}
	s := newTestService(t, func() cdpClient { rec.cdpClient = startPipeChromium(t); return rec })
	base := viewServer(t, s)
	small := dialViewer(t, base, "owner", "drive", false)
	small.wait(20*time.Second, "hello and tabs", func() bool { return small.last[OpTabs] != nil })
	small.send(Resize{W: 400, H: 300})
	small.send(TakeControl{})
	small.wait(5*time.Second, "control", small.holds())
	// An animated page: Chromium paints frames all along.
	small.send(Navigate{URL: "data:text/html,<title>moving</title><style>@keyframes m{from{margin-left:0}to{margin-left:500px}}" +
		"div{width:50px;height:50px;background:red;animation:m 1s linear infinite alternate}</style><div></div>"})
	small.wait(20*time.Second, "the animated page", small.tabTitle("moving"))

	jpegWidth := func(v *testViewer) int { // the newest frame's image width (mu held)
		f, ok := v.last[OpFrame].(Frame)
		if !ok {
			return 0
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(f.Data))
		if err != nil {
			return 0
		}
		return cfg.Width
	}
	waitSize := func(want [2]int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for rec.last() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the screencast's max size is %v, want %v (all: %v)", rec.last(), want, rec.sizes)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSize([2]int{400, 300})
	small.wait(10*time.Second, "frames within 400x300", func() bool { w := jpegWidth(small); return w > 0 && w <= 400 })

	big := dialViewer(t, base, "bob", "watch", false)
	big.wait(20*time.Second, "hello (big)", func() bool { return big.last[OpHello] != nil })
	big.send(Resize{W: 1000, H: 700})
	waitSize([2]int{1000, 700})
	small.wait(10*time.Second, "larger frames", func() bool { return jpegWidth(small) > 400 })
	big.wait(10*time.Second, "larger frames (big)", func() bool { w := jpegWidth(big); return w > 400 && w <= 1000 })

	big.ws.Close()
	waitSize([2]int{400, 300})
	small.wait(10*time.Second, "frames within 400x300 again", func() bool { w := jpegWidth(small); return w > 0 && w <= 400 })
}
