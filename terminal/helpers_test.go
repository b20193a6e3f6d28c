//go:build !js

package terminal

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/yamux"
	"github.com/porthole/porthole/api"
)

// testLogger logs warnings and errors of the code under test to the test log.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("TERMINAL_TEST_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// inProcessHelper runs the helper side in this process over a yamux session on a
// net.Pipe, like the real helper behind bridges: real PTYs and shells, no jail.
// Kill ends the session as a dying helper would.
type inProcessHelper struct {
	gw, hs *yamux.Session
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func newInProcessHelper(t testing.TB) *inProcessHelper {
	a, b := socketPair(t)
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = nil
	cfg.Logger = nil
	cfg.LogOutput = &bytes.Buffer{}
	gw, err := yamux.Client(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := yamux.DefaultConfig()
	cfg2.LogOutput = &bytes.Buffer{}
	hs, err := yamux.Server(b, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &inProcessHelper{gw: gw, hs: hs, cancel: cancel}
	h.wg.Add(1)
	go func() { // accept loop: one ServeHelperStream per stream
		defer h.wg.Done()
		for {
			st, err := hs.AcceptStream()
			if err != nil {
				return
			}
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				ServeHelperStream(ctx, st)
			}()
		}
	}()
	t.Cleanup(h.Kill)
	return h
}

func (h *inProcessHelper) Open(ctx context.Context, agent api.Agent) (net.Conn, error) {
	return h.gw.OpenStream()
}

// Kill ends the helper: its shells are hung up and its streams closed.
func (h *inProcessHelper) Kill() {
	h.cancel()
	h.hs.Close()
	h.gw.Close()
	h.wg.Wait()
}

// testServer is an httptest server whose handler upgrades with gorilla and calls Service.Serve.
// Query parameters: agent (id), user, mode (watch|drive).
type testServer struct {
	*httptest.Server
	svc *Service
}

func newTestServer(t testing.TB, cfg Config, open OpenFunc) *testServer {
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	svc := NewService(cfg, open)
	up := websocket.Upgrader{}
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer ws.Close()
		q := r.URL.Query()
		agent := api.Agent{ID: q.Get("agent")}
		v := Viewer{ID: "u-" + q.Get("user"), Name: q.Get("user"), Mode: api.Level(q.Get("mode")), Admin: q.Get("admin") == "1"}
		svc.Serve(r.Context(), ws, agent, v)
	}))
	t.Cleanup(func() {
		svc.Close()
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
	})
	return &testServer{Server: srv, svc: svc}
}

// client is a test WebSocket client that records everything it receives and checks
// that output sequence numbers are contiguous (or explained by a Gap).
type client struct {
	t  testing.TB
	ws *websocket.Conn

	wmu sync.Mutex

	mu      sync.Mutex
	cond    sync.Cond
	out     map[uint32]*bytes.Buffer
	next    map[uint32]uint64
	msgs    []Message
	err     error
	noAck   bool
	readErr error
	done    chan struct{}
	started bool
	// midRune counts Output frames that ended inside a UTF-8 character.
	midRune int
	// keepTail, when set, bounds each terminal's retained output to about this many
	// bytes (older bytes are counted in base), so that a flood does not fill the test's heap.
	keepTail int
	base     map[uint32]int
}

func dial(t testing.TB, srv *testServer, agent, user, mode string) *client {
	t.Helper()
	c := dialNoRead(t, srv, agent, user, mode)
	c.start()
	return c
}

// dialNoRead connects but does not read until start is called.
func dialNoRead(t testing.TB, srv *testServer, agent, user, mode string) *client {
	t.Helper()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + fmt.Sprintf("/?agent=%s&user=%s&mode=%s", agent, user, mode)
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	c := &client{t: t, ws: ws, out: map[uint32]*bytes.Buffer{}, next: map[uint32]uint64{}, base: map[uint32]int{}, done: make(chan struct{})}
	c.cond.L = &c.mu
	t.Cleanup(func() {
		ws.Close()
		if !c.started {
			return
		}
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Errorf("client reader did not exit")
		}
	})
	return c
}

