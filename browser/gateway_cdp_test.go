//go:build linux && !js

package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/surface"
)

// cdpTestConn is a minimal CDP client over a cdpClient: calls by id, events kept.
type cdpTestConn struct {
	c       cdpClient
	mu      sync.Mutex
	nextID  int
	calls   map[int]chan json.RawMessage
	events  []tcdpEvent
	foreign []string // replies to ids this client never sent, messages of sessions it never attached
	owned   map[string]bool
	err     error
	done    chan struct{}
}

type tcdpEvent struct {
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
}

func newCDPTestConn(t testing.TB, c cdpClient) *cdpTestConn {
	tc := &cdpTestConn{c: c, calls: map[int]chan json.RawMessage{}, owned: map[string]bool{}, done: make(chan struct{})}
	go func() { // owner: the test; ends when the client is closed (cleanup)
		defer close(tc.done)
		for {
			b, err := c.Recv(context.Background())
			if err != nil {
				tc.mu.Lock()
				tc.err = err
				for _, ch := range tc.calls {
					close(ch)
				}
				tc.calls = map[int]chan json.RawMessage{}
				tc.mu.Unlock()
				return
			}
			var m struct {
				ID *int `json:"id"`
				tcdpEvent
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("a message that is not JSON: %q", b)
				continue
			}
			tc.mu.Lock()
			// Sessions this client attached (a reply's or an attachedToTarget's sessionId).
			var sess struct {
				Result struct{ SessionID string } `json:"result"`
				Params struct{ SessionID string } `json:"params"`
			}
			json.Unmarshal(b, &sess)
			for _, id := range []string{sess.Result.SessionID, sess.Params.SessionID} {
				if id != "" && (m.ID != nil || m.Method == "Target.attachedToTarget") {
					tc.owned[id] = true
				}
			}
			if m.SessionID != "" && !tc.owned[m.SessionID] {
				tc.foreign = append(tc.foreign, string(b))
			}
			if m.ID != nil {
				if ch, ok := tc.calls[*m.ID]; ok {
					delete(tc.calls, *m.ID)
					ch <- json.RawMessage(b)
				} else {
					tc.foreign = append(tc.foreign, string(b))
				}
			} else {
				tc.events = append(tc.events, m.tcdpEvent)
			}
			tc.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-tc.done })
	return tc
}

// call sends method and returns its result (or fails the test on an error reply).
func (tc *cdpTestConn) call(t testing.TB, session, method string, params any) json.RawMessage {
	t.Helper()
	r, err := tc.try(session, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

func (tc *cdpTestConn) try(session, method string, params any) (json.RawMessage, error) {
	tc.mu.Lock()
	if tc.err != nil {
		tc.mu.Unlock()
		return nil, tc.err
	}
	tc.nextID++
	id := tc.nextID
	ch := make(chan json.RawMessage, 1)
	tc.calls[id] = ch
	tc.mu.Unlock()
	m := map[string]any{"id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	if session != "" {
		m["sessionId"] = session
	}
	b, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.c.Send(ctx, b); err != nil {
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("client ended: %v", tc.err)
		}
		var rep struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		json.Unmarshal(r, &rep)
		if rep.Error != nil {
			return nil, fmt.Errorf("error reply %s", rep.Error)
		}
		return rep.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no reply to %s within 30 s", method)
	}
}

// openPage creates a tab on url, attaches to it (flatten) and waits for the load.
func (tc *cdpTestConn) openPage(t testing.TB, url string) string {
	t.Helper()
	var tgt struct{ TargetID string }
	json.Unmarshal(tc.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"}), &tgt)
	var att struct{ SessionID string }
	json.Unmarshal(tc.call(t, "", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true}), &att)
	if att.SessionID == "" {
		t.Fatal("attachToTarget: no session")
	}
	tc.call(t, att.SessionID, "Page.enable", nil)
	if url != "" {
		tc.navigate(t, att.SessionID, url)
	}
	return att.SessionID
}

func (tc *cdpTestConn) navigate(t testing.TB, session, url string) {
	t.Helper()
	tc.call(t, session, "Page.navigate", map[string]any{"url": url})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := tc.try(session, "Runtime.evaluate", map[string]any{"expression": "document.readyState + ' ' + location.href", "returnByValue": true})
		if err == nil && strings.HasPrefix(evalString(r), "complete ") && !strings.HasSuffix(evalString(r), "about:blank") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not load within 20 s", url)
}

// eval evaluates expr in session and returns its value as a string.
func (tc *cdpTestConn) eval(t testing.TB, session, expr string) string {
	t.Helper()
	return evalString(tc.call(t, session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}))
}

