//go:build linux && !js

package browser

// Attacks on the CDP side (docs/browser-cdp.md, "Refused methods" and "Threats"): one CDP
// client against another on a real Chromium (the helper in process, on the host), the
// automation route's per-agent connection cap, and the lifecycle (an agent closed, the
// gateway closed) while the browser's side floods the gateway.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser/internal/cdpmux"
)

// TestAttackCDPClientAgainstClient: the agent's automation, next to the live view's client on
// the same real Chromium, cannot reach the view's sessions (call, detach, sendMessageToTarget),
// cannot crash the browser, open a port (Tethering.bind) or hand CDP to web content;
// file:///proc/self/environ shows Chromium's environment,
// which holds only the allowlisted variables (no secret of the gateway's or the helper's).
func TestAttackCDPClientAgainstClient(t *testing.T) {
	t.Setenv("PORTHOLE_ATTACK_SECRET", "s3cret-of-the-helper")
	open := inProcessHelper(t)
	s := NewService(Config{Logger: cdpTestLogger(t)}, open)
	t.Cleanup(s.Close)
	s.cdpInputAllowed = func(string) (bool, string) { return false, "alice" } // alice holds control
	agent := api.Agent{ID: "a1", OwnerID: "alice"}
	ctx := context.Background()
	vc, err := s.newClient(ctx, agent, "view")
	if err != nil {
		t.Fatal(err)
	}
	ac, err := s.newClient(ctx, agent, "automation:token:x")
	if err != nil {
		t.Fatal(err)
	}
	view, auto := newCDPTestConn(t, vc), newCDPTestConn(t, ac)
	vs := view.openPage(t, "data:text/html,<title>the view's page</title>")

	refused := []struct {
		name, session, method string
		params                any
		want                  string
	}{
		{"call on the view's session", vs, "Runtime.evaluate", map[string]any{"expression": "1"}, "Session with given id not found"},
		{"detach the view's session", "", "Target.detachFromTarget", map[string]any{"sessionId": vs}, "session"},
		{"sendMessageToTarget on the view's session", "", "Target.sendMessageToTarget",
			map[string]any{"sessionId": vs, "message": `{"id":1,"method":"Runtime.evaluate","params":{"expression":"1"}}`}, "session"},
		{"crash the browser", "", "Browser.crash", nil, "shared"},
		{"open a TCP port", "", "Tethering.bind", map[string]any{"port": 9222}, "TCP port"},
		{"CDP for web content", "", "Target.exposeDevToolsProtocol", map[string]any{"targetId": "x"}, "web content"},
	}
	for _, x := range refused {
		_, err := auto.try(x.session, x.method, x.params)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(x.want)) {
			t.Errorf("%s (%s): %v, want an error naming %q", x.name, x.method, err, x.want)
		} else {
			t.Logf("%s: %v", x.name, err)
		}
	}
	// Input past alice's control, carried in sendMessageToTarget on a non-flattened session.
	var tgt struct{ TargetID string }
	json.Unmarshal(auto.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"}), &tgt)
	var old struct{ SessionID string }
	json.Unmarshal(auto.call(t, "", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": false}), &old)
	msg := `{"id":1,"method":"Input.dispatchKeyEvent","params":{"type":"keyDown","key":"a"}}`
	if _, err := auto.try("", "Target.sendMessageToTarget", map[string]any{"sessionId": old.SessionID, "message": msg}); err == nil || !strings.Contains(err.Error(), "alice has taken control") {
		t.Errorf("Input.* inside sendMessageToTarget while alice holds control: %v, want refused naming her", err)
	}
	if _, err := auto.try("", "Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "a"}); err == nil || !strings.Contains(err.Error(), "alice has taken control") {
		t.Errorf("Input.* while alice holds control: %v, want refused naming her", err)
	}
	// Allowed: Playwright sets its own download path (in the sandbox's /tmp) as it connects.
	if _, err := auto.try("", "Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": "/tmp/playwright-artifacts-x"}); err != nil {
		t.Errorf("downloads to /tmp/playwright-artifacts-x: %v, want them allowed", err)
	}
	// The view's page is intact.
	if got := view.eval(t, vs, "document.title"); got != "the view's page" {
		t.Errorf("after the attacks the view's page title = %q", got)
	}
	// A second automation client leaves: Chromium reports its browser session detached at the
	// root; the view is not told (it would name the other client's session).
	ac2, err := s.newClient(ctx, agent, "automation:token:y")
	if err != nil {
		t.Fatal(err)
	}
	auto2 := newCDPTestConn(t, ac2)
	auto2.call(t, "", "Browser.getVersion", nil)
	ac2.Close()
	time.Sleep(500 * time.Millisecond)
	view.mu.Lock()
	for _, e := range view.events {
		if e.Method == "Target.detachedFromTarget" && e.SessionID == "" {
			t.Errorf("the view was told of another client's detach: %s", e.Params)
		}
	}
	view.mu.Unlock()

	// Chromium's environment. Navigating to file:///proc/self/environ shows an empty page
	// (Chromium reads /proc's size-0 files as empty); the agent can read Chromium's environ from
	// its shell anyway (same uid), which is what the test does with the pids SystemInfo gives.
	as := auto.openPage(t, "file:///proc/self/environ")
	if env := auto.eval(t, as, "document.body ? document.body.innerText : ''"); strings.Contains(env, "s3cret") {
		t.Errorf("file:///proc/self/environ shows the helper's secret: %.200q", env)
	}
	var procs struct {
		ProcessInfo []struct {
			Type string
			ID   int
		}
	}
	json.Unmarshal(auto.call(t, "", "SystemInfo.getProcessInfo", nil), &procs)
	checked := 0
	for _, p := range procs.ProcessInfo {
		if p.Type != "browser" { // the children write their command lines over their environ
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.ID))
		if err != nil {
			continue
		}
		checked++
		for _, kv := range strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00") {
			k, _, _ := strings.Cut(kv, "=")
			switch k {
			case "HOME", "USER", "LOGNAME", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "SHELL", "TZ", "DISPLAY",
				"PWD", "SHLVL", "_", "CHROMIUM_FLAGS": // the allowlist, then what sh and Debian's wrapper set
			default:
				// The wrapper's CHROME_* and the GOOGLE_* keys of /etc/chromium.d/apikeys (Debian's
				// public ones, readable by the agent in the sandbox's /etc anyway).
				if !strings.HasPrefix(k, "CHROME_") && !strings.HasPrefix(k, "GOOGLE_") {
					t.Errorf("Chromium's %s process (pid %d) has %q in its environment, not in the allowlist", p.Type, p.ID, k)
				}
			}
		}
	}
	if checked == 0 {
		t.Errorf("no Chromium process's environment read (SystemInfo.getProcessInfo: %+v)", procs)
	}
	t.Logf("the browser process's environment holds only the allowlist")
}