func (c *client) start() {
	c.started = true
	go func() { // owner: the test; exits when the connection closes (cleanup)
		defer close(c.done)
		for {
			_, data, err := c.ws.ReadMessage()
			if err != nil {
				c.mu.Lock()
				c.readErr = err
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			m, err := Decode(data)
			c.mu.Lock()
			if err != nil {
				c.err = fmt.Errorf("decode server frame: %w", err)
			}
			switch m := m.(type) {
			case Output:
				if m.Seq != c.next[m.ID] && c.err == nil {
					c.err = fmt.Errorf("terminal %d: output at seq %d, want %d", m.ID, m.Seq, c.next[m.ID])
				}
				b := c.out[m.ID]
				if b == nil {
					b = &bytes.Buffer{}
					c.out[m.ID] = b
				}
				b.Write(m.Data)
				if d := m.Data; len(d) > 0 {
					i := len(d) - 1
					for i > 0 && i > len(d)-4 && !utf8.RuneStart(d[i]) {
						i--
					}
					if !utf8.FullRune(d[i:]) {
						c.midRune++
					}
				}
				if c.keepTail > 0 && b.Len() > 2*c.keepTail {
					drop := b.Len() - c.keepTail
					c.base[m.ID] += drop
					b.Next(drop)
					nb := bytes.NewBuffer(append([]byte(nil), b.Bytes()...))
					c.out[m.ID] = nb
				}
				c.next[m.ID] = m.Seq + uint64(len(m.Data))
				if !c.noAck {
					c.mu.Unlock()
					c.send(Ack{ID: m.ID, N: uint32(len(m.Data))})
					c.mu.Lock()
				}
			case Gap:
				if m.From != c.next[m.ID] && c.err == nil {
					c.err = fmt.Errorf("terminal %d: gap from %d, want %d", m.ID, m.From, c.next[m.ID])
				}
				c.next[m.ID] = m.To
				c.msgs = append(c.msgs, m)
			case nil:
			default:
				c.msgs = append(c.msgs, m)
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}()
}

func (c *client) send(m Message) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, Encode(m)); err != nil {
		c.t.Logf("client send %T: %v", m, err)
	}
}

func (c *client) sendRaw(typ int, b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.WriteMessage(typ, b)
}

// wait waits until cond (called with c.mu held) is true, failing after timeout.
func (c *client) wait(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tm := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer tm.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if c.err != nil {
			c.t.Fatalf("waiting for %s: %v", what, c.err)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waiting for %s: timed out after %v; last output: %q; messages: %s", what, timeout, tail(c.allOutputLocked(), 600), c.msgSummaryLocked())
		}
		if c.readErr != nil {
			c.t.Fatalf("waiting for %s: connection ended: %v; messages: %s", what, c.readErr, c.msgSummaryLocked())
		}
		c.cond.Wait()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (c *client) allOutputLocked() string {
	var s strings.Builder
	for _, b := range c.out {
		s.Write(b.Bytes())
	}
	return s.String()
}

func (c *client) msgSummaryLocked() string {
	var s []string
	for _, m := range c.msgs[max(0, len(c.msgs)-12):] {
		s = append(s, fmt.Sprintf("%#v", m))
	}
	return strings.Join(s, "; ")
}

// output returns terminal id's output so far.
func (c *client) output(id uint32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.out[id]; b != nil {
		return b.String()
	}
	return ""
}

// outLen returns how many output bytes of id were received (including dropped ones).
func (c *client) outLen(id uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.out[id]; b != nil {
		return c.base[id] + b.Len()
	}
	return 0
}

// waitOutput waits until terminal id's output after offset from contains s.
func (c *client) waitOutput(id uint32, from int, s string, timeout time.Duration) {
	c.t.Helper()
	c.wait(fmt.Sprintf("output %q on terminal %d", s, id), timeout, func() bool {
		b := c.out[id]
		f := max(0, from-c.base[id])
		return b != nil && b.Len() >= f && bytes.Contains(b.Bytes()[f:], []byte(s))
	})
}

// waitMsg waits for a message matching f and returns it.
func waitMsg[T Message](c *client, what string, timeout time.Duration, f func(T) bool) T {
	c.t.Helper()
	var found T
	c.wait(what, timeout, func() bool {
		for _, m := range c.msgs {
			if v, ok := m.(T); ok && (f == nil || f(v)) {
				found = v
				return true
			}
		}
		return false
	})
	return found
}

// open opens a terminal and returns its id, after the shell printed its first output.
func (c *client) open(cols, rows uint16) uint32 {
	c.t.Helper()
	c.mu.Lock()
	tag := uint32(len(c.msgs) + 1000)
	c.mu.Unlock()
	c.mu.Lock()
	n := len(c.msgs)
	c.mu.Unlock()
	c.send(Open{Tag: tag, Cols: cols, Rows: rows})
	var id uint32
	c.wait("Opened", 30*time.Second, func() bool {
		for _, m := range c.msgs[n:] {
			switch m := m.(type) {
			case Opened:
				if m.Tag == tag {
					id = m.ID
					return true
				}
			case ErrorMsg:
				c.t.Fatalf("Open: %+v", m)
			}
		}
		return false
	})
	return id
}

// run types a command and waits for a marker it prints, returning the output after the command.
// The marker is split in the command line so that the echo of the input does not match.
func (c *client) run(id uint32, cmd string) string {
	c.t.Helper()
	marker := fmt.Sprintf("done-%d", time.Now().UnixNano())
	from := c.outLen(id)
	c.send(Input{ID: id, Data: []byte(cmd + "; echo " + marker[:4] + "''" + marker[4:] + "\r")})
	c.waitOutput(id, from, marker+"\r\n", 20*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out[id].String()[max(0, from-c.base[id]):]
}

// attachFrom attaches to id resuming at since, telling the contiguity check where output resumes.
func (c *client) attachFrom(id uint32, since uint64, cols, rows uint16) {
	c.mu.Lock()
	c.next[id] = since
	c.mu.Unlock()
	c.send(Attach{ID: id, Since: since, Cols: cols, Rows: rows})
}

// seq returns the sequence number after the last output byte received for id.
func (c *client) seq(id uint32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next[id]
}

// quiet waits until terminal id has printed nothing new for 200ms and returns its seq.
func (c *client) quiet(id uint32) uint64 {
	c.t.Helper()
	prev := c.seq(id)
	for i := 0; i < 100; i++ {
		time.Sleep(200 * time.Millisecond)
		s := c.seq(id)
		if s == prev {
			return s
		}
		prev = s
	}
	c.t.Fatalf("terminal %d never went quiet", id)
	return 0
}

// socketPair returns the two ends of a Unix socketpair (kernel-buffered like the helper's pipes).
func socketPair(t testing.TB) (net.Conn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}
