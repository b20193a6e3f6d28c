//go:build !js

package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/porthole/porthole/api"
)

// hub is one agent's display in the gateway: one helper stream, the latest encoded screen
// (a tile model of raw Rect frames), the viewers and who holds control. Its goroutines
// (run, and the helper writer run starts) belong to the Service.
type hub struct {
	svc    *Service
	agent  api.Agent
	log    *slog.Logger
	ctx    context.Context // ends when the hub ends
	cancel context.CancelCauseFunc
	out    chan []byte   // frames to the helper's stream (writer goroutine)
	ready  chan struct{} // closed once the stream is open, or the hub ended
	done   chan struct{} // closed when the hub has ended

	// Guarded by Service.mu.
	users      int // sessions and API calls using the hub
	graceGen   uint64
	graceTimer *time.Timer

	mu         sync.Mutex
	ended      bool
	endErr     error
	model      model
	screenSeen chan struct{} // closed at the first Screen
	sessions   []*session    // in join order
	holder     holder        // who holds control
	agentGen   uint64        // invalidates the agent's hold timer
	agentTimer *time.Timer
	apiButtons uint8 // buttons the agent's API holds down
	cursorPos  CursorPos
	haveCursor bool
	cursorShp  []byte // raw frames, latest
	cursorFrm  []byte
	clipboard  []byte
	shots      []chan shotReply
	lagSent    uint8
	lagAt      time.Time
	collectID  uint64
}

// holder is who holds control: a viewer's session, or the agent's API (agent), or nobody.
type holder struct {
	sess  *session
	agent bool
	id    string // the person's (or agent token's) id: same-person and take-back rules
	conn  string // a viewer's connection id on the wire (ConnID): only that tab holds control
	name  string
}

func (c holder) none() bool { return c.sess == nil && !c.agent }

func (c holder) frame() []byte {
	id := c.conn
	if c.agent {
		id = c.id // the agent's API: its token's id (each call is its own request)
	}
	return Encode(Control{HolderID: id, HolderName: c.name, Agent: c.agent})
}

type shotReply struct {
	shot Screenshot
	err  error
}

// entry is one Rect frame as the helper sent it (never re-encoded), and the tiles it covers.
type entry struct {
	seq            uint64
	frame          []byte
	x0, y0, x1, y1 int // pixels, [x0,x1)×[y0,y1)
	refs           int // tiles whose list holds it
	mark           uint64
}

// model is the latest encoded screen: per tile the Rects, in arrival order, that together
// draw it. Entries a later Rect fully covers within a tile leave that tile's list.
type model struct {
	screen       Screen
	screenFrame  []byte
	cols, rows   int
	tiles        [][]*entry
	bytes        int // live entries' frame bytes
	nextSeq      uint64
	pending      []*entry // Rects of the helper's frame in progress, committed at FrameEnd
	pendingBytes int
	frames       uint64 // committed frames
}

func newHub(s *Service, agent api.Agent) *hub {
	ctx, cancel := context.WithCancelCause(s.ctx)
	return &hub{svc: s, agent: agent, log: s.log.With("agent", agent.ID),
		ctx: ctx, cancel: cancel, out: make(chan []byte, helperQueue),
		ready: make(chan struct{}), done: make(chan struct{}), screenSeen: make(chan struct{})}
}

// run opens the helper stream and reads it until it ends, then ends the hub.
func (h *hub) run() {
	defer h.svc.wg.Done()
	err := h.serve()
	h.end(err)
}

func (h *hub) serve() error {
	octx, ocancel := context.WithTimeout(h.ctx, openTimeout)
	stream, err := h.svc.open(octx, h.agent)
	ocancel()
	if err != nil {
		if h.ctx.Err() != nil {
			return context.Cause(h.ctx)
		}
		return fmt.Errorf("%w: open desktop stream: %v", ErrHelper, err)
	}
	defer stream.Close()
	stop := context.AfterFunc(h.ctx, func() { stream.Close() })
	defer stop()
	close(h.ready)
	h.log.Info("desktop stream opened")

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: serve, which waits for it; exits when the hub's ctx ends or a write fails
		defer wg.Done()
		h.writeHelper(stream)
	}()
	defer wg.Wait()
	err = h.readHelper(stream)
	h.cancel(err)
	return err
}

