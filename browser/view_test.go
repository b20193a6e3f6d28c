//go:build !js

package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// fakeCDP is a cdpClient standing for a browser with one tab: it answers the view's calls
// and records them, and the test pushes screencast frames into it.
type fakeCDP struct {
	in     chan []byte
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	sent   []fakeCall
	notify chan struct{}
}

type fakeCall struct {
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	ID        int64           `json:"id"`
}

var _ cdpClient = (*fakeCDP)(nil)

func newFakeCDP() *fakeCDP {
	return &fakeCDP{in: make(chan []byte, 1024), done: make(chan struct{}), notify: make(chan struct{}, 1)}
}

func (f *fakeCDP) Send(ctx context.Context, msg []byte) error {
	var c fakeCall
	if err := json.Unmarshal(msg, &c); err != nil {
		return err
	}
	f.mu.Lock()
	f.sent = append(f.sent, c)
	f.mu.Unlock()
	select {
	case f.notify <- struct{}{}:
	default:
	}
	result := `{}`
	switch c.Method {
	case "Target.getTargets":
		result = `{"targetInfos":[{"targetId":"T1","type":"page","title":"one","url":"http://x/"}]}`
	case "Target.attachToTarget":
		result = `{"sessionId":"S1"}`
	case "Page.getNavigationHistory":
		result = `{"currentIndex":0,"entries":[{"id":1,"url":"http://x/"}]}`
	}
	select {
	case f.in <- []byte(fmt.Sprintf(`{"id":%d,"result":%s}`, c.ID, result)):
	case <-f.done:
		return errors.New("closed")
	}
	return nil
}

func (f *fakeCDP) Recv(ctx context.Context) ([]byte, error) {
	select {
	case b := <-f.in:
		return b, nil
	case <-f.done:
		return nil, errors.New("closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeCDP) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}

// frame sends screencast frame n (its JPEG bytes are "frame-<n>").
func (f *fakeCDP) frame(n int) {
	data := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("frame-%d", n)))
	f.in <- []byte(fmt.Sprintf(`{"method":"Page.screencastFrame","sessionId":"S1","params":{"data":%q,"metadata":{"deviceWidth":800,"deviceHeight":600,"scrollOffsetX":0,"scrollOffsetY":%d},"sessionId":1}}`, data, n))
}

// count is how many calls of methods with prefix were sent.
func (f *fakeCDP) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.sent {
		if strings.HasPrefix(c.Method, prefix) {
			n++
		}
	}
	return n
}

// waitCount waits until count(prefix) == n.
func (f *fakeCDP) waitCount(t *testing.T, prefix string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.count(prefix) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s calls: %d, want %d", prefix, f.count(prefix), n)
		}
		select {
		case <-f.notify:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (v *testViewer) frameData() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var s []string
	for _, f := range v.frames {
		s = append(s, string(f.Data))
	}
	return s
}

func fakeView(t *testing.T) (*fakeCDP, string) {
	f, _, base := fakeViewService(t)
	return f, base
}

func fakeViewService(t *testing.T) (*fakeCDP, *Service, string) {
	f := newFakeCDP()
	s := newTestService(t, func() cdpClient { return f })
	return f, s, viewServer(t, s)
}

// TestViewAckPacing: Chromium's frames are acknowledged only when a viewer takes one; a
// viewer with its window full gets the newest frame once it acks, never the ones between.
func TestViewAckPacing(t *testing.T) {
	f, base := fakeView(t)
	v := dialViewer(t, base, "owner", "drive", true)
	v.wait(5*time.Second, "tabs", func() bool { return v.last[OpTabs] != nil })
	f.waitCount(t, "Page.startScreencast", 1)

	// Frames up to the viewer's window go out at once, each acknowledged to Chromium.
	for i := 1; i <= viewWindow; i++ {
		f.frame(i)
		v.wait(5*time.Second, fmt.Sprintf("frame %d", i), func() bool { return len(v.frames) == i })
		f.waitCount(t, "Page.screencastFrameAck", i)
	}

	// The viewer's window is full: frames wait in its one slot, unacknowledged.
	f.frame(viewWindow + 1)
	f.frame(viewWindow + 2)
	time.Sleep(200 * time.Millisecond)
	if n := f.count("Page.screencastFrameAck"); n != viewWindow {
		t.Fatalf("%d acks sent to Chromium with no viewer able to draw, want %d", n, viewWindow)
	}
	if got := v.frameData(); len(got) != viewWindow {
		t.Fatalf("viewer got %v past its window", got)
	}
	v.send(Ack{Seq: viewWindow})
	v.wait(5*time.Second, "the newest frame", func() bool { return len(v.frames) == viewWindow+1 })
	f.waitCount(t, "Page.screencastFrameAck", viewWindow+2) // both owed frames, so Chromium goes on
	if got := v.frameData(); got[viewWindow] != fmt.Sprintf("frame-%d", viewWindow+2) {
		t.Errorf("after its ack the viewer got %v, want frame-%d (latest wins)", got, viewWindow+2)
	}
	v.mu.Lock()
	fr := v.frames[viewWindow]
	v.mu.Unlock()
	if fr.W != 800 || fr.H != 600 || fr.ScrollY != viewWindow+2 || fr.Seq != viewWindow+1 {
		t.Errorf("frame metadata %+v", fr)
	}
}

