//go:build !js

package terminal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// Config configures the gateway side of the terminal surface. Zero fields take the defaults.
type Config struct {
	Scrollback  int           // bytes of scrollback per terminal (default 1 MiB)
	IdleTimeout time.Duration // a terminal with no attached client ends after this long (0 = never)
	MaxPerAgent int           // open terminals per agent (default 8)
	MaxTotal    int           // open terminals per server (default 64)
	// MaxPerUser bounds the open terminals one user account opened, over all agents
	// (default 16; an agent token counts for its agent's owner, see Viewer.User).
	MaxPerUser int
	// AdminReserve of the MaxTotal terminals only admins may open (default MaxTotal/8, at
	// most MaxTotal-1; negative = none): non-admins together never take the last AdminReserve.
	AdminReserve int
	Logger       *slog.Logger

	// Window is the flow-control window: bytes of Output a client may have unacknowledged
	// per terminal (default 256 KiB).
	Window int
	// HighWater: the gateway stops reading a terminal's helper stream while the fastest
	// attached client is more than this many bytes behind (default 512 KiB, at most Scrollback).
	HighWater int
	// OnAttach, if set, is called on every attach (including the opener's), e.g. for the
	// audit log. It must not block.
	OnAttach func(agent api.Agent, v Viewer, terminalID uint32, opened bool)
	// OnChange, if set, is called when what Status returns for an agent may have changed: a
	// terminal opened or ended, output arrived (surface.Env.Changed). It is called with no
	// lock held, possibly very often, and must not block.
	OnChange func(agentID string)
}

// Defaults.
const (
	DefaultScrollback  = 1 << 20
	DefaultMaxPerAgent = 8
	DefaultMaxTotal    = 64
	DefaultMaxPerUser  = 16
	DefaultWindow      = 256 << 10
	DefaultHighWater   = 512 << 10
)

const (
	maxOutputFrame = 64 << 10 // bytes of data per Output frame
	ctrlQueueMax   = 4096     // queued control frames before a client counts as too slow
	writeTimeout   = 30 * time.Second
	openTimeout    = 60 * time.Second
	modeNoteEvery  = time.Second
	readLimit      = MaxInputLen + 64
)

// Sentinel errors.
var (
	// ErrClosed: the service was closed.
	ErrClosed = errors.New("terminal service closed")
	// ErrSlow: a client fell ctrlQueueMax control frames behind and was dropped.
	ErrSlow = errors.New("terminal client too slow")
	// ErrHelperExited is the Exit reason when the agent's helper died.
	ErrHelperExited = errors.New("agent helper exited")
)

// OpenFunc opens a terminal stream to the agent's helper (bridges.Manager.Conn + Open(StreamTerminal)).
type OpenFunc func(ctx context.Context, agent api.Agent) (net.Conn, error)

// Viewer is who is on the other end of a WebSocket, with the level the gateway granted:
// surface.Viewer, shared by every surface. The terminal reads ID and Name (shown to the
// other viewers), Mode (watchers' input is dropped here), User (the account its terminals
// count against, Config.MaxPerUser; "" = ID) and Admin (may use Config.AdminReserve, not
// held to MaxPerUser).
type Viewer = surface.Viewer

// Service is the gateway side: terminals of all agents, their scrollback and their viewers.
type Service struct {
	cfg    Config
	open   OpenFunc
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	agents map[string]*agentTerms
	total  int            // open and opening terminals
	users  map[string]int // open and opening terminals per Viewer.User
	nextID uint32
	closed bool

	wg sync.WaitGroup // terminal reader goroutines
}

// agentTerms is one agent's terminals and connected sessions (guarded by Service.mu).
type agentTerms struct {
	terms    map[uint32]*term
	opening  int
	sessions map[*session]struct{}
}

// NewService returns a Service that opens helper streams with open.
func NewService(cfg Config, open OpenFunc) *Service {
	if cfg.Scrollback <= 0 {
		cfg.Scrollback = DefaultScrollback
	}
	if cfg.MaxPerAgent <= 0 {
		cfg.MaxPerAgent = DefaultMaxPerAgent
	}
	if cfg.MaxTotal <= 0 {
		cfg.MaxTotal = DefaultMaxTotal
	}
	if cfg.MaxPerUser <= 0 {
		cfg.MaxPerUser = DefaultMaxPerUser
	}
	switch {
	case cfg.AdminReserve == 0:
		cfg.AdminReserve = cfg.MaxTotal / 8
	case cfg.AdminReserve < 0:
		cfg.AdminReserve = 0
	}
	cfg.AdminReserve = min(cfg.AdminReserve, cfg.MaxTotal-1)
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.HighWater <= 0 {
		cfg.HighWater = DefaultHighWater
	}
	cfg.HighWater = min(cfg.HighWater, cfg.Scrollback)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Service{
		cfg: cfg, open: open, log: cfg.Logger.With("surface", "terminal"),
		ctx: ctx, cancel: cancel,
		agents: map[string]*agentTerms{},
		users:  map[string]int{},
		// Ids start at a random point so that a client reconnecting after a gateway
		// restart does not resume a different terminal that reuses its old id.
		nextID: rand.Uint32N(1 << 30),
	}
}