func evalString(r json.RawMessage) string {
	var v struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	json.Unmarshal(r, &v)
	switch x := v.Result.Value.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// screenshot returns a PNG of session's page.
func (tc *cdpTestConn) screenshot(t testing.TB, session string) []byte {
	var shot struct{ Data string }
	json.Unmarshal(tc.call(t, session, "Page.captureScreenshot", map[string]any{"format": "png"}), &shot)
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot: not a PNG (%d bytes, %v)", len(b), err)
	}
	return b
}

// inProcessHelper serves browser streams with ServeHelperStream in this process (Chromium
// on the host, as root with --no-sandbox), one helper session for the Service's streams.
func inProcessHelper(t testing.TB) OpenFunc {
	testenv.LookPath(t, "chromium")
	// The host's display (if any) is not an agent's: headless, as in a sandbox without a desktop.
	agentX11Socket = "/nonexistent/X0"
	home := t.TempDir()
	t.Setenv("HOME", home)
	life := surface.NewLifetime()
	ctx, cancel := context.WithCancel(surface.WithLifetime(context.Background(), life))
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); life.Close() })
	return func(_ context.Context, agent api.Agent) (net.Conn, error) {
		a, b := net.Pipe()
		wg.Add(1)
		go func() { defer wg.Done(); ServeHelperStream(ctx, b) }()
		return a, nil
	}
}

// TestCDPInProcess: the whole chain (helper with real Chromium, stream, mux, newClient) on
// the host: a page's title and a screenshot; two clients at once see only their own replies;
// Browser.close from a client leaves the browser running for the other.
func TestCDPInProcess(t *testing.T) {
	open := inProcessHelper(t)
	s := NewService(Config{Logger: cdpTestLogger(t)}, open)
	t.Cleanup(s.Close)
	agent := api.Agent{ID: "a1", OwnerID: "alice"}
	ctx := context.Background()
	c1, err := s.newClient(ctx, agent, "view")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.newClient(ctx, agent, "automation:token:x")
	if err != nil {
		t.Fatal(err)
	}
	t1, t2 := newCDPTestConn(t, c1), newCDPTestConn(t, c2)
	url := "data:text/html,<title>hello porthole</title><h1>hi</h1>"
	s1 := t1.openPage(t, url)
	s2 := t2.openPage(t, "data:text/html,<title>second</title>")
	var wg sync.WaitGroup
	for _, x := range []struct {
		tc   *cdpTestConn
		sess string
		want string
	}{{t1, s1, "hello porthole"}, {t2, s2, "second"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if got := x.tc.eval(t, x.sess, "document.title"); got != x.want {
					t.Errorf("title = %q, want %q", got, x.want)
					return
				}
			}
		}()
	}
	wg.Wait()
	png := t1.screenshot(t, s1)
	t.Logf("screenshot: %d bytes", len(png))
	// A large reply: a full-page screenshot of a tall, noisy page (megabytes of base64).
	t1.navigate(t, s1, `data:text/html,<body style="margin:0"><canvas id=c width=1600 height=2000></canvas><script>
		const c = document.getElementById('c').getContext('2d'), d = c.createImageData(1600, 2000);
		let x = 2463534242;
		for (let i = 0; i < d.data.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; d.data[i] = i % 4 == 3 ? 255 : x & 255; }
		c.putImageData(d, 0, 0);</script>`)
	start := time.Now()
	var big struct{ Data string }
	json.Unmarshal(t1.call(t, s1, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}), &big)
	if len(big.Data) < 4<<20 {
		t.Errorf("full-page screenshot: %d bytes of base64, want a large one (> 4 MiB)", len(big.Data))
	}
	t.Logf("full-page screenshot: %.1f MB of base64 in %v", float64(len(big.Data))/1e6, time.Since(start).Round(time.Millisecond))
	// c2 may not use c1's session.
	if _, err := t2.try(s1, "Runtime.evaluate", map[string]any{"expression": "1"}); err == nil || !strings.Contains(err.Error(), "Session with given id not found") {
		t.Errorf("client 2 on client 1's session: %v, want 'Session with given id not found'", err)
	}
	if _, err := t2.try("", "Browser.close", nil); err != nil {
		t.Errorf("Browser.close: %v", err)
	}
	if got := t1.eval(t, s1, "1+1"); got != "2" {
		t.Errorf("after client 2's Browser.close: 1+1 = %q", got)
	}
	for _, tc := range []*cdpTestConn{t1, t2} {
		tc.mu.Lock()
		if len(tc.foreign) > 0 {
			t.Errorf("a client got replies it never asked for: %q", tc.foreign)
		}
		tc.mu.Unlock()
	}
}

func cdpTestLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriterCDP{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriterCDP struct{ t testing.TB }

func (w logWriterCDP) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkGoroutinesCDP fails the test if goroutines started during it outlive its cleanups
// (registered first, so it runs last).
func checkGoroutinesCDP(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// TestCDPAutomationRoute: the raw CDP WebSocket of the cdp route (its handler behind a test
// server): the connection is audited and listed by automating while open; while a person
// holds control (cdpInputAllowed), Input.* from automation is answered with a CDP error naming
// them and other calls go through; the view's own client is not filtered. Closing the last
// client keeps the stream for the grace period, then closes it; Close leaks no goroutine.
func TestCDPAutomationRoute(t *testing.T) {
	checkGoroutinesCDP(t)
	var opens atomic.Int32
	open := inProcessHelper(t)
	counting := func(ctx context.Context, a api.Agent) (net.Conn, error) { opens.Add(1); return open(ctx, a) }
	var auditMu sync.Mutex
	var audit []string
	s := NewService(Config{Logger: cdpTestLogger(t), OnCall: func(_ api.Agent, v Viewer, action, detail string) {
		auditMu.Lock()
		audit = append(audit, v.ID+" "+action+" "+detail)
		auditMu.Unlock()
	}}, counting)
	t.Cleanup(s.Close)
	s.cdpGrace = 300 * time.Millisecond
	var holder atomic.Value
	holder.Store("")
	s.cdpInputAllowed = func(agentID string) (bool, string) {
		h := holder.Load().(string)
		return h == "", h
	}
	var changes atomic.Int32
	s.cdpAutomationChanged = func(agentID string) { changes.Add(1) }
	agent := api.Agent{ID: "a1", OwnerID: "alice"}
	tokenViewer := Viewer{ID: "token:t1", Name: "alice (agent token)", Token: "t1", Conn: 7}
	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		v := tokenViewer
		if r.URL.Query().Get("who") == "sharee" {
			v = Viewer{ID: "bob", Name: "bob", Conn: 8, Mode: api.LevelDrive}
		}
		s.serveCDP(r.Context(), ws, agent, v)
	}))
	t.Cleanup(ts.Close)
	wsURL := "ws" + strings.TrimPrefix(ts.URL, "http")

	// A drive sharee who is not the owner: closed with 1008.
	if ws, _, err := websocket.DefaultDialer.Dial(wsURL+"?who=sharee", nil); err == nil {
		_, _, err := ws.ReadMessage()
		if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) || !strings.Contains(err.Error(), "owner") {
			t.Errorf("a sharee's cdp WebSocket: %v, want close 1008 naming the owner rule", err)
		}
		ws.Close()
	}

	ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(id int, method, session string, params any) map[string]any {
		t.Helper()
		m := map[string]any{"id": id, "method": method, "params": params}
		if session != "" {
			m["sessionId"] = session
		}
		if err := ws.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			var r map[string]any
			if err := ws.ReadJSON(&r); err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			if r["id"] == float64(id) {
				return r
			}
		}
	}
	var tgt struct{ TargetID string }
	r := call(1, "Target.createTarget", "", map[string]any{"url": "about:blank"})
	b, _ := json.Marshal(r["result"])
	json.Unmarshal(b, &tgt)
	r = call(2, "Target.attachToTarget", "", map[string]any{"targetId": tgt.TargetID, "flatten": true})
	sess, _ := r["result"].(map[string]any)["sessionId"].(string)
	if sess == "" {
		t.Fatalf("attach: %v", r)
	}
	if got := s.automating(agent.ID); len(got) != 1 || got[0].ID != tokenViewer.ID {
		t.Errorf("automating = %+v, want the token's connection", got)
	}
	mouse := map[string]any{"type": "mouseMoved", "x": 10, "y": 10}
	if r := call(3, "Input.dispatchMouseEvent", sess, mouse); r["error"] != nil {
		t.Errorf("input while nobody holds control: %v", r)
	}
	holder.Store("Alice Person")
	if r := call(4, "Input.dispatchMouseEvent", sess, mouse); !strings.Contains(fmt.Sprint(r["error"]), "Alice Person") {
		t.Errorf("input while Alice holds control: %v, want an error naming her", r)
	}
	if r := call(5, "Runtime.evaluate", sess, map[string]any{"expression": "6*7", "returnByValue": true}); r["error"] != nil {
		t.Errorf("a non-input call while Alice holds control: %v", r)
	}
	// The view's own client is not filtered.
	vc, err := s.newClient(context.Background(), agent, "view")
	if err != nil {
		t.Fatal(err)
	}
	view := newCDPTestConn(t, vc)
	vs := view.openPage(t, "")
	if _, err := view.try(vs, "Input.dispatchMouseEvent", mouse); err != nil {
		t.Errorf("the view's input while Alice holds control: %v", err)
	}
	vc.Close()
	ws.Close()

	// automation.close audited, automating empty.
	deadline := time.Now().Add(5 * time.Second)
	for len(s.automating(agent.ID)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.automating(agent.ID); len(got) != 0 {
		t.Errorf("automating after close = %+v", got)
	}
	if n := changes.Load(); n != 2 {
		t.Errorf("cdpAutomationChanged called %d times, want 2 (open, close)", n)
	}
	auditMu.Lock()
	joined := strings.Join(audit, "\n")
	auditMu.Unlock()
	if !strings.Contains(joined, "token:t1 automation.open") || !strings.Contains(joined, "token:t1 automation.close") {
		t.Errorf("audit:\n%s\nwant automation.open and automation.close by the token", joined)
	}

	// Grace: the stream stays (a new client within the grace reuses it), then closes.
	c2, err := s.newClient(context.Background(), agent, "view")
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if n := opens.Load(); n != 1 {
		t.Errorf("%d helper streams opened, want 1 (reused within the grace period)", n)
	}
	time.Sleep(s.cdpGrace + 500*time.Millisecond)
	s.cdpMu.Lock()
	left := len(s.cdpAgents)
	s.cdpMu.Unlock()
	if left != 0 {
		t.Errorf("the agent's stream is still open after the grace period")
	}
	c3, err := s.newClient(context.Background(), agent, "view")
	if err != nil {
		t.Fatal(err)
	}
	c3c := newCDPTestConn(t, c3)
	if got := c3c.eval(t, c3c.openPage(t, ""), "1+1"); got != "2" {
		t.Errorf("on the new stream 1+1 = %q", got)
	}
	if n := opens.Load(); n != 2 {
		t.Errorf("%d helper streams opened, want 2 (a new one after the grace period)", n)
	}
	s.CloseAgent(agent.ID)
}

