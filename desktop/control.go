//go:build !js

package desktop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// session is one viewer's WebSocket (a surface.ViewerConn: its reader is Serve's goroutine,
// its only writer runs flush). Everything it has to send is latest-wins state, never a queue that grows with
// time: dirty tiles, the newest Control, Viewers, cursor and clipboard frames, and at most
// maxErrQueue errors.
type session struct {
	h      *hub
	v      Viewer
	mode   Mode
	ws     *websocket.Conn
	conn   *surface.ViewerConn
	cancel context.CancelCauseFunc
	log    *slog.Logger

	// The writer's buffers (flush only).
	batch      []msg
	hdrs       []byte
	bufs       net.Buffers
	deadlineAt time.Time // when the write deadline was last moved

	// Guarded by hub.mu.
	hello       []byte
	modeFrame   []byte
	control     []byte
	viewers     []byte
	cursorShape []byte
	cursorPos   []byte
	clipboard   []byte
	errs        [][]byte
	keyframe    bool     // send the whole screen next
	dirty       []uint64 // tiles changed since the last frame sent
	sentSeq     uint64   // newest entry the viewer has been sent
	synced      uint64   // the helper frames (model.frames) the viewer has been sent up to
	seq, acked  uint32   // FrameEnds sent and acknowledged
	behind      int      // helper frames coalesced while the window was full
	lastNote    time.Time
}

func newSession(h *hub, ws *websocket.Conn, v Viewer, cancel context.CancelCauseFunc) *session {
	mode := ModeOf(v.Mode)
	return &session{h: h, v: v, mode: mode, ws: ws, conn: surface.NewViewerConn(ws), cancel: cancel,
		log:       h.log.With("viewer", v.ID, "conn", v.Conn),
		hello:     Encode(Hello{Version: ProtocolVersion, Mode: mode, ViewerID: ConnID(v), ViewerName: v.Name}),
		modeFrame: Encode(ModeMsg{Mode: mode}), keyframe: true}
}

// ConnID is the id a viewer has on the wire (Hello, Control, Viewers): the person's id and
// the connection's, "<id>#<conn>". One person in two tabs is two ids, so a client knows
// whether its own connection holds control by comparing its Hello id with Control's.
func ConnID(v Viewer) string { return fmt.Sprintf("%s#%d", v.ID, v.Conn) }

func (s *session) wakeup() { s.conn.Wake() }

// queueErr queues an Error frame (dropped when maxErrQueue are already waiting).
func (s *session) queueErr(code ErrCode, msg string) {
	s.h.mu.Lock()
	s.queueErrLocked(code, msg)
	s.h.mu.Unlock()
}

func (s *session) queueErrLocked(code ErrCode, msg string) {
	if len(s.errs) < maxErrQueue {
		s.errs = append(s.errs, Encode(ErrorMsg{Code: code, Message: msg}))
		s.wakeup()
	}
}

// noteLocked queues an error about dropped input, at most once a second.
func (s *session) noteLocked(code ErrCode, msg string) {
	if now := time.Now(); now.Sub(s.lastNote) >= noteEvery {
		s.lastNote = now
		s.queueErrLocked(code, msg)
	}
}

func (s *session) windowOpen() bool { return int(s.seq-s.acked) < s.h.svc.cfg.Window }

func (s *session) isOwner() bool {
	return s.v.Token == "" && (s.v.Admin || (s.v.ID != "" && s.v.ID == s.h.agent.OwnerID))
}

// join adds a viewer to the hub.
func (h *hub) join(s *session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return h.endErr
	}
	if len(h.sessions) >= MaxViewers {
		return fmt.Errorf("this desktop already has %d viewers (the most it allows); try again later", MaxViewers)
	}
	h.sessions = append(h.sessions, s)
	s.control = h.holder.frame()
	s.dirty = make([]uint64, (h.model.cols*h.model.rows+63)/64)
	s.cursorShape, s.cursorPos = h.cursorShp, h.cursorFrm
	if s.mode == ModeDrive {
		s.clipboard = h.clipboard
	}
	h.viewersLocked()
	s.log.Info("desktop viewer joined", "mode", s.mode)
	return nil
}

