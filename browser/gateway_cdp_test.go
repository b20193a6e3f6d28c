//go:build linux && !js

package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

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
	foreign []string // replies to ids this client never sent
	err     error
	done    chan struct{}
}

type tcdpEvent struct {
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
}

func newCDPTestConn(t testing.TB, c cdpClient) *cdpTestConn {
	tc := &cdpTestConn{c: c, calls: map[int]chan json.RawMessage{}, done: make(chan struct{})}
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