// TestViewFanOut: a fast viewer gets every frame at Chromium's pace while a slow one (never
// acking) holds only the newest, never a growing queue.
func TestViewFanOut(t *testing.T) {
	f, base := fakeView(t)
	fast := dialViewer(t, base, "owner", "drive", false)
	slow := dialViewer(t, base, "bob", "watch", true)
	fast.wait(5*time.Second, "tabs", func() bool { return fast.last[OpTabs] != nil })
	slow.wait(5*time.Second, "tabs", func() bool { return slow.last[OpTabs] != nil })
	f.waitCount(t, "Page.startScreencast", 1)
	const n = 20
	for i := 1; i <= n; i++ {
		f.frame(i)
		fast.wait(5*time.Second, fmt.Sprintf("frame %d", i), func() bool { return len(fast.frames) == i })
	}
	f.waitCount(t, "Page.screencastFrameAck", n)
	if got := slow.frameData(); len(got) != viewWindow {
		t.Fatalf("slow viewer got %d frames, want its window of %d", len(got), viewWindow)
	}
	slow.send(Ack{Seq: viewWindow})
	slow.wait(5*time.Second, "the newest frame", func() bool { return len(slow.frames) == viewWindow+1 })
	if got := slow.frameData(); got[viewWindow] != fmt.Sprintf("frame-%d", n) {
		t.Errorf("slow viewer got %v, want frame-%d last", got, n)
	}
}

// TestViewWatchDropped: a watcher's input and commands never reach Chromium; a driver's
// only once it holds control; the owner takes control back from another driver.
func TestViewWatchDropped(t *testing.T) {
	f, svc, base := fakeViewService(t)
	watcher := dialViewer(t, base, "bob", "watch", false)
	driver := dialViewer(t, base, "carol", "drive", false)
	owner := dialViewer(t, base, "owner", "drive", false)
	for _, v := range []*testViewer{watcher, driver, owner} {
		v.wait(5*time.Second, "tabs", func() bool { return v.last[OpTabs] != nil })
	}
	f.frame(1)
	watcher.wait(5*time.Second, "a frame", func() bool { return len(watcher.frames) > 0 })

	all := []Message{Pointer{X: 1, Y: 1, Buttons: ButtonLeft}, Wheel{DY: 10}, Key{Down: true, Code: "KeyA"},
		Text{Text: "x"}, Navigate{URL: "http://evil/"}, History{Action: HistReload}, TabNew{}, TabClose{ID: "T1"},
		DialogAnswer{Accept: true}}
	watcher.send(TakeControl{})
	for _, m := range all {
		watcher.send(m)
	}
	driver.send(Pointer{X: 2, Y: 2}) // drives, but does not hold control
	watcher.wait(5*time.Second, "watch-only", func() bool { return len(watcher.errs) > 0 })
	driver.wait(5*time.Second, "not-holder", func() bool { return len(driver.errs) > 0 })
	time.Sleep(200 * time.Millisecond)
	for _, p := range []string{"Input.", "Page.navigate", "Page.reload", "Target.createTarget", "Target.closeTarget", "Page.handleJavaScript"} {
		if n := f.count(p); n != 0 {
			t.Errorf("%d %s calls reached Chromium from a watcher or a non-holder", n, p)
		}
	}
	if e := watcher.firstErr(); e.Code != ErrCodeWatchOnly {
		t.Errorf("watcher error %+v, want watch-only", e)
	}
	if e := driver.firstErr(); e.Code != ErrCodeNotHolder {
		t.Errorf("driver error %+v, want not-holder", e)
	}

	driver.send(TakeControl{})
	driver.wait(5*time.Second, "control", driver.holds())
	driver.send(Pointer{X: 5, Y: 6, Buttons: ButtonLeft})
	driver.send(Pointer{X: 5, Y: 6})
	f.waitCount(t, "Input.dispatchMouseEvent", 2)

	// While a person holds control the agent's automation input is refused (cdp.go's hook).
	if ok, holder := svc.cdpInputAllowed("a1"); ok || holder != "carol" {
		t.Errorf("cdpInputAllowed while carol drives = %v, %q; want refused naming carol", ok, holder)
	}

	// Another person's driver cannot take control; the owner can.
	owner.send(TakeControl{})
	owner.wait(5*time.Second, "control (owner's take-back)", owner.holds())
	driver.wait(5*time.Second, "lost control", func() bool { c, _ := driver.last[OpControl].(Control); return c.HolderName == "owner" })
	driver.send(TakeControl{})
	driver.wait(5*time.Second, "refused", func() bool { return len(driver.errs) > 1 })
	if ok, holder := svc.cdpInputAllowed("a1"); ok || holder != "owner" {
		t.Errorf("cdpInputAllowed = %v, %q; want refused naming owner", ok, holder)
	}
	owner.send(ReleaseControl{})
	owner.wait(5*time.Second, "released", func() bool { c, _ := owner.last[OpControl].(Control); return c.HolderID == "" })
	if ok, _ := svc.cdpInputAllowed("a1"); !ok {
		t.Errorf("automation input refused after the person released control")
	}
}