// writeHelper is the helper stream's only writer.
func (h *hub) writeHelper(stream net.Conn) {
	for {
		select {
		case f := <-h.out:
			stream.SetWriteDeadline(time.Now().Add(helperWriteTimout))
			if err := WriteRawStreamFrame(stream, f); err != nil {
				h.cancel(fmt.Errorf("%w: write to the desktop stream: %v", ErrHelper, err))
				return
			}
		case <-h.ctx.Done():
			return
		}
	}
}

// readHelper reads the helper's frames until the stream ends or one is malformed.
func (h *hub) readHelper(r io.Reader) error {
	var buf []byte
	for {
		frame, err := ReadStreamFrame(r, buf, MaxStreamFrame)
		if err != nil {
			if h.ctx.Err() != nil {
				return context.Cause(h.ctx)
			}
			if errors.Is(err, ErrFrameTooLarge) {
				return fmt.Errorf("%w: %v", ErrBadHelper, err)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("%w: the desktop stream ended", ErrHelper)
			}
			return fmt.Errorf("%w: read the desktop stream: %v", ErrHelper, err)
		}
		if err := h.helperFrame(frame); err != nil {
			return err
		}
		// Keep a small buffer; a large screenshot's buffer goes back to the GC.
		if buf = frame; cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// helperFrame acts on one frame from the helper. frame is only valid during the call.
func (h *hub) helperFrame(frame []byte) error {
	m, err := Decode(frame)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadHelper, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m := m.(type) {
	case Screen:
		h.resetLocked(m, slices.Clone(frame))
	case Rect:
		md := &h.model
		if md.tiles == nil {
			return fmt.Errorf("%w: a Rect before any Screen", ErrBadHelper)
		}
		if int(m.X)+int(m.W) > int(md.screen.W) || int(m.Y)+int(m.H) > int(md.screen.H) {
			return fmt.Errorf("%w: rect %dx%d at %d,%d is outside the %dx%d screen", ErrBadHelper, m.W, m.H, m.X, m.Y, md.screen.W, md.screen.H)
		}
		if len(md.pending) >= maxPendingRects || md.pendingBytes+len(frame) > maxPendingBytes {
			return fmt.Errorf("%w: a frame of over %d rects or %d bytes", ErrBadHelper, maxPendingRects, maxPendingBytes)
		}
		md.nextSeq++
		md.pending = append(md.pending, &entry{seq: md.nextSeq, frame: slices.Clone(frame),
			x0: int(m.X), y0: int(m.Y), x1: int(m.X) + int(m.W), y1: int(m.Y) + int(m.H)})
		md.pendingBytes += len(frame)
	case FrameEnd:
		if h.model.tiles == nil {
			return fmt.Errorf("%w: a FrameEnd before any Screen", ErrBadHelper)
		}
		return h.commitLocked()
	case CursorShape:
		h.cursorShp = slices.Clone(frame)
		for _, s := range h.sessions {
			s.cursorShape = h.cursorShp
			s.wakeup()
		}
	case CursorPos:
		h.cursorPos, h.haveCursor = m, true
		h.cursorFrm = slices.Clone(frame)
		for _, s := range h.sessions {
			s.cursorPos = h.cursorFrm
			s.wakeup()
		}
	case Clipboard:
		h.clipboard = slices.Clone(frame)
		for _, s := range h.sessions {
			if s.mode == ModeDrive {
				s.clipboard = h.clipboard
				s.wakeup()
			}
		}
	case Screenshot:
		if len(h.shots) == 0 {
			h.log.Debug("desktop helper sent a screenshot nobody asked for")
			return nil
		}
		ch := h.shots[0]
		h.shots = slices.Delete(h.shots, 0, 1)
		m.Data = slices.Clone(m.Data)
		ch <- shotReply{shot: m} // buffered (1), one reply per waiter
	default:
		return fmt.Errorf("%w: opcode 0x%02x is not sent by helpers", ErrBadHelper, uint8(m.Op()))
	}
	return nil
}

// resetLocked starts a new screen: the model empties and every viewer gets a keyframe.
func (h *hub) resetLocked(sc Screen, frame []byte) {
	md := &h.model
	for _, list := range md.tiles {
		for _, e := range list {
			e.refs = 0
		}
	}
	cols, rows := (int(sc.W)+tileSize-1)/tileSize, (int(sc.H)+tileSize-1)/tileSize
	*md = model{screen: sc, screenFrame: frame, cols: cols, rows: rows,
		tiles: make([][]*entry, cols*rows), nextSeq: md.nextSeq, frames: md.frames}
	for _, s := range h.sessions {
		s.keyframe = true
		s.dirty = make([]uint64, (cols*rows+63)/64)
		s.wakeup()
	}
	select {
	case <-h.screenSeen:
	default:
		close(h.screenSeen)
	}
}

// commitLocked puts the pending Rects into the tile model and marks their tiles dirty for
// every viewer: one helper frame, encoded once, whatever the number of viewers.
func (h *hub) commitLocked() error {
	md := &h.model
	md.frames++
	words := (md.cols*md.rows + 63) / 64
	dirty := make([]uint64, words)
	touched := make([]uint64, words)
	for _, e := range md.pending {
		md.bytes += len(e.frame)
		for ty := e.y0 / tileSize; ty < (e.y1+tileSize-1)/tileSize; ty++ {
			for tx := e.x0 / tileSize; tx < (e.x1+tileSize-1)/tileSize; tx++ {
				i := ty*md.cols + tx
				md.tiles[i] = append(md.tiles[i], e)
				e.refs++
				dirty[i/64] |= 1 << (i % 64)
			}
		}
	}
	copy(touched, dirty)
	for i := range md.tiles {
		if touched[i/64]&(1<<(i%64)) != 0 {
			md.prune(i)
		}
	}
	md.pending, md.pendingBytes = nil, 0
	if md.bytes > h.svc.cfg.MaxModelBytes {
		return fmt.Errorf("%w: the screen's encoded rects take %d bytes, over the %d-byte limit", ErrBadHelper, md.bytes, h.svc.cfg.MaxModelBytes)
	}
	for _, s := range h.sessions {
		for w := range dirty {
			s.dirty[w] |= dirty[w]
		}
		if !s.windowOpen() && s.behind < 255 {
			s.behind++
		}
		s.wakeup()
	}
	h.lagLocked()
	return nil
}

// prune drops from tile i's list every entry that newer entries hide entirely within the
// tile: every entry left shows at least one pixel, so a tile holds at most 64×64 entries
// and drawing its list in order draws the tile.
func (md *model) prune(i int) {
	tx0, ty0 := (i%md.cols)*tileSize, (i/md.cols)*tileSize
	var mask [tileSize]uint64 // pixels drawn by newer entries, one row per word
	list := md.tiles[i]
	keep := len(list)
	for j := len(list) - 1; j >= 0; j-- {
		e := list[j]
		x0, y0 := max(e.x0, tx0)-tx0, max(e.y0, ty0)-ty0
		x1, y1 := min(e.x1, tx0+tileSize)-tx0, min(e.y1, ty0+tileSize)-ty0
		row := rowBits(x0, x1)
		hidden := true
		for y := y0; y < y1; y++ {
			if mask[y]&row != row {
				hidden = false
			}
			mask[y] |= row
		}
		if hidden {
			md.unref(e)
			continue
		}
		keep--
		list[keep] = e
	}
	clear(list[:keep])
	md.tiles[i] = append(list[:0], list[keep:]...)
}

// rowBits is the mask of columns [x0, x1) of a tile row.
func rowBits(x0, x1 int) uint64 {
	if x1-x0 >= 64 {
		return ^uint64(0)
	}
	return (uint64(1)<<(x1-x0) - 1) << x0
}

func (md *model) unref(e *entry) {
	if e.refs--; e.refs == 0 {
		md.bytes -= len(e.frame)
	}
}

// lagLocked tells the helper how far the slowest viewer is behind (at most every lagEvery).
func (h *hub) lagLocked() {
	var lag uint8
	for _, s := range h.sessions {
		lag = max(lag, uint8(s.behind))
	}
	if lag == h.lagSent || time.Since(h.lagAt) < lagEvery {
		return
	}
	if h.trySendLocked(Encode(Lag{Frames: lag})) {
		h.lagSent, h.lagAt = lag, time.Now()
	}
}

// trySendLocked queues a frame to the helper without waiting (false: the queue is full).
func (h *hub) trySendLocked(f []byte) bool {
	select {
	case h.out <- f:
		return true
	default:
		return false
	}
}

// send queues a frame to the helper, waiting while its queue is full.
func (h *hub) send(ctx context.Context, f []byte) error {
	select {
	case h.out <- f:
		return nil
	case <-h.ctx.Done():
		return h.gone()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// gone is the error for a hub that ended.
func (h *hub) gone() error {
	cause := context.Cause(h.ctx)
	switch {
	case errors.Is(cause, ErrClosed), errors.Is(cause, ErrHelper), errors.Is(cause, ErrBadHelper):
		return cause
	}
	return fmt.Errorf("%w: %v", ErrHelper, cause)
}

// collectLocked returns the Rect frames a viewer needs, in arrival order: every entry of the
// tiles in dirty (nil = all tiles) that arrived after seq, each once.
func (h *hub) collectLocked(dirty []uint64, after uint64) [][]byte {
	md := &h.model
	h.collectID++
	id := h.collectID
	var es []*entry
	for i, list := range md.tiles {
		if dirty != nil && dirty[i/64]&(1<<(i%64)) == 0 {
			continue
		}
		for _, e := range list {
			if e.seq > after && e.mark != id {
				e.mark = id
				es = append(es, e)
			}
		}
	}
	slices.SortFunc(es, func(a, b *entry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.frame
	}
	return out
}

// lastSeqLocked is the seq of the newest committed entry.
func (h *hub) lastSeqLocked() uint64 {
	return h.model.nextSeq - uint64(len(h.model.pending))
}

// end tears the hub down: viewers are told why (unless it idled or the gateway closes) and
// disconnected; screenshot waiters fail.
func (h *hub) end(err error) {
	h.cancel(err)
	cause := context.Cause(h.ctx)
	switch {
	case errors.Is(cause, errIdle), errors.Is(cause, ErrClosed):
		h.log.Info("desktop stream closed", "cause", cause)
	default:
		h.log.Warn("desktop stream ended", "err", cause)
	}
	h.mu.Lock()
	h.ended, h.endErr = true, h.gone()
	sessions := slices.Clone(h.sessions)
	shots := h.shots
	h.shots = nil
	h.model = model{}
	if h.agentTimer != nil {
		h.agentTimer.Stop()
	}
	h.mu.Unlock()
	select {
	case <-h.ready:
	default:
		close(h.ready)
	}
	for _, ch := range shots {
		ch <- shotReply{err: h.endErr}
	}
	for _, s := range sessions {
		if !errors.Is(cause, ErrClosed) {
			s.queueErr(ErrCodeHelper, h.endErr.Error())
		}
		s.cancel(h.endErr)
	}
	h.svc.forget(h)
	close(h.done)
}

// waitScreen waits until the helper's stream is open and it has said the screen's size.
func (h *hub) waitScreen(ctx context.Context) error {
	select {
	case <-h.screenSeen:
		return nil
	case <-h.done:
		return h.gone()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
