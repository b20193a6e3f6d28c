package surface

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The timings every surface's viewer WebSocket keeps.
const (
	PingEvery    = 20 * time.Second // the writer pings an idle viewer this often
	ReadTimeout  = 60 * time.Second // a viewer silent this long (no message, no pong) is gone
	WriteTimeout = 30 * time.Second // a write stuck this long ends the connection
	maxPongs     = 16               // pongs owed at once; a viewer pinging faster loses some
)

// ViewerConn is the plumbing every surface's viewer WebSocket shares: the read loop (limit,
// deadlines, pings answered), the one writer goroutine (pings, owed pongs, waking on news),
// and how the connection's end is reported. The surface says what to write and what a
// message means (ViewerLoop).
type ViewerConn struct {
	ws   *websocket.Conn
	wake chan struct{} // cap 1: "something to write"

	pmu   sync.Mutex
	pongs [][]byte
}

// ViewerLoop is a surface's part of a ViewerConn.
type ViewerLoop struct {
	// ReadLimit bounds one message from the viewer (gorilla closes the connection past it).
	ReadLimit int64
	// ReuseBuffer hands Frame every message in one reused buffer (its data is valid only
	// during the call); otherwise each message has its own.
	ReuseBuffer bool
	// Flush writes what the viewer is owed now; it runs on the writer goroutine only, which
	// calls it again while it wrote something and otherwise waits for Wake. An error ends
	// the connection.
	Flush func(ctx context.Context) (wrote bool, err error)
	// Close writes the last frames and the close frame (best effort) once the connection's
	// context ended, on the writer goroutine.
	Close func(ctx context.Context)
	// Frame handles one binary message, on the reader goroutine.
	Frame func(data []byte)
	// Text handles a text message, which no surface's protocol has: it tells the viewer so.
	Text func()
}

// NewViewerConn wraps an upgraded WebSocket; Serve runs it.
func NewViewerConn(ws *websocket.Conn) *ViewerConn {
	return &ViewerConn{ws: ws, wake: make(chan struct{}, 1)}
}

// Wake tells the writer that Flush has something to write. It never blocks.
func (c *ViewerConn) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Serve runs the connection until the viewer leaves, a write fails or ctx ends, and cancels
// ctx (through cancel, with the cause) on the way out. The reader runs on the caller's
// goroutine; the writer on one Serve starts and waits for, so Serve's return means neither
// touches ws any more. It returns nil when the viewer closed normally, otherwise the cause.
func (c *ViewerConn) Serve(ctx context.Context, cancel context.CancelCauseFunc, l ViewerLoop) error {
	writerDone := make(chan struct{})
	go func() { // owner: Serve, which waits for it; exits when ctx ends or a write fails
		defer close(writerDone)
		if err := c.writeLoop(ctx, l); err != nil {
			cancel(err)
		}
	}()
	stopRead := context.AfterFunc(ctx, func() { c.ws.SetReadDeadline(time.Now()) })
	defer stopRead()

	ws := c.ws
	ws.SetReadLimit(l.ReadLimit)
	ws.SetReadDeadline(time.Now().Add(ReadTimeout))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(ReadTimeout)) })
	ws.SetPingHandler(func(data string) error {
		c.queuePong([]byte(data))
		return ws.SetReadDeadline(time.Now().Add(ReadTimeout))
	})
	var readErr error
	var data []byte
	deadlineAt := time.Now()
	for {
		typ, r, err := ws.NextReader()
		if err == nil {
			if !l.ReuseBuffer || data == nil {
				data = make([]byte, 0, 512)
			}
			data, err = readInto(r, data[:0])
		}
		if err != nil {
			readErr = err
			break
		}
		if now := time.Now(); now.Sub(deadlineAt) >= time.Second { // an idle timeout: no need to move it per message
			ws.SetReadDeadline(now.Add(ReadTimeout))
			deadlineAt = now
		}
		if typ != websocket.BinaryMessage {
			l.Text()
			continue
		}
		l.Frame(data)
		if cap(data) > 64<<10 {
			data = nil // a large message's buffer goes back to the GC
		}
	}
	if ctx.Err() == nil {
		cancel(readErr)
	}
	<-writerDone
	if websocket.IsCloseError(readErr, websocket.CloseNormalClosure, websocket.CloseGoingAway) && context.Cause(ctx) == readErr {
		return nil
	}
	return context.Cause(ctx)
}

// writeLoop is the WebSocket's only writer.
func (c *ViewerConn) writeLoop(ctx context.Context, l ViewerLoop) error {
	ping := time.NewTicker(PingEvery)
	defer ping.Stop()
	for {
		if ctx.Err() != nil {
			l.Close(ctx)
			return nil
		}
		c.pmu.Lock()
		pongs := c.pongs
		c.pongs = nil
		c.pmu.Unlock()
		for _, p := range pongs {
			if err := c.ws.WriteControl(websocket.PongMessage, p, time.Now().Add(WriteTimeout)); err != nil {
				return fmt.Errorf("write pong: %w", err)
			}
		}
		wrote, err := l.Flush(ctx)
		if err != nil {
			return err
		}
		if wrote {
			continue
		}
		select {
		case <-c.wake:
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(WriteTimeout)); err != nil {
				return fmt.Errorf("write ping: %w", err)
			}
		case <-ctx.Done():
		}
	}
}

func (c *ViewerConn) queuePong(data []byte) {
	c.pmu.Lock()
	if len(c.pongs) < maxPongs {
		c.pongs = append(c.pongs, data)
	}
	c.pmu.Unlock()
	c.Wake()
}

// readInto appends what r holds (one WebSocket message, bounded by the read limit) to b.
func readInto(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