// leave removes a viewer; the control it held is released (on this surface: the person may
// still hold it on the agent's browser).
func (h *hub) leave(s *session) {
	h.mu.Lock()
	for i, o := range h.sessions {
		if o == s {
			h.sessions = append(h.sessions[:i:i], h.sessions[i+1:]...)
			break
		}
	}
	if h.holder.sess == s {
		h.setHolderLocked(holder{})
	}
	h.viewersLocked()
	h.lagLocked()
	h.mu.Unlock()
	// Even when the hub did not show s as the holder (it had ended): a no-op unless s holds.
	h.svc.cfg.Handoff.Release(h.agent.ID, api.SurfaceDesktop, ConnID(s.v))
	s.log.Info("desktop viewer left")
}

// syncHandoff follows the agent's handoff (surface.Handoff.Watch): another surface's taking
// or releasing control, and this one's.
func (h *hub) syncHandoff() {
	cur := h.svc.cfg.Handoff.Holder(h.agent.ID)
	h.mu.Lock()
	h.applyHandoffLocked(cur)
	h.mu.Unlock()
}

// applyHandoffLocked makes the hub's holder what the handoff says: the session that holds
// control here, a person who holds it on the agent's browser, or nobody (the agent's API
// keeps its hold while no person has one).
func (h *hub) applyHandoffLocked(cur surface.Holder) {
	p, ok := h.handoff.Apply(cur, api.SurfaceDesktop)
	switch {
	case !ok || h.ended:
	case p.Nobody:
		if h.holder.person() {
			h.setHolderLocked(holder{})
		}
	case p.Here && h.sessionLocked(p.Conn) != nil:
		s := h.sessionLocked(p.Conn)
		h.setHolderLocked(holder{sess: s, id: s.v.ID, conn: p.Conn, name: s.v.Name})
	default: // on the browser, or a session here that has left (its Release follows)
		h.setHolderLocked(holder{remote: true, id: p.Person, conn: p.Conn, name: p.Name})
	}
}

// sessionLocked is the viewer whose wire id is conn (nil: none).
func (h *hub) sessionLocked(conn string) *session {
	for _, s := range h.sessions {
		if ConnID(s.v) == conn {
			return s
		}
	}
	return nil
}

// viewersLocked tells every viewer who is attached.
func (h *hub) viewersLocked() {
	vs := make([]ViewerInfo, len(h.sessions))
	for i, s := range h.sessions {
		vs[i] = ViewerInfo{ID: ConnID(s.v), Name: s.v.Name, Mode: s.mode}
	}
	f := Encode(Viewers{Viewers: vs})
	for _, s := range h.sessions {
		s.viewers = f
		s.wakeup()
	}
}

// setHolderLocked changes who holds control and tells every viewer.
func (h *hub) setHolderLocked(c holder) {
	if c == h.holder {
		return
	}
	if h.holder.agent && h.agentTimer != nil {
		h.agentTimer.Stop()
		h.agentGen++
	}
	if h.apiButtons != 0 && !c.agent {
		// The agent's API left buttons down: release them before a person drives.
		h.trySendLocked(Encode(Pointer{X: h.cursorPos.X, Y: h.cursorPos.Y}))
		h.apiButtons = 0
	}
	h.holder = c
	f := c.frame()
	for _, s := range h.sessions {
		s.control = f
		s.wakeup()
	}
	h.log.Info("desktop control", "holder", c.id, "agent", c.agent)
}

