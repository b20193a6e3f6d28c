package cdpmux

// Attacks on the gateway from the browser's side of the pipe (the agent controls its
// sandbox: it may kill Chromium and write its own bytes where Chromium's messages go) and
// from one client against another. Each test performs the attack and asserts that it fails
// closed: the mux stays up, bounded in memory, and the other clients are unaffected.

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
	"unicode/utf8"
)

// heapInUse is the live heap after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestAttackEndlessAndOversized: a message far over the limit, and one that never ends with
// a NUL until 64× the limit, are skipped without the mux holding them; the next message is
// routed.
func TestAttackEndlessAndOversized(t *testing.T) {
	checkGoroutines(t)
	const limit = 1 << 20
	m, f := newFake(t, Config{MaxMessage: limit})
	a := newC(t, m, "a")
	before := heapInUse()
	// One 4 MiB message, then 64 MiB with no NUL (written in chunks; then a NUL).
	f.raw([]byte(`{"method":"Big.event","params":{"x":"` + strings.Repeat("A", 4<<20) + `"}}`))
	chunk := []byte(strings.Repeat("B", 1<<20))
	f.wmu.Lock()
	for range 64 {
		f.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := f.conn.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	f.conn.Write([]byte{0})
	f.wmu.Unlock()
	grown := int64(heapInUse()) - int64(before)
	t.Logf("live heap after 68 MiB of oversized input: %+d KiB (limit %d KiB)", grown>>10, limit>>10)
	if grown > 8*limit {
		t.Errorf("the mux holds %d bytes after skipping oversized input, want ≤ %d", grown, 8*limit)
	}
	f.send(map[string]any{"method": "Good.event"})
	if e := recv(t, a); e["method"] != "Good.event" {
		t.Errorf("after oversized input the client got %v, want the good event", e)
	}
	a.Close()
}

// TestAttackGarbageDecoder: deeply nested JSON, invalid UTF-8, huge numbers and long
// session ids are dropped; the mux goes on and routes the next message.
func TestAttackGarbageDecoder(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{MaxMessage: 8 << 20})
	a := newC(t, m, "a")
	start := time.Now()
	for _, bad := range [][]byte{
		[]byte(strings.Repeat("[", 8<<20-1)),
		[]byte(`{"method":"A.b","params":` + strings.Repeat(`{"a":`, 1<<20) + `1` + strings.Repeat("}", 1<<20) + `}`),
		[]byte("{\"method\":\"A.b\",\"params\":{\"x\":\"\xc3\x28\"}}"),
		[]byte(`{"id":1` + strings.Repeat("0", 1<<20) + `,"result":{}}`),
		[]byte(`{"method":"A.b","sessionId":"` + strings.Repeat("S", 1<<20) + `"}`),
	} {
		f.raw(bad)
	}
	f.send(map[string]any{"method": "Good.event"})
	if e := recv(t, a); e["method"] != "Good.event" {
		t.Errorf("after garbage the client got %v", e)
	}
	t.Logf("≈ 14 MiB of hostile JSON dropped in %v", time.Since(start).Round(time.Millisecond))
	if m.Err() != nil {
		t.Errorf("the mux ended: %v", m.Err())
	}
	a.Close()
}

