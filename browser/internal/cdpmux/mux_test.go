package cdpmux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBrowser is the far end of a mux: it answers Target.attachToBrowserTarget with a new
// session and lets the test script everything else.
type fakeBrowser struct {
	t     *testing.T
	conn  net.Conn
	br    *bufio.Reader
	wmu   sync.Mutex
	mu    sync.Mutex
	next  int
	calls chan map[string]any // calls other than attachToBrowserTarget
	done  chan struct{}
}

func newFake(t *testing.T, cfg Config) (*Mux, *fakeBrowser) {
	a, b := net.Pipe()
	f := &fakeBrowser{t: t, conn: b, br: bufio.NewReader(b), calls: make(chan map[string]any, 1024), done: make(chan struct{})}
	go func() { // owner: the test; ends when the pipe closes
		defer close(f.done)
		for {
			raw, err := ReadMessage(f.br, 1<<30)
			if err != nil {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Errorf("the mux sent invalid JSON: %q", raw)
				continue
			}
			if m["method"] == "Target.attachToBrowserTarget" {
				f.mu.Lock()
				f.next++
				sid := fmt.Sprintf("BROWSER-%d", f.next)
				f.mu.Unlock()
				f.send(map[string]any{"id": m["id"], "result": map[string]any{"sessionId": sid}})
				continue
			}
			f.calls <- m
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := New(a, cfg)
	t.Cleanup(func() { m.Close(); b.Close(); <-f.done })
	return m, f
}

func (f *fakeBrowser) send(m any) {
	b, _ := json.Marshal(m)
	f.raw(b)
}

func (f *fakeBrowser) raw(b []byte) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := WriteMessage(f.conn, b); err != nil {
		f.t.Logf("fake browser write: %v", err)
	}
}

func (f *fakeBrowser) next1(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-f.calls:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("the browser got no call")
		return nil
	}
}

func newC(t *testing.T, m *Mux, name string) *Client {
	t.Helper()
	c, err := m.NewClient(context.Background(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *Client, s string) {
	t.Helper()
	if err := c.Send(context.Background(), []byte(s)); err != nil {
		t.Fatalf("Send %s: %v", s, err)
	}
}

func recv(t *testing.T, c *Client) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("Recv: invalid JSON %q", b)
	}
	return m
}

func noRecv(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if b, err := c.Recv(ctx); err == nil {
		t.Errorf("client %s got %s, want nothing", c.name, b)
	}
}

