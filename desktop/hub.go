//go:build !js

package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mbits "math/bits"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
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

	mu          sync.Mutex
	ended       bool
	endErr      error
	model       model
	screenSeen  chan struct{} // closed at the first Screen
	sessions    []*session    // in join order
	waking      []*session    // scratch: the sessions helperFrame wakes after a commit
	holder      holder        // who holds control
	handoff     surface.HandoffState
	stopWatch   func() // ends the hub's watch of the agent's handoff
	agentGen    uint64 // invalidates the agent's hold timer
	agentTimer  *time.Timer
	apiButtons  uint8 // buttons the agent's API holds down
	cursorPos   CursorPos
	haveCursor  bool
	cursorMoved chan struct{} // closed (and replaced) when the helper reports the pointer
	cursorShp   []byte        // raw frames, latest
	cursorFrm   []byte
	clipboard   []byte
	shots       []chan shotReply
	lagSent     uint8
	lagAt       time.Time
}

// holder is who holds control: a viewer's session, a person on another of the agent's
// surfaces (remote: the browser, surface.Handoff), the agent's API (agent), or nobody.
type holder struct {
	sess   *session
	remote bool
	agent  bool
	id     string // the person's (or agent token's) id: same-person and take-back rules
	conn   string // a viewer's connection id on the wire (ConnID): only that tab holds control
	name   string
}

func (c holder) none() bool { return c.sess == nil && !c.remote && !c.agent }

// label names the holder for messages: "alice", or "alice (on the agent's browser)".
func (c holder) label() string {
	if c.remote {
		return c.name + " (on the agent's browser)"
	}
	return c.name
}

// person reports whether a person holds control (here or on the agent's other surface).
func (c holder) person() bool { return c.sess != nil || c.remote }

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

// entry is one image the model draws: a Rect frame as the helper sent it (never re-encoded),
// or a ClipRect the gateway made when a Copy moved part of an entry (its header is the
// gateway's, its image data the helper's, shared with the entry it came from).
type entry struct {
	seq                uint64
	hdr                []byte // the frame up to its image data
	data               *blob  // the image data
	enc, flags         uint8
	ix0, iy0, ix1, iy1 int // where the image lies (a ClipRect's may reach past the screen)
	x0, y0, x1, y1     int // the pixels it draws, [x0,x1)×[y0,y1): on the screen, inside the image
	refs               int // tiles whose list holds it
	mark               uint64
}

// blob is image data shared by entries; the model counts its bytes once.
type blob struct {
	b    []byte
	refs int // live entries using it
}

// msg is one WebSocket message to a viewer: a frame, or a frame's header and data (an entry).
type msg struct{ a, b []byte }

func (m msg) len() int { return len(m.a) + len(m.b) }

func (e *entry) msg() msg { return msg{e.hdr, e.data.b} }

// op is one frame of the helper's frame in progress: a Rect (entry) or a Copy (copy).
type op struct {
	e     *entry
	copy  Copy
	frame []byte // the Copy's frame
}

// committed is one helper frame as it was committed: what a viewer that had everything
// before it needs to draw it (the helper's own frames, in order).
type committed struct {
	msgs   []msg
	bytes  int
	copies bool
}

// model is the latest encoded screen: per tile the entries, in arrival order, that together
// draw it. Entries later ones fully cover within a tile leave that tile's list. A Copy adds,
// for each entry drawing part of its source, a ClipRect of that part moved to the target.
type model struct {
	screen       Screen
	screenFrame  []byte
	cols, rows   int
	tiles        [][]*entry
	bytes        int // live entries' headers and their blobs' data, each blob once
	nextSeq      uint64
	pending      []op // the helper's frame in progress, committed at FrameEnd
	pendingBytes int
	frames       uint64      // committed frames
	recent       []committed // the latest committed frames, frames-len(recent)+1 … frames
	recentBytes  int
	touched      []uint64 // tiles whose lists grew since they were last pruned
	mark         uint64   // marks entries already gathered by one walk over tiles
}