// TestAttackForgedReplies: replies the browser makes up — to ids never sent, to another
// client's call, naming another client's session — never reach a client that did not make
// the call, and a reply never names a session the client did not use.
func TestAttackForgedReplies(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{})
	a, b := newC(t, m, "a"), newC(t, m, "b")
	// a owns PAGE-A.
	send(t, a, `{"id":1,"method":"Target.attachToTarget","params":{"targetId":"T","flatten":true}}`)
	c := f.next1(t)
	f.send(map[string]any{"id": c["id"], "sessionId": "BROWSER-1", "result": map[string]any{"sessionId": "PAGE-A"}})
	recv(t, a)
	// Ids nobody sent, at both ends of the range.
	for _, id := range []int{0, 1 << 30, 1<<31 - 1, 424242} {
		f.send(map[string]any{"id": id, "result": map[string]any{"forged": true}})
	}
	noRecv(t, a)
	noRecv(t, b)
	// b's call answered with a's session id: b gets the reply, without a's session.
	send(t, b, `{"id":5,"method":"Runtime.evaluate","params":{"expression":"1"}}`)
	cb := f.next1(t)
	f.send(map[string]any{"id": cb["id"], "sessionId": "PAGE-A", "result": map[string]any{}})
	if r := recv(t, b); r["id"] != 5.0 || r["sessionId"] != nil {
		t.Errorf("b's reply = %v, want id 5 and no session (b called its browser session)", r)
	}
	noRecv(t, a)
	// A second reply to the same id (replayed) is dropped.
	f.send(map[string]any{"id": cb["id"], "result": map[string]any{"again": true}})
	noRecv(t, b)
	// A forged attach reply naming a's session does not give it to b.
	send(t, b, `{"id":6,"method":"Target.attachToTarget","params":{"targetId":"T","flatten":true}}`)
	cb = f.next1(t)
	f.send(map[string]any{"id": cb["id"], "result": map[string]any{"sessionId": "PAGE-A"}})
	recv(t, b)
	send(t, b, `{"id":7,"method":"Runtime.evaluate","sessionId":"PAGE-A"}`)
	if r := recv(t, b); r["error"] == nil || !strings.Contains(fmt.Sprint(r["error"]), "Session with given id not found") {
		t.Errorf("b on a's session after a forged attach reply: %v, want 'Session with given id not found'", r)
	}
	// Events of a's session are a's only, even when a forged detach on b's session names it.
	f.send(map[string]any{"method": "Target.detachedFromTarget", "sessionId": "BROWSER-2", "params": map[string]any{"sessionId": "PAGE-A"}})
	recv(t, b)
	f.send(map[string]any{"method": "Page.loadEventFired", "sessionId": "PAGE-A", "params": map[string]any{}})
	if e := recv(t, a); e["sessionId"] != "PAGE-A" {
		t.Errorf("a's page event after a detach forged on b's session: %v, want it still routed to a", e)
	}
	noRecv(t, b)
	a.Close()
	b.Close()
}

// TestAttackSessionFlood: a flood of Target.attachedToTarget events (distinct ids, and ids
// of a megabyte) leaves at most MaxSessions short session ids tracked per client.
func TestAttackSessionFlood(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{MaxSessions: 64})
	a := newC(t, m, "a")
	for i := range 2000 {
		sid := fmt.Sprintf("S%d", i)
		if i%100 == 0 {
			sid = strings.Repeat("L", 1<<20) + sid
		}
		f.send(map[string]any{"method": "Target.attachedToTarget", "sessionId": "BROWSER-1", "params": map[string]any{"sessionId": sid}})
	}
	f.send(map[string]any{"method": "Good.event"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		b, err := a.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "Good.event") {
			break
		}
	}
	m.mu.Lock()
	n, own := len(m.sessions), len(a.sessions)
	long := 0
	for sid := range m.sessions {
		if len(sid) > MaxSessionID {
			long++
		}
	}
	m.mu.Unlock()
	if own > 64 || n > 65 || long > 0 {
		t.Errorf("after 2000 attached sessions: %d tracked for the client, %d in the mux, %d over %d bytes; want ≤ 64, ≤ 65, 0", own, n, long, MaxSessionID)
	}
	a.Close()
}

// TestAttackFloodAllClients: the browser floods every client's session while the clients do
// not read: the clients' queues together stay within MuxQueueBytes (the longest is closed as
// slow), and another mux (another agent's browser) answers meanwhile.
func TestAttackFloodAllClients(t *testing.T) {
	checkGoroutines(t)
	const total = 4 << 20
	m, f := newFake(t, Config{QueueBytes: 2 << 20, QueueMessages: 1 << 20, MuxQueueBytes: total})
	var cs []*Client
	for i := range 8 {
		cs = append(cs, newC(t, m, fmt.Sprintf("c%d", i)))
	}
	other, of := newFake(t, Config{})
	oc := newC(t, other, "other")

	ev := func(sid string) []byte {
		return []byte(`{"method":"Flood.event","sessionId":"` + sid + `","params":{"x":"` + strings.Repeat("F", 64<<10) + `"}}`)
	}
	maxQueued := int64(0)
	for round := range 100 {
		for i := range cs {
			f.raw(ev(fmt.Sprintf("BROWSER-%d", i+1)))
		}
		if q := m.queued.Load(); q > maxQueued {
			maxQueued = q
		}
		if round == 50 { // the other agent's browser is unaffected
			send(t, oc, `{"id":1,"method":"Browser.getVersion"}`)
			c := of.next1(t)
			of.send(map[string]any{"id": c["id"], "sessionId": "BROWSER-1", "result": map[string]any{"ok": true}})
			if r := recv(t, oc); r["id"] != 1.0 {
				t.Errorf("another mux during the flood: %v", r)
			}
		}
	}
	slow := 0
	for _, c := range cs {
		if errors.Is(c.Err(), ErrSlowClient) {
			slow++
		}
	}
	t.Logf("peak queued %d KiB of %d KiB; %d of %d clients closed as slow", maxQueued>>10, total>>10, slow, len(cs))
	if maxQueued > total+(80<<10) {
		t.Errorf("the clients' queues held %d bytes together, want ≤ %d", maxQueued, total)
	}
	if slow == 0 {
		t.Error("no client was closed as slow")
	}
	if m.Err() != nil {
		t.Errorf("the mux ended: %v", m.Err())
	}
	for _, c := range cs {
		c.Close()
	}
	if q := m.queued.Load(); q != 0 {
		t.Errorf("after every client closed, %d bytes are counted as queued", q)
	}
	oc.Close()
}