func (s *Service) agentLocked(id string) *agentTerms {
	a := s.agents[id]
	if a == nil {
		a = &agentTerms{terms: map[uint32]*term{}, sessions: map[*session]struct{}{}}
		s.agents[id] = a
	}
	return a
}

func (s *Service) gcAgentLocked(id string) {
	if a := s.agents[id]; a != nil && len(a.terms) == 0 && a.opening == 0 && len(a.sessions) == 0 {
		delete(s.agents, id)
	}
}

// broadcast queues a frame to every session of an agent.
func (s *Service) broadcast(agentID string, frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[agentID]; a != nil {
		for sess := range a.sessions {
			sess.queue(frame)
		}
	}
}

// list returns the agent's terminals, by id.
func (s *Service) list(agentID string) List {
	s.mu.Lock()
	var ts []*term
	if a := s.agents[agentID]; a != nil {
		for _, t := range a.terms {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(ts, func(a, b *term) int { return int(a.id) - int(b.id) })
	l := List{Terminals: []TermInfo{}}
	for _, t := range ts {
		l.Terminals = append(l.Terminals, t.info())
	}
	return l
}

func (s *Service) broadcastList(agentID string) { s.broadcast(agentID, Encode(s.list(agentID))) }

// lookup finds an agent's terminal.
func (s *Service) lookup(agentID string, id uint32) *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[agentID]; a != nil {
		return a.terms[id]
	}
	return nil
}

// limitError says which cap an Open hit.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// userKey is the account v's terminals count against.
func userKey(v Viewer) string {
	if v.User != "" {
		return v.User
	}
	return v.ID
}

// reserve counts an opening terminal against the caps: per agent, per user (admins exempt),
// and per server, where non-admins leave the last AdminReserve terminals to admins. It
// returns the user key the terminal counts against (for release).
func (s *Service) reserve(agentID string, v Viewer) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	user := userKey(v)
	a := s.agentLocked(agentID)
	if n := len(a.terms) + a.opening; n >= s.cfg.MaxPerAgent {
		return "", &limitError{fmt.Sprintf("terminal limit reached: this agent already has %d open terminals (max %d per agent); close one first", n, s.cfg.MaxPerAgent)}
	}
	if n := s.users[user]; !v.Admin && n >= s.cfg.MaxPerUser {
		return "", &limitError{fmt.Sprintf("terminal limit reached: you already have %d open terminals (max %d per user, over all agents); close one first", n, s.cfg.MaxPerUser)}
	}
	if r := s.cfg.AdminReserve; !v.Admin && r > 0 && s.total >= s.cfg.MaxTotal-r {
		return "", &limitError{fmt.Sprintf("terminal limit reached: the server has %d open terminals (max %d per server, the last %d kept for admins)", s.total, s.cfg.MaxTotal, r)}
	}
	if s.total >= s.cfg.MaxTotal {
		return "", &limitError{fmt.Sprintf("terminal limit reached: the server has %d open terminals (max %d per server)", s.total, s.cfg.MaxTotal)}
	}
	a.opening++
	s.total++
	s.users[user]++
	return user, nil
}

// releaseLocked frees one terminal's server-wide and per-user slots; callers hold mu.
func (s *Service) releaseLocked(user string) {
	s.total--
	if s.users[user]--; s.users[user] <= 0 {
		delete(s.users, user)
	}
}

func (s *Service) unreserve(agentID, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agentLocked(agentID)
	a.opening--
	s.releaseLocked(user)
	s.gcAgentLocked(agentID)
}