func newHub(s *Service, agent api.Agent) *hub {
	ctx, cancel := context.WithCancelCause(s.ctx)
	return &hub{svc: s, agent: agent, log: s.log.With("agent", agent.ID),
		ctx: ctx, cancel: cancel, out: make(chan []byte, helperQueue),
		ready: make(chan struct{}), done: make(chan struct{}), screenSeen: make(chan struct{})}
}

var _ surface.Hub = (*hub)(nil)

// Run opens the helper stream and reads it until it ends, then ends the hub
// (surface.Hub: the Service's Hubs own the goroutine).
func (h *hub) Run() {
	err := h.serve()
	h.end(err)
}

// End makes the hub end with cause (surface.Hub).
func (h *hub) End(cause error) { h.cancel(cause) }

// Ending reports whether the hub ended or is ending (surface.Hub).
func (h *hub) Ending() bool { return h.ctx.Err() != nil }

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
	h.svc.changed(h.agent.ID)

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
	if _, ok := m.(FrameEnd); ok && h.model.tiles != nil {
		err := h.commitLocked()
		wake := append(h.waking[:0], h.sessions...)
		h.mu.Unlock()
		for _, s := range wake { // after the unlock: woken writers do not queue on h.mu
			s.wakeup()
		}
		clear(wake)
		h.waking = wake[:0]
		h.svc.statusFrame(h.agent.ID)
		return err
	}
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
		f := slices.Clone(frame)
		x0, y0, x1, y1 := int(m.X), int(m.Y), int(m.X)+int(m.W), int(m.Y)+int(m.H)
		md.pending = append(md.pending, op{e: &entry{hdr: f[:RectHeader:RectHeader], data: &blob{b: f[RectHeader:]},
			enc: m.Enc, flags: m.Flags, ix0: x0, iy0: y0, ix1: x1, iy1: y1, x0: x0, y0: y0, x1: x1, y1: y1}})
		md.pendingBytes += len(frame)
	case Copy:
		md := &h.model
		if md.tiles == nil {
			return fmt.Errorf("%w: a Copy before any Screen", ErrBadHelper)
		}
		if int(m.SrcX)+int(m.W) > int(md.screen.W) || int(m.SrcY)+int(m.H) > int(md.screen.H) ||
			int(m.X)+int(m.W) > int(md.screen.W) || int(m.Y)+int(m.H) > int(md.screen.H) {
			return fmt.Errorf("%w: copy of %dx%d from %d,%d to %d,%d is outside the %dx%d screen", ErrBadHelper, m.W, m.H, m.SrcX, m.SrcY, m.X, m.Y, md.screen.W, md.screen.H)
		}
		if len(md.pending) >= maxPendingRects || md.pendingBytes+len(frame) > maxPendingBytes {
			return fmt.Errorf("%w: a frame of over %d rects or %d bytes", ErrBadHelper, maxPendingRects, maxPendingBytes)
		}
		md.pending = append(md.pending, op{copy: m, frame: slices.Clone(frame)})
		md.pendingBytes += len(frame)
	case FrameEnd: // before any Screen (one after a Screen is committed above)
		return fmt.Errorf("%w: a FrameEnd before any Screen", ErrBadHelper)
	case CursorShape:
		h.cursorShp = slices.Clone(frame)
		for _, s := range h.sessions {
			s.cursorShape = h.cursorShp
			s.wakeup()
		}
	case CursorPos:
		h.cursorPos, h.haveCursor = m, true
		if h.cursorMoved != nil {
			close(h.cursorMoved)
			h.cursorMoved = nil
		}
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
	case ClipboardCut:
		// The gateway's own words: the helper shares the agent's sandbox and sends a number only.
		msg := fmt.Sprintf("the desktop's clipboard holds %.1f MiB or more; only its first %d MiB was copied to you",
			float64(m.Size)/(1<<20), MaxClipboard>>20)
		for _, s := range h.sessions {
			if s.mode == ModeDrive {
				s.queueErrLocked(ErrCodeTooLarge, msg)
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
		tiles: make([][]*entry, cols*rows), nextSeq: md.nextSeq, frames: md.frames, mark: md.mark,
		touched: make([]uint64, (cols*rows+63)/64)}
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

// commitLocked applies the helper's frame to the tile model, in order (a Copy sees the Rects
// before it), remembers it among the recent frames, and marks its tiles changed for every
// viewer: one helper frame, encoded once, whatever the number of viewers.
func (h *hub) commitLocked() error {
	md := &h.model
	md.frames++
	dirty := make([]uint64, len(md.touched))
	var c committed
	derived := 0
	for _, o := range md.pending {
		if o.e != nil {
			md.add(o.e, dirty)
			c.msgs = append(c.msgs, o.e.msg())
			c.bytes += o.e.msg().len()
			continue
		}
		derived += md.copy(o.copy, dirty)
		if derived > maxDerived {
			return fmt.Errorf("%w: the copies of one frame moved over %d images", ErrBadHelper, maxDerived)
		}
		c.msgs = append(c.msgs, msg{a: o.frame})
		c.bytes += len(o.frame)
		c.copies = true
	}
	md.pruneTouched()
	md.pending, md.pendingBytes = nil, 0
	md.recent = append(md.recent, c)
	md.recentBytes += c.bytes
	for len(md.recent) > 1 && (len(md.recent) > recentFrames || md.recentBytes > recentBytes) {
		md.recentBytes -= md.recent[0].bytes
		md.recent[0] = committed{}
		md.recent = md.recent[1:]
	}
	if md.bytes > h.svc.cfg.MaxModelBytes {
		return fmt.Errorf("%w: the screen's encoded rects take %d bytes, over the %d-byte limit", ErrBadHelper, md.bytes, h.svc.cfg.MaxModelBytes)
	}
	for _, s := range h.sessions { // helperFrame wakes their writers once h.mu is free
		for w := range dirty {
			s.dirty[w] |= dirty[w]
		}
		if !s.windowOpen() && s.behind < 255 {
			s.behind++
		}
	}
	h.lagLocked()
	return nil
}

// add puts e (its seq now the newest) in the lists of the tiles it draws on.
func (md *model) add(e *entry, dirty []uint64) {
	md.nextSeq++
	e.seq = md.nextSeq
	if e.data.refs == 0 {
		md.bytes += len(e.data.b)
	}
	e.data.refs++
	md.bytes += len(e.hdr)
	for ty := e.y0 / tileSize; ty < (e.y1+tileSize-1)/tileSize; ty++ {
		for tx := e.x0 / tileSize; tx < (e.x1+tileSize-1)/tileSize; tx++ {
			i := ty*md.cols + tx
			md.tiles[i] = append(md.tiles[i], e)
			e.refs++
			dirty[i/64] |= 1 << (i % 64)
			md.touched[i/64] |= 1 << (i % 64)
		}
	}
}

// copy applies a Copy to the model: each entry drawing part of the source gets a ClipRect of
// that part, moved to the target, drawn after everything before it (in the order of the
// entries it comes from). It returns how many entries it added.
func (md *model) copy(c Copy, dirty []uint64) int {
	md.pruneTouched() // fewer, only visible, entries to move
	dx, dy := int(c.X)-int(c.SrcX), int(c.Y)-int(c.SrcY)
	sx0, sy0, sx1, sy1 := int(c.SrcX), int(c.SrcY), int(c.SrcX)+int(c.W), int(c.SrcY)+int(c.H)
	md.mark++
	var es []*entry
	for ty := sy0 / tileSize; ty < (sy1+tileSize-1)/tileSize; ty++ {
		for tx := sx0 / tileSize; tx < (sx1+tileSize-1)/tileSize; tx++ {
			for _, e := range md.tiles[ty*md.cols+tx] {
				if e.mark != md.mark && e.x0 < sx1 && e.x1 > sx0 && e.y0 < sy1 && e.y1 > sy0 {
					e.mark = md.mark
					es = append(es, e)
				}
			}
		}
	}
	slices.SortFunc(es, bySeq)
	for _, e := range es {
		d := &entry{data: e.data, enc: e.enc, flags: e.flags,
			ix0: e.ix0 + dx, iy0: e.iy0 + dy, ix1: e.ix1 + dx, iy1: e.iy1 + dy,
			x0: max(e.x0, sx0) + dx, y0: max(e.y0, sy0) + dy, x1: min(e.x1, sx1) + dx, y1: min(e.y1, sy1) + dy}
		d.hdr = ClipRect{CX: uint16(d.x0), CY: uint16(d.y0), CW: uint16(d.x1 - d.x0), CH: uint16(d.y1 - d.y0),
			X: int16(d.ix0), Y: int16(d.iy0), W: uint16(d.ix1 - d.ix0), H: uint16(d.iy1 - d.iy0),
			Enc: d.enc, Flags: d.flags}.AppendHeader(make([]byte, 0, ClipRectHeader))
		md.add(d, dirty)
	}
	return len(es)
}

func bySeq(a, b *entry) int {
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// pruneTouched prunes the tiles whose lists grew.
func (md *model) pruneTouched() {
	for w, bits := range md.touched {
		for bits != 0 {
			i := mbits.TrailingZeros64(bits)
			bits &= bits - 1
			md.prune(w*64 + i)
		}
		md.touched[w] = 0
	}
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
		md.bytes -= len(e.hdr)
		if e.data.refs--; e.data.refs == 0 {
			md.bytes -= len(e.data.b)
		}
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

// collectLocked appends the entries a viewer needs, in arrival order: every entry of the
// tiles in dirty (nil = all tiles) that arrived after seq, each once.
func (h *hub) collectLocked(out []msg, dirty []uint64, after uint64) []msg {
	md := &h.model
	md.mark++
	var es []*entry
	for i, list := range md.tiles {
		if dirty != nil && dirty[i/64]&(1<<(i%64)) == 0 {
			continue
		}
		for _, e := range list {
			if e.seq > after && e.mark != md.mark {
				e.mark = md.mark
				es = append(es, e)
			}
		}
	}
	slices.SortFunc(es, bySeq)
	for _, e := range es {
		out = append(out, e.msg())
	}
	return out
}

// catchUpLocked appends what a viewer that was sent everything up to helper frame s.synced
// needs to draw the model now: the helper's own frames since then, when the recent frames
// still hold them and they are one frame, or frames with copies whose bytes are fewer than
// the entries they changed; otherwise the latest entries of the changed tiles (a copy then
// arrives as ClipRects of what it moved).
func (h *hub) catchUpLocked(s *session, out []msg) []msg {
	md := &h.model
	first := md.frames - uint64(len(md.recent)) // recent holds first+1 … frames
	if s.synced >= first && s.synced < md.frames {
		rs := md.recent[s.synced-first:]
		replay := func(out []msg) []msg {
			for _, c := range rs {
				out = append(out, c.msgs...)
			}
			return out
		}
		if len(rs) == 1 {
			return replay(out)
		}
		copies, rb := false, 0
		for _, c := range rs {
			copies = copies || c.copies
			rb += c.bytes
		}
		if copies {
			n := len(out)
			out = h.collectLocked(out, s.dirty, s.sentSeq)
			cb := 0
			for _, m := range out[n:] {
				cb += m.len()
			}
			if rb < cb {
				clear(out[n:])
				return replay(out[:n])
			}
			return out
		}
	}
	return h.collectLocked(out, s.dirty, s.sentSeq)
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
	if h.stopWatch != nil {
		h.stopWatch()
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
	h.svc.changed(h.agent.ID)
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