func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// TestIDsAndSessions: ids are the mux's on the browser side and each client's own on its
// side; a call without a session goes to the client's browser session, which the client
// never sees; a session attached by a client is its own (replies and events), another
// client may not address it; browser-wide (root) events reach every client.
func TestIDsAndSessions(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{})
	a, b := newC(t, m, "a"), newC(t, m, "b")

	send(t, a, `{"id":1,"method":"Browser.getVersion"}`)
	send(t, b, `{"id":1,"method":"Browser.getVersion"}`)
	ca, cb := f.next1(t), f.next1(t)
	if ca["id"] == cb["id"] {
		t.Fatalf("two clients' id 1 reached the browser as the same id %v", ca["id"])
	}
	if ca["sessionId"] != "BROWSER-1" || cb["sessionId"] != "BROWSER-2" {
		t.Errorf("sessions %v %v, want each client's browser session", ca["sessionId"], cb["sessionId"])
	}
	// Answer b first, then a.
	f.send(map[string]any{"id": cb["id"], "sessionId": "BROWSER-2", "result": map[string]any{"who": "b"}})
	f.send(map[string]any{"id": ca["id"], "sessionId": "BROWSER-1", "result": map[string]any{"who": "a"}})
	ra, rb := recv(t, a), recv(t, b)
	if ra["id"] != 1.0 || ra["result"].(map[string]any)["who"] != "a" || ra["sessionId"] != nil {
		t.Errorf("a got %v", ra)
	}
	if rb["id"] != 1.0 || rb["result"].(map[string]any)["who"] != "b" {
		t.Errorf("b got %v", rb)
	}

	// a attaches to a page: the session is a's.
	send(t, a, `{"id":2,"method":"Target.attachToTarget","params":{"targetId":"T1","flatten":true}}`)
	c := f.next1(t)
	f.send(map[string]any{"id": c["id"], "sessionId": "BROWSER-1", "result": map[string]any{"sessionId": "PAGE-A"}})
	if r := recv(t, a); r["result"].(map[string]any)["sessionId"] != "PAGE-A" {
		t.Fatalf("attach reply %v", r)
	}
	f.send(map[string]any{"method": "Page.loadEventFired", "sessionId": "PAGE-A", "params": map[string]any{}})
	if e := recv(t, a); e["method"] != "Page.loadEventFired" || e["sessionId"] != "PAGE-A" {
		t.Errorf("a got %v, want its page's event", e)
	}
	noRecv(t, b)
	// b may not use a's session: answered locally, not sent.
	send(t, b, `{"id":7,"method":"Runtime.evaluate","sessionId":"PAGE-A","params":{"expression":"1"}}`)
	if r := recv(t, b); r["id"] != 7.0 || r["error"] == nil {
		t.Errorf("b on a's session got %v, want an error", r)
	}
	// An auto-attached child of a's page is a's too.
	f.send(map[string]any{"method": "Target.attachedToTarget", "sessionId": "PAGE-A", "params": map[string]any{"sessionId": "IFRAME-A"}})
	recv(t, a)
	f.send(map[string]any{"method": "Runtime.consoleAPICalled", "sessionId": "IFRAME-A", "params": map[string]any{}})
	if e := recv(t, a); e["sessionId"] != "IFRAME-A" {
		t.Errorf("a got %v, want its iframe's event", e)
	}
	// Root events go to both.
	f.send(map[string]any{"method": "Target.targetCrashed", "params": map[string]any{}})
	if recv(t, a)["method"] != "Target.targetCrashed" || recv(t, b)["method"] != "Target.targetCrashed" {
		t.Error("a root event did not reach both clients")
	}
	// Detached: a's session is forgotten; its late events are dropped.
	f.send(map[string]any{"method": "Target.detachedFromTarget", "sessionId": "BROWSER-1", "params": map[string]any{"sessionId": "PAGE-A"}})
	recv(t, a)
	f.send(map[string]any{"method": "Page.loadEventFired", "sessionId": "PAGE-A", "params": map[string]any{}})
	noRecv(t, a)
	// Replies to ids nobody sent are dropped.
	f.send(map[string]any{"id": 999999, "result": map[string]any{}})
	noRecv(t, a)
	noRecv(t, b)

	// Browser.close is answered locally; Browser.crash refused.
	send(t, a, `{"id":9,"method":"Browser.close"}`)
	if r := recv(t, a); r["id"] != 9.0 || r["result"] == nil {
		t.Errorf("Browser.close got %v", r)
	}
	send(t, a, `{"id":10,"method":"Browser.crash"}`)
	if r := recv(t, a); r["error"] == nil {
		t.Errorf("Browser.crash got %v", r)
	}

	// Closing a detaches its browser session.
	a.Close()
	d := f.next1(t)
	if d["method"] != "Target.detachFromTarget" || d["params"].(map[string]any)["sessionId"] != "BROWSER-1" {
		t.Errorf("on close the browser got %v, want a detach of BROWSER-1", d)
	}
	if _, err := a.Recv(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close = %v", err)
	}
	b.Close()
}

// TestPendingBound: beyond MaxPending calls in flight a client's call is answered with an
// error and not sent; replies free the slots.
func TestPendingBound(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{MaxPending: 3})
	a := newC(t, m, "a")
	for i := 1; i <= 4; i++ {
		send(t, a, fmt.Sprintf(`{"id":%d,"method":"X.y"}`, i))
	}
	r := recv(t, a)
	if r["id"] != 4.0 || !strings.Contains(fmt.Sprint(r["error"]), "too many calls in flight") {
		t.Errorf("the 4th call got %v, want a too-many error", r)
	}
	var ids []any
	for range 3 {
		ids = append(ids, f.next1(t)["id"])
	}
	select {
	case c := <-f.calls:
		t.Fatalf("the 4th call reached the browser: %v", c)
	default:
	}
	f.send(map[string]any{"id": ids[0], "sessionId": "BROWSER-1", "result": map[string]any{}})
	recv(t, a)
	send(t, a, `{"id":5,"method":"X.y"}`)
	if c := f.next1(t); c["method"] != "X.y" {
		t.Errorf("after a reply a call goes through: %v", c)
	}
}

// TestSlowClient: a client that does not read overflows its queue and is closed with
// ErrSlowClient; the other client keeps getting its messages.
func TestSlowClient(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{QueueMessages: 10})
	slow, fast := newC(t, m, "slow"), newC(t, m, "fast")
	// The fast client reads each event before the next is sent (deterministic on a loaded
	// machine); the slow one reads nothing.
	for i := range 50 {
		f.send(map[string]any{"method": "Root.event", "params": map[string]any{"n": i}})
		if e := recv(t, fast); e["params"].(map[string]any)["n"] != float64(i) {
			t.Fatalf("the fast client got %v, want event %d", e, i)
		}
	}
	select {
	case <-slow.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow client was not closed")
	}
	if err := slow.Err(); !errors.Is(err, ErrSlowClient) {
		t.Errorf("slow client's error = %v, want ErrSlowClient", err)
	}
	if err := fast.Err(); err != nil {
		t.Errorf("the fast client ended: %v", err)
	}
	fast.Close()
}

