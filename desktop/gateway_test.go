//go:build !js

package desktop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/porthole/porthole/api"
)

func TestMain(m *testing.M) {
	if n, _ := strconv.Atoi(os.Getenv("DESKTOP_FANOUT_VIEWERS")); n > 0 {
		fanOutViewers(n, os.Getenv("DESKTOP_FANOUT_URL")) // BenchmarkFanOut's viewers
		return
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeHelper is the helper's end of one desktop stream, speaking the protocol.
type fakeHelper struct {
	conn net.Conn
	in   chan Message // frames from the gateway
	done chan struct{}
	wmu  sync.Mutex
}

func newFakeHelper(conn net.Conn) *fakeHelper {
	f := &fakeHelper{conn: conn, in: make(chan Message, 1<<14), done: make(chan struct{})}
	go func() { // owner: the test env; exits when the stream closes
		defer close(f.done)
		var buf []byte
		for {
			frame, err := ReadStreamFrame(conn, buf, MaxStreamFrame)
			if err != nil {
				return
			}
			m, err := Decode(frame)
			if err != nil {
				panic(fmt.Sprintf("gateway sent a bad frame: %v", err))
			}
			m = cloneMsg(m)
			select {
			case f.in <- m:
			default:
			}
		}
	}()
	return f
}

func cloneMsg(m Message) Message {
	m2, _ := Decode(Encode(m))
	return m2
}

func (f *fakeHelper) send(m Message) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return WriteStreamFrame(f.conn, m)
}

func (f *fakeHelper) sendRaw(b []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_, err := f.conn.Write(b)
	return err
}

// next returns the next frame from the gateway that is not Lag.
func (f *fakeHelper) next(t testing.TB) Message {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-f.in:
			if _, ok := m.(Lag); ok {
				continue
			}
			return m
		case <-timeout:
			t.Fatal("the helper got nothing from the gateway in 5s")
			return nil
		}
	}
}

// none asserts the gateway sends the helper nothing (but Lag) for d.
func (f *fakeHelper) none(t testing.TB, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m := <-f.in:
			if _, ok := m.(Lag); !ok {
				t.Fatalf("the helper got %T %+v, want nothing", m, m)
			}
		case <-timeout:
			return
		}
	}
}

// testEnv is a Service whose helper streams are fakeHelpers, behind a real HTTP server.
type testEnv struct {
	t        testing.TB
	svc      *Service
	srv      *httptest.Server
	agent    api.Agent
	helpers  chan *fakeHelper
	opens    atomic.Int32
	conns    atomic.Uint64
	audit    chan string
	failOpen atomic.Bool
}

func newEnv(t testing.TB, cfg Config) *testEnv {
	e := &testEnv{t: t, agent: api.Agent{ID: "a1", Name: "agent", OwnerID: "owner"},
		helpers: make(chan *fakeHelper, 16), audit: make(chan string, 1024)}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.OnCall = func(agent api.Agent, v Viewer, action, detail string) {
		select {
		case e.audit <- fmt.Sprintf("%s %s %s: %s", agent.ID, v.ID, action, detail):
		default:
		}
	}
	var fakes []*fakeHelper
	var fmu sync.Mutex
	e.svc = NewService(cfg, func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		e.opens.Add(1)
		if e.failOpen.Load() {
			return nil, errors.New("no helper for you")
		}
		g, h := net.Pipe()
		f := newFakeHelper(h)
		fmu.Lock()
		fakes = append(fakes, f)
		fmu.Unlock()
		e.helpers <- f
		return g, nil
	})
	up := websocket.Upgrader{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		v := Viewer{ID: q.Get("id"), Name: q.Get("id"), Mode: api.Level(q.Get("mode")),
			Admin: q.Get("admin") == "1", Token: q.Get("token"), Conn: e.conns.Add(1)}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		e.svc.Serve(r.Context(), ws, e.agent, v)
	}))
	t.Cleanup(func() {
		e.svc.Close()
		e.srv.Close()
		fmu.Lock()
		defer fmu.Unlock()
		for _, f := range fakes {
			f.conn.Close()
			<-f.done
		}
	})
	return e
}