// floodBrowser is an OpenFunc whose "browser" answers attachToBrowserTarget and then floods
// root-level events of 32 KiB as fast as the gateway reads them (the agent's own process on
// Chromium's side of the pipe).
func floodBrowser(t *testing.T) OpenFunc {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return func(ctx context.Context, _ api.Agent) (net.Conn, error) {
		a, b := net.Pipe()
		wg.Add(2)
		var wmu sync.Mutex
		write := func(p []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			return cdpmux.WriteMessage(b, p)
		}
		go func() { // owner: the test (wg); ends when the gateway closes the stream
			defer wg.Done()
			br := bufio.NewReader(b)
			n := 0
			for {
				raw, err := cdpmux.ReadMessage(br, 1<<26)
				if err != nil {
					return
				}
				var x struct {
					ID     int
					Method string
				}
				json.Unmarshal(raw, &x)
				if x.Method == "Target.attachToBrowserTarget" {
					n++
					write([]byte(fmt.Sprintf(`{"id":%d,"result":{"sessionId":"B%d"}}`, x.ID, n)))
				}
			}
		}()
		ev := []byte(`{"method":"Flood.event","params":{"x":"` + strings.Repeat("F", 32<<10) + `"}}`)
		go func() { // owner: the test (wg); ends when the gateway closes the stream
			defer wg.Done()
			defer b.Close()
			for {
				if err := write(ev); err != nil {
					return
				}
			}
		}()
		return a, nil
	}
}

// cdpRouteServer serves s's cdp route for agent to the agent's token, as the server would.
func cdpRouteServer(t *testing.T, s *Service, agent api.Agent) string {
	var conn sync.Mutex
	next := uint64(0)
	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		conn.Lock()
		next++
		v := Viewer{ID: "token:t1", Name: "agent token", Token: "t1", Conn: next}
		conn.Unlock()
		s.serveCDP(r.Context(), ws, agent, v)
	}))
	t.Cleanup(ts.Close)
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

// TestAttackCDPLifecycleUnderFlood: while the browser's side floods the gateway, the agent's
// automation connections are capped (the live view keeps a slot), closing the agent ends
// its view client and every automation connection, and closing the gateway leaks no goroutine.
func TestAttackCDPLifecycleUnderFlood(t *testing.T) {
	checkGoroutinesCDP(t)
	s := NewService(Config{Logger: cdpTestLogger(t)}, floodBrowser(t))
	agent := api.Agent{ID: "a1", OwnerID: "alice"}
	wsURL := cdpRouteServer(t, s, agent)
	t.Cleanup(s.Close)

	// maxAutomation connections that read slowly, then one more: refused with 1008.
	var conns []*websocket.Conn
	for i := range maxAutomation {
		ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
		if err != nil {
			t.Fatalf("automation connection %d: %v", i+1, err)
		}
		conns = append(conns, ws)
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := ws.ReadMessage(); err != nil { // the flood reaches it
			t.Fatalf("automation connection %d read: %v", i+1, err)
		}
	}
	ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) || !strings.Contains(err.Error(), "too many automation") {
				t.Errorf("automation connection %d: %v, want close 1008 naming the cap", maxAutomation+1, err)
			}
			break
		}
	}
	ws.Close()
	// The live view still gets a client.
	vc, err := s.newClient(context.Background(), agent, "view")
	if err != nil {
		t.Fatalf("the view's client with %d automation connections open: %v", maxAutomation, err)
	}
	// The agent is stopped: everything of it ends.
	s.CloseAgent(agent.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, err := vc.Recv(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the view's client did not end when the agent was closed")
			}
			break
		}
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("automation connection %d still open after the agent was closed", i+1)
				}
				break
			}
		}
		c.Close()
	}
	// A new connection during a new flood, then the gateway closes.
	ws, _, err = websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := ws.ReadMessage(); err != nil {
		t.Fatalf("after the agent was closed, a new connection: %v", err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Service.Close did not return during a flood")
	}
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			break
		}
	}
	ws.Close()
}