// handle acts on one viewer frame.
func (h *hub) handle(ctx context.Context, s *session, m Message) {
	switch m := m.(type) {
	case Ack:
		h.mu.Lock()
		if d := m.Seq - s.acked; d != 0 && d <= s.seq-s.acked {
			held := !s.windowOpen()
			s.acked = m.Seq
			if held && (s.keyframe || anySet(s.dirty)) {
				s.wakeup() // frames waited for this ack; otherwise the writer sleeps on
			}
			h.lagLocked()
		}
		h.mu.Unlock()
	case Refresh:
		h.mu.Lock()
		s.keyframe = true
		s.wakeup()
		h.mu.Unlock()
	case TakeControl:
		h.takeControl(s)
	case ReleaseControl: // a no-op unless s holds control here
		h.svc.cfg.Handoff.Release(h.agent.ID, api.SurfaceDesktop, ConnID(s.v))
	default:
		if !IsInput(m.Op()) {
			s.queueErr(ErrCodeBadMessage, fmt.Sprintf("opcode 0x%02x is not sent by viewers", uint8(m.Op())))
			return
		}
		f, ok := h.viewerInput(s, m)
		if !ok {
			return
		}
		if err := h.send(ctx, f); err != nil && ctx.Err() == nil {
			s.queueErr(ErrCodeHelper, "input not delivered: "+err.Error())
		}
	}
}

// takeControl makes s the driver, through the handoff the desktop shares with the agent's
// browser (surface.Handoff.Take): when no person holds control (the agent's API may), when s
// is the same person (another tab, or the browser), or when s is the agent's owner or an
// admin (take-back). Whoever held it loses it on the browser too.
func (h *hub) takeControl(s *session) {
	if s.mode != ModeDrive {
		s.queueErr(ErrCodeWatchOnly, "you are watching this desktop: only drivers can take control")
		return
	}
	cur, err := h.svc.cfg.Handoff.Take(h.agent.ID, api.SurfaceDesktop,
		surface.Claim{Person: s.v.ID, Name: s.v.Name, Conn: ConnID(s.v), Owner: s.isOwner()})
	if err != nil {
		s.queueErr(ErrCodeNotHolder, err.Error())
		return
	}
	h.mu.Lock()
	h.applyHandoffLocked(cur)
	h.mu.Unlock()
}

// viewerInput checks that s may send m (drives, holds control), clamps it to the display,
// and returns its frame for the helper.
func (h *hub) viewerInput(s *session, m Message) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.mode != ModeDrive {
		s.noteLocked(ErrCodeWatchOnly, "you are watching this desktop: your input was dropped")
		return nil, false
	}
	if h.holder.sess != s {
		who := "nobody"
		if !h.holder.none() {
			who = h.holder.label()
		}
		s.noteLocked(ErrCodeNotHolder, fmt.Sprintf("your input was dropped: %s holds control; take control first", who))
		return nil, false
	}
	m, ok := h.clampLocked(m)
	if !ok {
		return nil, false
	}
	return Encode(m), true
}

// clampLocked clamps a pointer's coordinates and a resize to the display (false: no
// display yet, so there is nothing to point at).
func (h *hub) clampLocked(m Message) (Message, bool) {
	sc := h.model.screen
	switch p := m.(type) {
	case Pointer:
		if sc.W == 0 {
			return nil, false
		}
		p.X, p.Y = min(p.X, sc.W-1), min(p.Y, sc.H-1)
		return p, true
	case Wheel:
		if sc.W == 0 {
			return nil, false
		}
		p.X, p.Y = min(p.X, sc.W-1), min(p.Y, sc.H-1)
		return p, true
	case ResizeRequest:
		p.W, p.H = ClampDisplay(p.W, p.H)
		return p, true
	}
	return m, true
}

// take returns, in order, the messages s should write now: what changed since its last
// call. Pixels go only while its window of unacknowledged frames is open.
func (h *hub) take(s *session, out []msg) []msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	add := func(f *[]byte) {
		if *f != nil {
			out = append(out, msg{a: *f})
			*f = nil
		}
	}
	add(&s.hello)
	add(&s.modeFrame)
	for _, e := range s.errs {
		out = append(out, msg{a: e})
	}
	s.errs = nil
	add(&s.control)
	add(&s.viewers)
	add(&s.clipboard)
	if md := &h.model; md.tiles != nil && s.windowOpen() && (s.keyframe || anySet(s.dirty)) {
		if s.keyframe {
			out = append(out, msg{a: md.screenFrame})
			out = h.collectLocked(out, nil, 0)
		} else {
			out = h.catchUpLocked(s, out)
		}
		s.keyframe = false
		clear(s.dirty)
		s.sentSeq = md.nextSeq
		s.synced = md.frames
		s.seq++
		s.behind = 0
		out = append(out, msg{a: Encode(FrameEnd{Seq: s.seq})})
	}
	add(&s.cursorShape)
	add(&s.cursorPos)
	return out
}