// TestCDPHeadedOnDesktopAndLentProfile: with the agent's desktop display up, Chromium starts
// headed on it (its user agent is not HeadlessChrome); with a lent profile mounted, that is
// the user data dir (a cookie set lands in its files, not in the agent's own profile).
func TestCDPHeadedOnDesktopAndLentProfile(t *testing.T) {
	xvfb := testenv.LookPath(t, "Xvfb")
	open := inProcessHelper(t)
	const disp = 97
	sock := fmt.Sprintf("/tmp/.X11-unix/X%d", disp)
	x := exec.Command(xvfb, fmt.Sprintf(":%d", disp), "-nolisten", "tcp", "-noreset", "-screen", "0", "1280x800x24")
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Process.Kill(); x.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatal("Xvfb did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	agentX11Socket, agentDisplay = sock, fmt.Sprintf(":%d", disp)
	lent := filepath.Join(t.TempDir(), "lent-profile")
	os.Mkdir(lent, 0o700)
	lentProfileDir = lent
	t.Cleanup(func() { agentDisplay, lentProfileDir = ":0", LentProfileDir })

	s := NewService(Config{Logger: cdpTestLogger(t)}, open)
	t.Cleanup(s.Close)
	c, err := s.newClient(context.Background(), api.Agent{ID: "h1"}, "view")
	if err != nil {
		t.Fatal(err)
	}
	tc := newCDPTestConn(t, c)
	var ver struct{ Product, UserAgent string }
	json.Unmarshal(tc.call(t, "", "Browser.getVersion", nil), &ver)
	if strings.Contains(ver.UserAgent, "Headless") || strings.Contains(ver.Product, "Headless") {
		t.Errorf("with the desktop up the browser is headless: %+v", ver)
	}
	tc.call(t, "", "Storage.setCookies", map[string]any{"cookies": []map[string]any{{
		"name": "lent", "value": "from-the-lent-profile", "domain": "lent.test", "path": "/",
		"expires": float64(time.Now().Add(time.Hour).Unix()),
	}}})
	c.Close()
	s.Close() // the stream closes; the helper session (and Chromium) ends at cleanup
	if _, err := os.Stat(filepath.Join(lent, "Local State")); err != nil {
		t.Errorf("the lent profile was not used: %v", err)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), ProfileSubdir)); err == nil {
		t.Errorf("the agent's own profile was created although a profile was lent")
	}
}
