package surface

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

// echoConn serves one ViewerConn that writes back every binary message it reads (through
// Flush, as a surface does) and reports how Serve ended.
type echoConn struct {
	mu     sync.Mutex
	owed   [][]byte
	texts  int
	closed bool // Close ran
	result chan error
}

func serveEcho(t *testing.T, readLimit int64, reuse bool) (*echoConn, *websocket.Conn, context.CancelCauseFunc) {
	t.Helper()
	e := &echoConn{result: make(chan error, 1)}
	var cancelServe context.CancelCauseFunc
	ready := make(chan struct{})
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ctx, cancel := context.WithCancelCause(context.Background())
		cancelServe = cancel
		close(ready)
		c := NewViewerConn(ws)
		e.result <- c.Serve(ctx, cancel, ViewerLoop{
			ReadLimit: readLimit, ReuseBuffer: reuse,
			Flush: func(context.Context) (bool, error) {
				e.mu.Lock()
				owed := e.owed
				e.owed = nil
				e.mu.Unlock()
				for _, b := range owed {
					if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
						return false, err
					}
				}
				return len(owed) > 0, nil
			},
			Close: func(ctx context.Context) {
				e.mu.Lock()
				e.closed = true
				e.mu.Unlock()
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "bye"), time.Now().Add(time.Second))
			},
			Frame: func(data []byte) {
				e.mu.Lock()
				e.owed = append(e.owed, append([]byte(nil), data...)) // data is only valid during the call
				e.mu.Unlock()
				c.Wake()
			},
			Text: func() {
				e.mu.Lock()
				e.texts++
				e.mu.Unlock()
			},
		})
	}))
	t.Cleanup(srv.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	<-ready
	return e, ws, cancelServe
}

func TestViewerConn(t *testing.T) {
	noLeaks(t)
	for _, reuse := range []bool{false, true} {
		e, ws, _ := serveEcho(t, 1<<10, reuse)
		// Messages come back in order, each intact although the reader reuses its buffer.
		for _, m := range []string{"one", strings.Repeat("x", 700), "two"} {
			if err := ws.WriteMessage(websocket.BinaryMessage, []byte(m)); err != nil {
				t.Fatal(err)
			}
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, got, err := ws.ReadMessage()
			if err != nil || string(got) != m {
				t.Fatalf("reuse=%v: echo of %d bytes = %d bytes, %v; want the same message", reuse, len(m), len(got), err)
			}
		}
		// A ping is answered by the writer.
		pong := make(chan string, 1)
		ws.SetPongHandler(func(d string) error { pong <- d; return nil })
		ws.WriteControl(websocket.PingMessage, []byte("p1"), time.Now().Add(time.Second))
		ws.WriteMessage(websocket.TextMessage, []byte("hello")) // and a text message is the surface's to answer
		ws.WriteMessage(websocket.BinaryMessage, []byte("sync"))
		if _, got, err := ws.ReadMessage(); err != nil || string(got) != "sync" {
			t.Fatalf("reuse=%v: after ping and text: %q, %v", reuse, got, err)
		}
		select {
		case d := <-pong:
			if d != "p1" {
				t.Errorf("pong = %q, want p1", d)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("reuse=%v: no pong for a ping", reuse)
		}
		e.mu.Lock()
		if e.texts != 1 {
			t.Errorf("reuse=%v: Text called %d times, want 1", reuse, e.texts)
		}
		e.mu.Unlock()
		// The viewer closing normally is a nil result.
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		if err := <-e.result; err != nil {
			t.Errorf("reuse=%v: Serve after a normal close = %v, want nil", reuse, err)
		}
	}
}

func TestViewerConnEnds(t *testing.T) {
	noLeaks(t)
	errGone := errors.New("server going")

	// The server ending the connection: Close writes the last frame, Serve returns the cause.
	e, ws, cancel := serveEcho(t, 1<<10, true)
	cancel(errGone)
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("viewer read after the server ended = %v, want close 1001", err)
	}
	if err := <-e.result; !errors.Is(err, errGone) {
		t.Errorf("Serve = %v, want the cause %v", err, errGone)
	}
	e.mu.Lock()
	if !e.closed {
		t.Error("Close did not run")
	}
	e.mu.Unlock()

	// A message over the read limit ends the connection with an error, not a crash.
	e, ws, _ = serveEcho(t, 64, false)
	ws.WriteMessage(websocket.BinaryMessage, make([]byte, 65))
	if err := <-e.result; err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Errorf("Serve after a message over the limit = %v, want a read limit error", err)
	}
}

// noLeaks checks, after the test's other cleanups (its servers), that its goroutines ended.
func noLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}