// TestViewGoroutinesEnd: every goroutine of the live view (hub worker, CDP reader, viewer
// writers) ends when the viewers leave and the service closes, and an idle hub ends after its
// grace period.
func TestViewGoroutinesEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		f := newFakeCDP()
		s := NewService(Config{Logger: testLogger(t)}, nil)
		s.viewClient = func(ctx context.Context, agent api.Agent) (cdpClient, error) { return f, nil }
		s.viewGrace = 50 * time.Millisecond
		up := websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			s.Serve(r.Context(), ws, api.Agent{ID: "a1", OwnerID: "owner"}, Viewer{ID: "owner", Mode: api.LevelDrive})
		}))
		url := "ws" + strings.TrimPrefix(srv.URL, "http")
		var conns []*websocket.Conn
		for i := range 2 { // two viewers at once, then both leave
			ws, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, ws)
			if i == 0 {
				f.waitCount(t, "Page.startScreencast", 1)
				f.frame(1)
			}
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				_, b, err := ws.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				if b[0] == byte(OpFrame) {
					break
				}
			}
		}
		for _, ws := range conns {
			ws.Close()
		}
		// The idle hub ends by itself after its grace.
		deadline := time.Now().Add(5 * time.Second)
		for {
			if s.hubs.Len() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the idle hub did not end after its grace period")
			}
			time.Sleep(10 * time.Millisecond)
		}
		srv.Close()
		s.Close()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestViewAutomating: viewers see "agent automating" while an automation client of the
// agent's browser is connected (the CDP route registers it), and not after it left.
func TestViewAutomating(t *testing.T) {
	_, svc, base := fakeViewService(t)
	v := dialViewer(t, base, "owner", "drive", false)
	v.wait(5*time.Second, "control state", func() bool { return v.last[OpControl] != nil })
	automating := func(on bool) func() bool {
		return func() bool { c, _ := v.last[OpControl].(Control); return c.Automating == on }
	}
	if !automating(false)() {
		t.Fatal("automating before any automation client")
	}
	svc.autoMu.Lock()
	svc.automation["a1"] = map[uint64]Viewer{7: {ID: "token:t1", Name: "agent"}}
	svc.autoMu.Unlock()
	v.wait(5*time.Second, "agent automating", automating(true))
	svc.autoMu.Lock()
	delete(svc.automation, "a1")
	svc.autoMu.Unlock()
	v.wait(5*time.Second, "automation gone", automating(false))
}

// TestViewBrowserGone: when the browser's connection ends (a crash, the agent stopped),
// viewers get Error{Browser} and a close 1013; the next viewer starts a new view.
func TestViewBrowserGone(t *testing.T) {
	var mu sync.Mutex
	var fakes []*fakeCDP
	s := newTestService(t, func() cdpClient {
		mu.Lock()
		defer mu.Unlock()
		f := newFakeCDP()
		fakes = append(fakes, f)
		return f
	})
	base := viewServer(t, s)
	v := dialViewer(t, base, "owner", "drive", false)
	v.wait(5*time.Second, "tabs", func() bool { return v.last[OpTabs] != nil })
	mu.Lock()
	fakes[0].Close()
	mu.Unlock()
	v.waitBrowserGone(5 * time.Second)
	w := dialViewer(t, base, "owner", "drive", false)
	w.wait(5*time.Second, "tabs from a new view", func() bool { return w.last[OpTabs] != nil })
	mu.Lock()
	n := len(fakes)
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d browser connections, want a new one for the new view", n)
	}
}