// quietBrowser is an OpenFunc whose "browser" answers attachToBrowserTarget and every other
// call with a result of resultSize bytes.
func quietBrowser(t *testing.T, resultSize int) OpenFunc {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	pad := strings.Repeat("R", resultSize)
	return func(ctx context.Context, _ api.Agent) (net.Conn, error) {
		a, b := net.Pipe()
		wg.Add(1)
		go func() { // owner: the test (wg); ends when the gateway closes the stream
			defer wg.Done()
			defer b.Close()
			br := bufio.NewReader(b)
			n := 0
			for {
				raw, err := cdpmux.ReadMessage(br, 1<<26)
				if err != nil {
					return
				}
				var x struct {
					ID        int
					Method    string
					SessionID string
				}
				json.Unmarshal(raw, &x)
				var reply string
				if x.Method == "Target.attachToBrowserTarget" {
					n++
					reply = fmt.Sprintf(`{"id":%d,"result":{"sessionId":"B%d"}}`, x.ID, n)
				} else {
					reply = fmt.Sprintf(`{"id":%d,"result":{"pad":%q},"sessionId":%q}`, x.ID, pad, x.SessionID)
				}
				if cdpmux.WriteMessage(b, []byte(reply)) != nil {
					return
				}
			}
		}()
		return a, nil
	}
}

// TestAttackCDPRouteClientSide: from the WebSocket side, a message over the limit closes the
// connection with 1009; a client that sends calls and never reads the replies is
// disconnected (its queue overflows) and frees its slot; a client that goes silent (no
// message, no pong) is disconnected after cdpReadTimeout.
func TestAttackCDPRouteClientSide(t *testing.T) {
	checkGoroutinesCDP(t)
	s := NewService(Config{Logger: cdpTestLogger(t)}, quietBrowser(t, 64<<10))
	agent := api.Agent{ID: "a1", OwnerID: "alice"}
	wsURL := cdpRouteServer(t, s, agent)
	t.Cleanup(s.Close)

	// A message over 64 MiB.
	ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	huge := []byte(`{"id":1,"method":"Runtime.evaluate","params":{"expression":"` + strings.Repeat("x", cdpmux.DefaultMaxMessage) + `"}}`)
	ws.WriteMessage(websocket.TextMessage, huge)
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, _, err = ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Errorf("a message over 64 MiB: %v, want close 1009", err)
	}
	ws.Close()

	// A client that never reads: 3000 calls whose replies are 64 KiB each.
	ws, _, err = websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrote, start := 0, time.Now()
	for i := range 3000 {
		ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := ws.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"id":%d,"method":"Runtime.evaluate"}`, i))); err != nil {
			t.Logf("write %d: %v", i, err)
			break // already disconnected
		}
		wrote++
	}
	// Not reading (reading would drain the queue): the gateway ends the connection by itself.
	for len(s.automating(agent.ID)) > 0 && time.Since(start) < 60*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("wrote %d calls; the gateway ended the connection after %v", wrote, time.Since(start).Round(time.Millisecond))
	if len(s.automating(agent.ID)) > 0 {
		t.Error("a client that never read 3000 replies of 64 KiB is still connected after 60 s")
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var end error
	got := 0
	for end == nil {
		_, _, end = ws.ReadMessage()
		got++
	}
	t.Logf("read %d messages after", got)
	t.Logf("the client that never read: %d messages, then %v", got, end)
	ws.Close()

	// A silent client.
	s.cdpReadTimeout.Store(int64(500 * time.Millisecond))
	ws, _, err = websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetPingHandler(func(string) error { return nil }) // answers no ping
	// 30 s, not 0.5: the clock starts once the client is attached, and Chromium may still be
	// busy with the flood above on a loaded machine.
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Error("a silent client got a message")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("a silent client is still connected after 30 s (read timeout 0.5 s)")
	}
	ws.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.automating(agent.ID)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(s.automating(agent.ID)); n > 0 {
		t.Errorf("%d automation connections still counted after every client was disconnected", n)
	}
}