// helper waits for the next helper stream the gateway opens.
func (e *testEnv) helper() *fakeHelper {
	e.t.Helper()
	select {
	case f := <-e.helpers:
		return f
	case <-time.After(5 * time.Second):
		e.t.Fatal("the gateway opened no helper stream in 5s")
		return nil
	}
}

// client is a viewer over a real WebSocket. Its reader goroutine draws what it gets.
type client struct {
	t       testing.TB
	ws      *websocket.Conn
	wmu     sync.Mutex
	ack     bool
	drop    bool // do not keep the Rect frames (a flood would fill the test's memory)
	noPix   bool // do not draw (benchmarks: the gateway's cost, not the viewer's)
	closing atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	st      viewState
	rects   map[string]bool // every Rect frame received, raw
}

type viewState struct {
	screen    Screen
	pix       []uint64 // per pixel: the id of the Rect that drew it
	frameEnds int
	lastSeq   uint32
	rects     [][]byte // Rect frames in order
	clips     [][]byte // ClipRects' data in order
	copies    int      // Copy frames
	bytes     int      // bytes of Rect, ClipRect and Copy frames
	control   Control
	viewers   []ViewerInfo
	errs      []ErrorMsg
	mode      Mode
	hello     Hello
	clipboard string
	cursor    CursorPos
	closed    error
}

func (e *testEnv) dial(id string, mode api.Level, extra string) *client {
	e.t.Helper()
	return e.dialOpts(id, mode, extra, true)
}

func (e *testEnv) dialOpts(id string, mode api.Level, extra string, ack bool) *client {
	e.t.Helper()
	u := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/?id=" + id + "&mode=" + string(mode) + extra
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	c := &client{t: e.t, ws: ws, ack: ack, done: make(chan struct{})}
	go c.read() // owner: the test (Cleanup closes ws and waits)
	e.t.Cleanup(c.close)
	return c
}

// dialRaw connects a viewer that never reads.
func (e *testEnv) dialRaw(id string) *websocket.Conn {
	u := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/?id=" + id + "&mode=drive"
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { ws.Close() })
	return ws
}

func (c *client) close() {
	c.closing.Store(true)
	c.ws.Close()
	<-c.done
}

func (c *client) send(m Message) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, Encode(m)); err != nil && !c.closing.Load() {
		c.t.Errorf("viewer write: %v", err)
	}
}

func rectID(r Rect) uint64 { return binary.BigEndian.Uint64(r.Data) }

func (c *client) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.st.closed = err
			c.mu.Unlock()
			return
		}
		m, err := Decode(data)
		if err != nil {
			c.t.Errorf("viewer got a bad frame: %v", err)
			return
		}
		c.mu.Lock()
		st := &c.st
		if c.noPix {
			switch m.(type) {
			case Rect, ClipRect, Copy:
				c.mu.Unlock()
				continue
			}
		}
		switch m := m.(type) {
		case Hello:
			st.hello = m
		case ModeMsg:
			st.mode = m.Mode
		case Screen:
			st.screen = m
			st.pix = make([]uint64, int(m.W)*int(m.H))
		case Rect:
			if !c.drop {
				st.rects = append(st.rects, data)
			}
			st.bytes += len(data)
			id := rectID(m)
			for y := int(m.Y); y < int(m.Y+m.H); y++ {
				for x := int(m.X); x < int(m.X+m.W); x++ {
					st.pix[y*int(st.screen.W)+x] = id
				}
			}
		case ClipRect:
			if !c.drop {
				st.clips = append(st.clips, m.Data)
			}
			st.bytes += len(data)
			id := binary.BigEndian.Uint64(m.Data)
			for y := int(m.CY); y < int(m.CY+m.CH); y++ {
				for x := int(m.CX); x < int(m.CX+m.CW); x++ {
					st.pix[y*int(st.screen.W)+x] = id
				}
			}
		case Copy:
			st.copies++
			st.bytes += len(data)
			copyPix(st.pix, int(st.screen.W), int(m.SrcX), int(m.SrcY), int(m.X), int(m.Y), int(m.W), int(m.H))
		case FrameEnd:
			st.frameEnds++
			st.lastSeq = m.Seq
			if c.ack {
				c.mu.Unlock()
				c.send(Ack{Seq: m.Seq})
				c.mu.Lock()
			}
		case Control:
			st.control = m
		case Viewers:
			st.viewers = m.Viewers
		case ErrorMsg:
			st.errs = append(st.errs, m)
		case Clipboard:
			st.clipboard = m.Text
		case CursorPos:
			st.cursor = m
		}
		c.mu.Unlock()
	}
}

