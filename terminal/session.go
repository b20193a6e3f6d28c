//go:build !js

package terminal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// session is one client WebSocket (a surface.ViewerConn: its reader is Serve's goroutine,
// its only writer runs flush).
type session struct {
	svc    *Service
	agent  api.Agent
	v      Viewer
	mode   Mode
	ws     *websocket.Conn
	conn   *surface.ViewerConn
	cancel context.CancelCauseFunc
	log    *slog.Logger
	opens  sync.WaitGroup // openTerm goroutines; Serve waits for them

	// The writer's (flush only).
	buf     []byte
	scratch []*attachment
	rr      int

	mu    sync.Mutex
	ctrl  [][]byte // control frames, in order
	atts  map[uint32]*attachment
	order []*attachment // attachments in attach order, for round-robin
}

func (s *session) wakeup() { s.conn.Wake() }

// queue adds a control frame; a client too far behind is dropped (memory stays bounded).
func (s *session) queue(frame []byte) {
	s.mu.Lock()
	if len(s.ctrl) >= ctrlQueueMax {
		s.mu.Unlock()
		s.cancel(ErrSlow)
		return
	}
	s.ctrl = append(s.ctrl, frame)
	s.mu.Unlock()
	s.wakeup()
}

func (s *session) sendError(id uint32, code ErrCode, msg string) {
	s.queue(Encode(ErrorMsg{ID: id, Code: code, Message: msg}))
}

// flush is the writer's pass (surface.ViewerLoop.Flush): control frames first, then output
// of the attached terminals round-robin, one frame each per pass, within each one's window.
func (s *session) flush(context.Context) (bool, error) {
	if s.buf == nil {
		s.buf = make([]byte, 0, OutputHeaderLen+maxOutputFrame)
	}
	write := func(b []byte) error {
		s.ws.SetWriteDeadline(time.Now().Add(surface.WriteTimeout))
		return s.ws.WriteMessage(websocket.BinaryMessage, b)
	}
	s.mu.Lock()
	ctrl := s.ctrl
	s.ctrl = nil
	atts := append(s.scratch[:0], s.order...)
	s.mu.Unlock()
	s.scratch = atts
	defer clear(atts)

	progress := false
	for _, f := range ctrl {
		if err := write(f); err != nil {
			return false, fmt.Errorf("write: %w", err)
		}
		progress = true
	}
	for i := range atts {
		a := atts[(s.rr+i)%len(atts)]
		frame, done := a.t.nextFrame(a, s.buf)
		if frame == nil {
			continue
		}
		if err := write(frame); err != nil {
			return false, fmt.Errorf("write output: %w", err)
		}
		progress = true
		if done {
			s.drop(a)
		}
	}
	if len(atts) > 0 {
		s.rr = (s.rr + 1) % len(atts)
	}
	return progress, nil
}