// startTerm opens a helper stream and starts a shell of the given size; the caller has reserved.
func (s *Service) startTerm(ctx context.Context, agent api.Agent, cols, rows uint16, by string) (*term, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	stream, err := s.open(ctx, agent)
	if err != nil {
		return nil, fmt.Errorf("open terminal stream: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { stream.SetDeadline(time.Now()) })
	rd := newHReader(stream)
	_, err = stream.Write(appendHFrame(nil, hStart, sizePayload(cols, rows)))
	var typ byte
	var p []byte
	if err == nil {
		typ, p, err = rd.next()
	}
	if !stop() {
		err = fmt.Errorf("start terminal: %w", context.Cause(ctx))
	}
	stream.SetDeadline(time.Time{})
	if err == nil {
		switch {
		case typ == hError && len(p) >= 2:
			err = fmt.Errorf("start terminal: %s", p[2:])
		case typ != hStarted || len(p) != 4:
			err = fmt.Errorf("start terminal: unexpected reply type %d from the helper", typ)
		}
	} else {
		err = fmt.Errorf("start terminal: %w", err)
	}
	if err != nil {
		stream.Close()
		return nil, err
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	t := &term{
		id: id, agentID: agent.ID, svc: s, stream: stream, rd: rd,
		cols: cols, rows: rows,
		log: s.log.With("agent", agent.ID, "terminal", id, "pid", binary.BigEndian.Uint32(p)),
	}
	t.cond.L = &t.mu
	t.ring.size = s.cfg.Scrollback
	t.log.Info("terminal opened", "by", by)
	return t, nil
}

// changed reports a possible change of the agent's Status (Config.OnChange).
func (s *Service) changed(agentID string) {
	if f := s.cfg.OnChange; f != nil {
		f(agentID)
	}
}

// Status is the agent's terminals for the dashboard (surface.StatusReporter): how many are
// open, and the last lines of the one with the latest output.
func (s *Service) Status(agentID string) surface.Status {
	s.mu.Lock()
	var ts []*term
	if a := s.agents[agentID]; a != nil {
		for _, t := range a.terms {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	st := surface.Status{Sessions: len(ts)}
	var best *term
	for _, t := range ts {
		t.mu.Lock()
		at := t.lastOut
		t.mu.Unlock()
		if best == nil || at.After(st.Active) || (at.Equal(st.Active) && t.id > best.id) {
			best, st.Active = t, at
		}
	}
	if best != nil {
		out, partial, cols, rows := best.tail(thumbTail)
		st.Lines = thumbLines(out, partial, int(cols), int(rows), thumbMaxLines, thumbWidth)
	}
	return st
}

var _ surface.StatusReporter = (*Service)(nil)

// Routes: the terminal has no routes besides its WebSocket.
func (s *Service) Routes() []surface.Route { return nil }

// CloseAgent ends every terminal of an agent (agent deleted or helper stopped).
func (s *Service) CloseAgent(agentID string) {
	s.mu.Lock()
	var ts []*term
	if a := s.agents[agentID]; a != nil {
		for _, t := range a.terms {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	for _, t := range ts {
		t.finish(-1, "agent stopped", true)
	}
}

// Close ends every terminal and every session, and waits for the terminals' goroutines.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	var ts []*term
	for _, a := range s.agents {
		for _, t := range a.terms {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	for _, t := range ts {
		t.finish(-1, "server shutting down", true)
	}
	s.cancel(ErrClosed)
	s.wg.Wait()
}

// Serve runs one client's WebSocket until it closes or ctx ends; the server has already
// authenticated, authorized and upgraded it. It is the only writer of ws (through the
// session's writer goroutine, which it owns and waits for). It returns nil when the
// client closed normally.
func (s *Service) Serve(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopSvc := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	defer stopSvc()

	sess := &session{
		svc: s, agent: agent, v: v, mode: ModeOf(v.Mode), ws: ws, conn: surface.NewViewerConn(ws), cancel: cancel,
		atts: map[uint32]*attachment{},
		log:  s.log.With("agent", agent.ID, "viewer", v.ID),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.agentLocked(agent.ID).sessions[sess] = struct{}{}
	s.mu.Unlock()
	defer sess.detachAll()
	// Opens in flight finish (or fail, ctx being done) before the session detaches.
	defer sess.opens.Wait()

	sess.queue(Encode(Hello{Version: ProtocolVersion, Mode: sess.mode, Window: uint32(s.cfg.Window), ViewerID: v.ID, ViewerName: v.Name}))
	sess.queue(Encode(s.list(agent.ID)))

	sess.log.Debug("terminal client connected", "mode", sess.mode)
	err := sess.conn.Serve(ctx, cancel, surface.ViewerLoop{
		ReadLimit: readLimit,
		Flush:     sess.flush, Close: sess.closeWS,
		Text: func() {
			sess.sendError(0, ErrCodeBadMessage, "text messages are not part of the terminal protocol; send binary frames")
		},
		Frame: func(data []byte) {
			m, err := Decode(data)
			if err != nil {
				sess.sendError(0, ErrCodeBadMessage, err.Error())
				return
			}
			sess.handle(ctx, m)
		},
	})
	sess.log.Debug("terminal client disconnected", "cause", context.Cause(ctx))
	return err
}