// wait polls until cond holds on the viewer's state.
func (c *client) wait(what string, cond func(st *viewState) bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		ok := cond(&c.st)
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.t.Fatalf("viewer: timed out waiting for %s (state: screen %v, %d frames, control %+v, errors %+v, closed %v)",
				what, c.st.screen, c.st.frameEnds, c.st.control, c.st.errs, c.st.closed)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *client) state() viewState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.pix = append([]uint64(nil), c.st.pix...)
	st.rects = append([][]byte(nil), c.st.rects...)
	st.clips = append([][]byte(nil), c.st.clips...)
	st.errs = append([]ErrorMsg(nil), c.st.errs...)
	return st
}

func (c *client) hasErr(code ErrCode, substr string) func(*viewState) bool {
	return func(st *viewState) bool {
		for _, e := range st.errs {
			if e.Code == code && strings.Contains(e.Message, substr) {
				return true
			}
		}
		return false
	}
}

// truth is what the fake helper has drawn.
type truth struct {
	screen Screen
	pix    []uint64
	nextID uint64
	sent   map[string]bool // Rect frames sent
	data   map[string]bool // their data
}

// copy makes a Copy and applies it.
func (tr *truth) copy(sx, sy, x, y, w, h int) Copy {
	copyPix(tr.pix, int(tr.screen.W), sx, sy, x, y, w, h)
	return Copy{SrcX: uint16(sx), SrcY: uint16(sy), X: uint16(x), Y: uint16(y), W: uint16(w), H: uint16(h)}
}

// copyPix copies the w×h pixels at sx, sy of a picture of width stride to x, y (through a
// scratch copy: the areas may overlap).
func copyPix(pix []uint64, stride, sx, sy, x, y, w, h int) {
	tmp := make([]uint64, w*h)
	for r := range h {
		copy(tmp[r*w:(r+1)*w], pix[(sy+r)*stride+sx:])
	}
	for r := range h {
		copy(pix[(y+r)*stride+x:(y+r)*stride+x+w], tmp[r*w:(r+1)*w])
	}
}

func newTruth(w, h uint16) *truth {
	return &truth{screen: Screen{W: w, H: h}, pix: make([]uint64, int(w)*int(h)), sent: map[string]bool{}, data: map[string]bool{}}
}

// rect makes a Rect with a new id and size bytes of data, and draws it.
func (tr *truth) rect(x, y, w, h int, size int) Rect {
	tr.nextID++
	data := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(data, tr.nextID)
	r := Rect{X: uint16(x), Y: uint16(y), W: uint16(w), H: uint16(h), Enc: EncJPEG, Data: data}
	for yy := y; yy < y+h; yy++ {
		for xx := x; xx < x+w; xx++ {
			tr.pix[yy*int(tr.screen.W)+xx] = tr.nextID
		}
	}
	if tr.sent != nil {
		tr.sent[string(Encode(r))] = true
		tr.data[string(data)] = true
	}
	return r
}

func samePix(a, b []uint64) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if a[i] != b[i] {
			return i, false
		}
	}
	return 0, true
}