// TestMalformedFromBrowser: garbage, oversized messages, ids out of range, invalid UTF-8
// and non-objects are dropped; the mux goes on.
func TestMalformedFromBrowser(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{MaxMessage: 1 << 10})
	a := newC(t, m, "a")
	for _, bad := range []string{
		`not json`, `{"id":`, `[]`, `"x"`, `{}`, `{"id":-1,"result":{}}`, `{"id":1e3,"result":{}}`,
		`{"id":99999999999,"result":{}}`, `{"id":"1","result":{}}`, "{\"method\":\"A.b\",\"params\":\"\xff\"}",
		`{"id":1}`, `{"method":"A.b","sessionId":"nobody"}`,
		`{"method":"A.b","params":"` + strings.Repeat("x", 2000) + `"}`,
	} {
		f.raw([]byte(bad))
	}
	f.send(map[string]any{"method": "Good.event"})
	if e := recv(t, a); e["method"] != "Good.event" {
		t.Errorf("after garbage the client got %v, want the good event", e)
	}
	select {
	case <-m.Done():
		t.Fatalf("the mux ended on garbage: %v", m.Err())
	default:
	}
	// A client's garbage is its own error.
	if err := a.Send(context.Background(), []byte(`{"method":"X"}`)); !errors.Is(err, ErrBadMessage) {
		t.Errorf("a call without id: %v", err)
	}
	a.Close()
}

// TestBrowserGone: the connection ending ends every client with the far end's reason.
func TestBrowserGone(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{ExitMethod: "Porthole.browserExited"})
	a := newC(t, m, "a")
	f.send(map[string]any{"method": "Porthole.browserExited", "params": map[string]any{"message": "Chromium exited with code 139"}})
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not end")
	}
	_, err := a.Recv(context.Background())
	if !errors.Is(err, ErrBrowserGone) || !strings.Contains(err.Error(), "code 139") {
		t.Errorf("Recv = %v, want ErrBrowserGone with the reason", err)
	}
	if _, err := m.NewClient(context.Background(), "late", nil); err == nil {
		t.Error("a new client of an ended mux")
	}
}

// TestFilterAndIdle: a filter refuses a call with a CDP error naming its reason; closing
// the last client calls OnIdle.
func TestFilterAndIdle(t *testing.T) {
	checkGoroutines(t)
	idle := make(chan struct{}, 1)
	m, f := newFake(t, Config{OnIdle: func() { idle <- struct{}{} }})
	c, err := m.NewClient(context.Background(), "auto", func(method string, _ json.RawMessage) error {
		if strings.HasPrefix(method, "Input.") {
			return errors.New("alice holds control")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, `{"id":1,"method":"Input.dispatchMouseEvent","params":{}}`)
	if r := recv(t, c); !strings.Contains(fmt.Sprint(r["error"]), "alice holds control") {
		t.Errorf("filtered call got %v", r)
	}
	send(t, c, `{"id":2,"method":"Page.reload"}`)
	if call := f.next1(t); call["method"] != "Page.reload" {
		t.Errorf("the browser got %v", call)
	}
	c.Close()
	select {
	case <-idle:
	case <-time.After(5 * time.Second):
		t.Error("OnIdle not called after the last client closed")
	}
}

// TestMaxClientsAndCloseDetaches: beyond MaxClients NewClient fails; Close detaches the open
// clients' browser sessions before it closes the connection.
func TestMaxClientsAndCloseDetaches(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{MaxClients: 2})
	newC(t, m, "a")
	newC(t, m, "b")
	if _, err := m.NewClient(context.Background(), "c", nil); !errors.Is(err, ErrTooManyClients) {
		t.Errorf("a third client: %v, want ErrTooManyClients", err)
	}
	m.Close()
	got := map[any]bool{}
	for range 2 {
		d := f.next1(t)
		if d["method"] != "Target.detachFromTarget" {
			t.Fatalf("on Close the browser got %v", d)
		}
		got[d["params"].(map[string]any)["sessionId"]] = true
	}
	if !got["BROWSER-1"] || !got["BROWSER-2"] {
		t.Errorf("detached %v, want both clients' browser sessions", got)
	}
}