// stuckBrowser answers Target.attachToBrowserTarget, then never reads again (a browser that
// stops reading its pipe).
func stuckBrowser(t *testing.T, cfg Config) (*Mux, net.Conn) {
	a, b := net.Pipe()
	go func() { // owner: the test; ends when the pipe closes
		br := bufio.NewReader(b)
		raw, err := ReadMessage(br, 1<<20)
		if err != nil {
			return
		}
		var x struct{ ID int }
		json.Unmarshal(raw, &x)
		WriteMessage(b, []byte(fmt.Sprintf(`{"id":%d,"result":{"sessionId":"ROOT"}}`, x.ID)))
	}()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m := New(a, cfg)
	t.Cleanup(func() { m.Close(); b.Close() })
	return m, b
}

// TestAttackBrowserStopsReading: while the browser reads nothing, clients sending large calls
// wait (until their context ends) instead of piling calls up in the gateway.
func TestAttackBrowserStopsReading(t *testing.T) {
	checkGoroutines(t)
	const out = 2 << 20
	m, _ := stuckBrowser(t, Config{OutBytes: out})
	c, err := m.NewClient(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	big := `{"id":%d,"method":"Runtime.evaluate","params":{"expression":"` + strings.Repeat("x", 512<<10) + `"}}`
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	sent := 0
	var serr error
	for i := range 100 {
		if serr = c.Send(ctx, []byte(fmt.Sprintf(big, i))); serr != nil {
			break
		}
		sent++
	}
	m.outMu.Lock()
	held := m.outBytes
	m.outMu.Unlock()
	t.Logf("%d calls of 512 KiB taken before the sender had to wait (%v); %d KiB held", sent, serr, held>>10)
	if !errors.Is(serr, context.DeadlineExceeded) {
		t.Errorf("the 101st large call to a browser that reads nothing: %v, want the sender to wait until its deadline", serr)
	}
	if held > out+(520<<10) {
		t.Errorf("calls held for the browser: %d bytes, want ≤ %d", held, out)
	}
	c.Close()
}

// TestAttackRefusedMethods: methods that would end the shared browser, open a TCP port or
// hand CDP to web content are answered with a CDP error naming why and never sent.
func TestAttackRefusedMethods(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{})
	a := newC(t, m, "a")
	for i, x := range []struct{ method, why string }{
		{"Browser.crash", "shared"},
		{"Browser.crashGpuProcess", "shared"},
		{"Tethering.bind", "TCP port"},
		{"Tethering.unbind", "TCP port"},
		{"Target.exposeDevToolsProtocol", "web content"},
	} {
		send(t, a, fmt.Sprintf(`{"id":%d,"method":%q,"params":{"port":9222,"targetId":"T"}}`, i+1, x.method))
		r := recv(t, a)
		if r["id"] != float64(i+1) || !strings.Contains(fmt.Sprint(r["error"]), x.why) || !strings.Contains(fmt.Sprint(r["error"]), "not allowed") {
			t.Errorf("%s: %v, want a CDP error naming %q", x.method, r, x.why)
		}
	}
	send(t, a, `{"id":99,"method":"Browser.getVersion"}`)
	if c := f.next1(t); c["method"] != "Browser.getVersion" {
		t.Errorf("a refused method reached the browser: %v", c)
	}
	a.Close()
}

