//go:build !js

package browser

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// pipeClient is a cdpClient over a Chromium started with --remote-debugging-pipe (fd 3:
// commands in, fd 4: replies and events out, NUL-delimited JSON): a valid single-client
// cdpClient, for testing the view without the gateway's multiplexer.
type pipeClient struct {
	wmu  sync.Mutex
	w    io.WriteCloser
	msgs chan []byte
	done chan struct{}
	err  error
	once sync.Once
	cmd  *exec.Cmd
}

var _ cdpClient = (*pipeClient)(nil)

func testChromiumPath(t testing.TB) string {
	return testenv.LookPath(t, "chromium") // fails under CI=true, skips elsewhere
}

// startPipeChromium starts a headless Chromium on its own profile and returns its pipe.
func startPipeChromium(t testing.TB) *pipeClient {
	t.Helper()
	bin := testChromiumPath(t)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--no-default-browser-check", "--user-data-dir="+t.TempDir(),
		"--window-size=1024,768", "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	inR.Close()
	outW.Close()
	c := &pipeClient{w: inW, msgs: make(chan []byte, 64), done: make(chan struct{}), cmd: cmd}
	go func() { // owner: the test (Close ends it through the process's exit)
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			b, err := r.ReadBytes(0)
			if err != nil {
				c.fail(err)
				return
			}
			select {
			case c.msgs <- b[:len(b)-1]:
			case <-c.done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
		outR.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", lastLines(stderr.String(), 20))
		}
	})
	return c
}

func lastLines(s string, n int) string {
	ls := strings.Split(s, "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

func (c *pipeClient) fail(err error) {
	c.once.Do(func() { c.err = err; close(c.done) })
}

func (c *pipeClient) Send(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.err
	default:
	}
	_, err := c.w.Write(append(msg, 0))
	return err
}

func (c *pipeClient) Recv(ctx context.Context) ([]byte, error) {
	select {
	case b := <-c.msgs:
		return b, nil
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (c *pipeClient) Close() error {
	c.fail(errors.New("closed"))
	c.w.Close()
	return nil
}

// newTestService is a Service whose live view uses client instead of the multiplexer.
func newTestService(t testing.TB, client func() cdpClient) *Service {
	s := NewService(Config{Logger: testLogger(t)}, nil)
	s.viewClient = func(ctx context.Context, agent api.Agent) (cdpClient, error) { return client(), nil }
	t.Cleanup(s.Close)
	return s
}

// viewServer serves the live view of agent "a1" (owner "owner") on a test HTTP server; the
// query says who connects: ?id=&name=&mode=watch|drive&conn=.
func viewServer(t testing.TB, s *Service) string {
	return viewServerFor(t, s, api.Agent{ID: "a1", OwnerID: "owner"})
}

// viewServerFor serves the live view of agent.
func viewServerFor(t testing.TB, s *Service, agent api.Agent) string {
	up := websocket.Upgrader{}
	var conn uint64
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		mode := api.LevelWatch
		if r.URL.Query().Get("mode") == "drive" {
			mode = api.LevelDrive
		}
		mu.Lock()
		conn++
		c := conn
		mu.Unlock()
		v := Viewer{ID: r.URL.Query().Get("id"), Name: r.URL.Query().Get("name"), Mode: mode, Conn: c}
		s.Serve(r.Context(), ws, agent, v)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// testViewer is a viewer's client: it reads messages on its own goroutine and keeps the
// latest of each kind, and every error.
type testViewer struct {
	t   testing.TB
	ws  *websocket.Conn
	wmu sync.Mutex // the client's one writer at a time

	mu     sync.Mutex
	cond   *sync.Cond
	frames []Frame
	last   map[Op]Message
	errs   []ErrorMsg
	closed error
	noAck  bool
}

func dialViewer(t testing.TB, base, id, mode string, noAck bool) *testViewer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(base+"?id="+id+"&name="+id+"&mode="+mode, nil)
	if err != nil {
		t.Fatalf("dial the view: %v", err)
	}
	v := &testViewer{t: t, ws: ws, last: map[Op]Message{}, noAck: noAck}
	v.cond = sync.NewCond(&v.mu)
	done := make(chan struct{})
	go func() { // owner: the test; ends when the connection closes (cleanup)
		defer close(done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				v.mu.Lock()
				v.closed = err
				v.cond.Broadcast()
				v.mu.Unlock()
				return
			}
			m, err := Decode(b)
			if err != nil {
				t.Errorf("viewer %s: %v", id, err)
				continue
			}
			v.mu.Lock()
			v.last[m.Op()] = m
			switch m := m.(type) {
			case Frame:
				m.Data = bytes.Clone(m.Data)
				v.frames = append(v.frames, m)
				v.last[OpFrame] = m
			case ErrorMsg:
				v.errs = append(v.errs, m)
			}
			ack := !v.noAck
			v.cond.Broadcast()
			v.mu.Unlock()
			if f, ok := m.(Frame); ok && ack {
				v.send(Ack{Seq: f.Seq})
			}
		}
	}()
	t.Cleanup(func() { ws.Close(); <-done })
	return v
}

func (v *testViewer) send(m Message) {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	if err := v.ws.WriteMessage(websocket.BinaryMessage, Encode(m)); err != nil {
		v.t.Logf("viewer send %T: %v", m, err)
	}
}

// waitBrowserGone waits until the viewer was told the browser is unavailable (ErrCodeBrowser)
// and its connection closed 1013 (try again later).
func (v *testViewer) waitBrowserGone(d time.Duration) {
	v.t.Helper()
	v.wait(d, "the viewer told the browser is unavailable", func() bool {
		for _, e := range v.errs {
			if e.Code == ErrCodeBrowser {
				return true
			}
		}
		return false
	})
	v.mu.Lock()
	for v.closed == nil {
		v.cond.Wait()
	}
	closed := v.closed
	v.mu.Unlock()
	if !websocket.IsCloseError(closed, websocket.CloseTryAgainLater) {
		v.t.Errorf("the viewer's connection ended with %v, want close 1013 (try again later)", closed)
	}
}

// firstErr is the first error the viewer got (the reader appends to errs under mu).
func (v *testViewer) firstErr() ErrorMsg {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errs) == 0 {
		return ErrorMsg{}
	}
	return v.errs[0]
}

// wait waits until cond (called with mu held) holds, or fails the test after d.
func (v *testViewer) wait(d time.Duration, what string, cond func() bool) {
	v.t.Helper()
	timer := time.AfterFunc(d, func() { v.mu.Lock(); v.cond.Broadcast(); v.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(d)
	v.mu.Lock()
	defer v.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) || v.closed != nil {
			v.t.Fatalf("waiting for %s: timed out (closed: %v; errors: %v)", what, v.closed, v.errs)
		}
		v.cond.Wait()
	}
}

// testLogger logs to the test at debug level when BROWSER_TEST_LOG=1.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("BROWSER_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