// closeWS sends a close frame saying why the server ends the connection (best effort).
func (s *session) closeWS(ctx context.Context) {
	cause := context.Cause(ctx)
	code, text := websocket.CloseNormalClosure, ""
	switch {
	case errors.Is(cause, ErrClosed):
		code, text = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(cause, ErrSlow):
		code, text = websocket.ClosePolicyViolation, "client too slow"
	}
	s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// drop removes an attachment from the session (after its Exit, or on Detach).
func (s *session) drop(a *attachment) {
	s.mu.Lock()
	if s.atts[a.t.id] == a {
		delete(s.atts, a.t.id)
	}
	for i, o := range s.order {
		if o == a {
			s.order = append(s.order[:i:i], s.order[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	a.t.detach(a)
}

func (s *session) detachAll() {
	s.svc.mu.Lock()
	if a := s.svc.agents[s.agent.ID]; a != nil {
		delete(a.sessions, s)
		s.svc.gcAgentLocked(s.agent.ID)
	}
	s.svc.mu.Unlock()
	s.mu.Lock()
	atts := s.order
	s.order, s.atts = nil, map[uint32]*attachment{}
	s.mu.Unlock()
	for _, a := range atts {
		a.t.detach(a)
	}
}

func (s *session) attachment(id uint32) *attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.atts[id]
}

// noteWatching tells a watcher (at most once a second per terminal) that its input was dropped.
func (s *session) noteWatching(id uint32) {
	a := s.attachment(id)
	if a != nil {
		a.t.mu.Lock()
		now := time.Now()
		if now.Sub(a.lastNote) < modeNoteEvery {
			a.t.mu.Unlock()
			return
		}
		a.lastNote = now
		a.t.mu.Unlock()
	}
	s.queue(Encode(ModeMsg{ID: id, Mode: ModeWatch}))
}

// handle acts on one client message.
func (s *session) handle(ctx context.Context, m Message) {
	switch m := m.(type) {
	case Open:
		// Starting a helper can take seconds (a container): do not stall this client's
		// acks and input meanwhile. Owner: Serve (opens), which waits for it.
		s.opens.Add(1)
		go func() {
			defer s.opens.Done()
			s.openTerm(ctx, m)
		}()
	case Attach:
		t := s.svc.lookup(s.agent.ID, m.ID)
		if t == nil {
			s.sendError(m.ID, ErrCodeNotFound, fmt.Sprintf("terminal %d does not exist (it ended, or belongs to another agent)", m.ID))
			return
		}
		s.attach(t, m.Since, m.Cols, m.Rows)
	case Input:
		if s.mode != ModeDrive {
			s.noteWatching(m.ID)
			return
		}
		t := s.svc.lookup(s.agent.ID, m.ID)
		if t == nil {
			s.sendError(m.ID, ErrCodeNotFound, fmt.Sprintf("terminal %d does not exist", m.ID))
			return
		}
		if len(m.Data) == 0 {
			return
		}
		if err := t.send(hInput, m.Data); err != nil {
			s.sendError(m.ID, ErrCodeHelper, fmt.Sprintf("terminal %d: input not delivered: %v", m.ID, err))
		}
	case Resize:
		if s.mode != ModeDrive {
			s.noteWatching(m.ID)
			return
		}
		a := s.attachment(m.ID)
		if a == nil {
			s.sendError(m.ID, ErrCodeNotFound, fmt.Sprintf("terminal %d: attach before resizing", m.ID))
			return
		}
		cols, rows := ClampSize(m.Cols, m.Rows)
		a.t.mu.Lock()
		a.cols, a.rows = cols, rows
		a.t.mu.Unlock()
		a.t.resizeToDrivers()
	case CloseTerminal:
		if s.mode != ModeDrive {
			s.noteWatching(m.ID)
			return
		}
		t := s.svc.lookup(s.agent.ID, m.ID)
		if t == nil {
			s.sendError(m.ID, ErrCodeNotFound, fmt.Sprintf("terminal %d does not exist", m.ID))
			return
		}
		t.finish(-1, "closed by "+s.v.Name, true)
	case ListRequest:
		s.queue(Encode(s.svc.list(s.agent.ID)))
	case Ack:
		if a := s.attachment(m.ID); a != nil {
			a.t.ack(a, m.N)
		}
	case Detach:
		if a := s.attachment(m.ID); a != nil {
			s.drop(a)
		}
	default:
		s.sendError(0, ErrCodeBadMessage, fmt.Sprintf("opcode 0x%02x is server-to-client", uint8(m.Op())))
	}
}

// attach attaches (or re-attaches) this session to t from since.
func (s *session) attach(t *term, since uint64, cols, rows uint16) {
	s.attachOpened(t, since, cols, rows, false)
}

func (s *session) attachOpened(t *term, since uint64, cols, rows uint16, opened bool) {
	s.mu.Lock()
	a := s.atts[t.id]
	if a == nil {
		a = &attachment{t: t, s: s, mode: s.mode}
		s.atts[t.id] = a
		s.order = append(s.order, a)
	}
	s.mu.Unlock()
	if cols != 0 || rows != 0 {
		cols, rows = ClampSize(cols, rows)
	}
	t.mu.Lock()
	a.cols, a.rows = cols, rows
	t.mu.Unlock()
	// Audited before the terminal's output can reach this viewer: whoever saw it is on record.
	if f := s.svc.cfg.OnAttach; f != nil {
		f(s.agent, s.v, t.id, opened)
	}
	if !t.attach(a, since) {
		s.drop(a)
		s.sendError(t.id, ErrCodeNotFound, fmt.Sprintf("terminal %d has ended", t.id))
		return
	}
	t.mu.Lock()
	title, c, r := t.title, t.cols, t.rows
	t.mu.Unlock()
	s.queue(Encode(Size{ID: t.id, Cols: c, Rows: r}))
	if title != "" {
		s.queue(Encode(Title{ID: t.id, Title: title}))
	}
	if s.mode != ModeDrive {
		s.queue(Encode(ModeMsg{ID: t.id, Mode: ModeWatch}))
	}
	s.log.Info("terminal attached", "terminal", t.id, "mode", s.mode, "since", since, "opened", opened)
}

// openTerm starts a new terminal and attaches this session to it from seq 0.
func (s *session) openTerm(ctx context.Context, m Open) {
	if s.mode != ModeDrive {
		s.sendError(0, ErrCodeWatchOnly, "you are watching this agent: only drivers can open terminals")
		return
	}
	user, err := s.svc.reserve(s.agent.ID, s.v)
	if err != nil {
		var le *limitError
		if errors.As(err, &le) {
			s.sendError(0, ErrCodeLimit, le.msg)
		} else {
			s.sendError(0, ErrCodeInternal, err.Error())
		}
		return
	}
	cols, rows := ClampSize(m.Cols, m.Rows)
	t, err := s.svc.startTerm(ctx, s.agent, cols, rows, s.v.ID)
	if err != nil {
		s.svc.unreserve(s.agent.ID, user)
		s.log.Warn("open terminal", "err", err)
		s.sendError(0, ErrCodeHelper, "agent helper unavailable: "+err.Error())
		return
	}
	svc := s.svc
	svc.mu.Lock()
	ag := svc.agentLocked(s.agent.ID)
	ag.opening--
	t.user = user
	if svc.closed {
		svc.releaseLocked(user)
		svc.mu.Unlock()
		t.finish(-1, "server shutting down", true)
		s.sendError(0, ErrCodeInternal, ErrClosed.Error())
		return
	}
	ag.terms[t.id] = t
	svc.wg.Add(1)
	svc.mu.Unlock()
	go t.run() // owner: Service (wg); exits when the stream ends or the terminal finishes
	svc.changed(s.agent.ID)

	s.queue(Encode(Opened{Tag: m.Tag, ID: t.id}))
	s.attachOpened(t, 0, m.Cols, m.Rows, true)
	svc.broadcastList(s.agent.ID)
}