// TestAttackConcurrentNewClients: clients opened at the same moment stay within MaxClients.
func TestAttackConcurrentNewClients(t *testing.T) {
	checkGoroutines(t)
	m, _ := newFake(t, Config{MaxClients: 4})
	var mu sync.Mutex
	var open []*Client
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := m.NewClient(context.Background(), fmt.Sprintf("c%d", i), nil)
			if err != nil {
				if !errors.Is(err, ErrTooManyClients) {
					t.Errorf("NewClient: %v", err)
				}
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(open) != 4 || m.Clients() != 4 {
		t.Errorf("40 clients at once on a browser of at most 4: %d opened, %d open", len(open), m.Clients())
	}
	for _, c := range open {
		c.Close()
	}
}

// TestAttackRootDetach: a root-level Target.detachedFromTarget naming a client's browser
// session is not shown to the other clients (it would name that session) and ends that
// client with ErrDetached; the others go on.
func TestAttackRootDetach(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{})
	a, b := newC(t, m, "a"), newC(t, m, "b")
	f.send(map[string]any{"method": "Target.detachedFromTarget", "params": map[string]any{"sessionId": "BROWSER-2"}})
	f.send(map[string]any{"method": "Target.attachedToTarget", "params": map[string]any{"sessionId": "BROWSER-9"}})
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("b's browser session was detached and b goes on")
	}
	if !errors.Is(b.Err(), ErrDetached) {
		t.Errorf("b ended with %v, want ErrDetached", b.Err())
	}
	noRecv(t, a)
	send(t, a, `{"id":1,"method":"Browser.getVersion"}`)
	c := f.next1(t)
	for c["method"] == "Target.detachFromTarget" { // b's close
		c = f.next1(t)
	}
	f.send(map[string]any{"id": c["id"], "sessionId": "BROWSER-1", "result": map[string]any{}})
	if r := recv(t, a); r["id"] != 1.0 {
		t.Errorf("a after b was detached: %v", r)
	}
	a.Close()
}

// TestAttackInnerMessage: a call carried in Target.sendMessageToTarget (a session attached
// with flatten: false) is held to the same rules: refused methods and the client's filter.
func TestAttackInnerMessage(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{})
	c, err := m.NewClient(context.Background(), "auto", func(method string, _ json.RawMessage) error {
		if strings.HasPrefix(method, "Input.") {
			return errors.New("alice holds control")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range []struct{ inner, want string }{
		{`{"id":1,"method":"Input.dispatchMouseEvent","params":{"type":"mousePressed","x":1,"y":1}}`, "alice holds control"},
		{`{"id":2,"method":"Browser.crash"}`, "not allowed"},
		{`{"id":3,"method":"Tethering.bind","params":{"port":9222}}`, "TCP port"},
	} {
		b, _ := json.Marshal(map[string]any{"id": i + 1, "method": "Target.sendMessageToTarget",
			"params": map[string]any{"sessionId": "OLD", "message": x.inner}})
		send(t, c, string(b))
		if r := recv(t, c); !strings.Contains(fmt.Sprint(r["error"]), x.want) {
			t.Errorf("sendMessageToTarget carrying %s: %v, want an error naming %q", x.inner, r, x.want)
		}
	}
	send(t, c, `{"id":9,"method":"Target.sendMessageToTarget","params":{"sessionId":"OLD","message":"{\"id\":1,\"method\":\"Runtime.evaluate\"}"}}`)
	if call := f.next1(t); call["method"] != "Target.sendMessageToTarget" {
		t.Errorf("an allowed inner call: the browser got %v", call)
	}
	c.Close()
}

// TestAttackForgedExitNotice: the exit notice's text (which the agent can write) reaches the
// clients' errors bounded, on one line and as valid UTF-8.
func TestAttackForgedExitNotice(t *testing.T) {
	checkGoroutines(t)
	m, f := newFake(t, Config{ExitMethod: "Porthole.browserExited"})
	a := newC(t, m, "a")
	f.send(map[string]any{"method": "Porthole.browserExited", "params": map[string]any{
		"message": "line one\nline two\x1b[31m" + strings.Repeat("é", 2000)}})
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the exit notice did not end the client")
	}
	msg := a.Err().Error()
	if len(msg) > 1100 || strings.ContainsAny(msg, "\n\x1b") || !utf8.ValidString(msg) {
		t.Errorf("the client's error from a forged exit notice: %d bytes, %.80q", len(msg), msg)
	}
}