func anySet(b []uint64) bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

// flush writes what changed since its last call (surface.ViewerLoop.Flush).
func (s *session) flush(context.Context) (bool, error) {
	s.batch = s.h.take(s, s.batch[:0])
	if len(s.batch) == 0 {
		return false, nil
	}
	err := s.writeBatch(s.batch)
	clear(s.batch) // let the GC have frames the model dropped
	if err != nil {
		return false, fmt.Errorf("write: %w", err)
	}
	return true, nil
}

// writeBatch writes the messages as binary WebSocket messages, all with one system call: the
// frames' bytes are shared by every viewer (no copy), each message gets its own frame header.
// The bytes are what gorilla/websocket's WriteMessage would write for each (a server's frames
// are not masked); only the writer goroutine writes to the connection, and gorilla's own
// writes (pings, pongs, the close) happen there too, between batches.
func (s *session) writeBatch(batch []msg) error {
	if need := len(batch) * maxWSHeader; cap(s.hdrs) < need {
		s.hdrs = make([]byte, 0, need)
	}
	hdrs, bufs := s.hdrs[:0], s.bufs[:0]
	for _, m := range batch {
		n := len(hdrs)
		hdrs = appendWSHeader(hdrs, m.len())
		bufs = append(bufs, hdrs[n:])
		if len(m.a) > 0 {
			bufs = append(bufs, m.a)
		}
		if len(m.b) > 0 {
			bufs = append(bufs, m.b)
		}
	}
	s.hdrs, s.bufs = hdrs, bufs
	defer clear(s.bufs[:cap(s.bufs)])
	conn := s.ws.NetConn()
	if now := time.Now(); now.Sub(s.deadlineAt) >= time.Second { // a stuck viewer's timeout: moved once a second
		if err := conn.SetWriteDeadline(now.Add(surface.WriteTimeout)); err != nil {
			return err
		}
		s.deadlineAt = now
	}
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn: // writev
		_, err := bufs.WriteTo(conn)
		return err
	}
	// Another kind of connection (TLS): one write of the whole batch, not one per buffer.
	var one []byte
	for _, b := range bufs {
		one = append(one, b...)
	}
	_, err := conn.Write(one)
	return err
}

// maxWSHeader is the longest header of an unmasked WebSocket frame.
const maxWSHeader = 10

// appendWSHeader appends the header of a final, unmasked binary WebSocket frame of n bytes
// (RFC 6455 §5.2).
func appendWSHeader(b []byte, n int) []byte {
	b = append(b, 0x80|websocket.BinaryMessage)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xffff:
		return append(b, 126, byte(n>>8), byte(n))
	}
	b = append(b, 127)
	for i := 7; i >= 0; i-- {
		b = append(b, byte(uint64(n)>>(8*i)))
	}
	return b
}

// closeWS writes the errors still queued (the reason the hub ended), then a close frame
// saying why the server ends the connection (best effort).
func (s *session) closeWS(ctx context.Context) {
	s.h.mu.Lock()
	errs := s.errs
	s.errs = nil
	s.h.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	s.ws.SetWriteDeadline(deadline)
	for _, f := range errs {
		if s.ws.WriteMessage(websocket.BinaryMessage, f) != nil {
			break
		}
	}
	cause := context.Cause(ctx)
	code, text := websocket.CloseNormalClosure, ""
	switch {
	case errors.Is(cause, ErrClosed):
		code, text = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(cause, ErrHelper), errors.Is(cause, ErrBadHelper):
		code, text = websocket.CloseTryAgainLater, "desktop helper unavailable"
	}
	s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), deadline)
}
