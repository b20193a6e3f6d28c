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

// StreamKind is the helper stream that carries one agent's display (bridges.StreamDesktop).
const StreamKind = string(api.SurfaceDesktop)

// Config configures the desktop surface's gateway half. Zero fields take the defaults.
type Config struct {
	// Grace keeps an agent's helper stream open this long after its last viewer or API call
	// left (default 30 s), so that a reload or the next computer-use step finds it warm.
	Grace time.Duration
	// Window is how many frames a viewer may have unacknowledged (default 2). Meanwhile the
	// gateway only marks the tiles that changed: a slow viewer costs no memory over time.
	Window int
	// MaxModelBytes bounds the encoded screen the gateway keeps per agent (default 96 MiB):
	// a helper that goes over it is cut off.
	MaxModelBytes int
	// MaxWait caps the computer-use "wait" action (default 10 s).
	MaxWait time.Duration
	// AgentHold is how long the agent's API keeps showing as the driver after its last
	// input action (default 5 s). A person may take control from the agent at any time.
	AgentHold time.Duration
	// OnCall, if set, audits every computer-use call (screenshot and actions, refused ones
	// included): action is "screenshot" or "action", detail says what and how it ended.
	// It may block briefly (the audit log write); it is never called with a lock held.
	OnCall func(agent api.Agent, v Viewer, action, detail string)
	// OnChange, if set, is told that the agent's Status (the dashboard) may have changed: a
	// hub started or ended, a frame was committed (surface.Env.Changed). It must not block.
	OnChange func(agentID string)
	// Handoff is the control handoff the desktop shares with the agent's browser
	// (surface.Env.Handoff; nil = the desktop's own).
	Handoff *surface.Handoff
	Logger  *slog.Logger
}

// Defaults.
const (
	DefaultGrace         = 30 * time.Second
	DefaultWindow        = 2
	DefaultMaxModelBytes = 96 << 20
	DefaultMaxWait       = 10 * time.Second
	DefaultAgentHold     = 5 * time.Second
)

const (
	tileSize          = 64       // the gateway's grid over the screen
	maxPendingRects   = 1 << 14  // rects in one helper frame
	maxPendingBytes   = 64 << 20 // bytes of rects in one helper frame
	maxDerived        = 1 << 16  // ClipRects the copies of one helper frame may add to the model
	recentFrames      = 16       // helper frames kept to replay to a viewer a few frames behind
	recentBytes       = 8 << 20  // … and their bytes (the newest frame is always kept)
	helperQueue       = 256      // frames queued to the helper's stream
	maxShotsInFlight  = 8        // screenshot requests per agent
	maxErrQueue       = 32       // error frames queued per viewer (more are dropped)
	noteEvery         = time.Second
	lagEvery          = 200 * time.Millisecond
	openTimeout       = 60 * time.Second
	shotTimeout       = 30 * time.Second
	helperWriteTimout = 10 * time.Second
	viewerReadLimit   = MaxClipboard + 64
)

// Sentinel errors. The server's routes map them to HTTP statuses (see HTTPStatus).
var (
	// ErrClosed: the service was closed (gateway shutdown).
	ErrClosed = errors.New("desktop service closed")
	// ErrHelper: the agent's helper could not be reached, or its desktop stream ended.
	ErrHelper = errors.New("desktop helper unavailable")
	// ErrBadHelper: the helper sent a malformed frame; its stream was ended.
	ErrBadHelper = errors.New("desktop helper sent a bad frame")
	// ErrBadAction: a computer-use request is invalid (400).
	ErrBadAction = errors.New("bad desktop action")
	// ErrControlHeld: a person holds control of the display; agent input is refused (409).
	ErrControlHeld = errors.New("a person holds control of the desktop")
	// ErrWatchOnly: the caller may only watch this desktop (403).
	ErrWatchOnly = errors.New("watch-only access to the desktop")
	// ErrBusy: too many screenshots in flight for one agent (503).
	ErrBusy = errors.New("desktop busy")
	// ErrTimeout: the helper did not answer in time (504).
	ErrTimeout = errors.New("desktop helper did not answer in time")
	// errIdle ends a hub once nobody used it for Config.Grace.
	errIdle = errors.New("desktop idle")
)

// ControlHeldError is ErrControlHeld naming who holds control.
type ControlHeldError struct{ Holder string }

func (e *ControlHeldError) Error() string {
	return fmt.Sprintf("%s holds control of this desktop: agent input is refused until they release it", e.Holder)
}

// Is makes errors.Is(err, ErrControlHeld) true.
func (e *ControlHeldError) Is(target error) bool { return target == ErrControlHeld }

// OpenFunc opens a desktop stream to the agent's helper, starting the helper if needed
// (bridges.Manager.Open(ctx, agent, bridges.StreamDesktop)).
type OpenFunc func(ctx context.Context, agent api.Agent) (net.Conn, error)

// Viewer is who is on the other end of a WebSocket or an API call (surface.Viewer). The
// desktop reads ID and Name (shown to others), Mode (watchers' input is dropped), Token
// (an agent token is never a person) and Admin; the agent's owner is v.ID == agent.OwnerID.
type Viewer = surface.Viewer

// ModeOf maps a granted level to the wire's Mode.
func ModeOf(l api.Level) Mode {
	if l.AtLeast(api.LevelDrive) {
		return ModeDrive
	}
	return ModeWatch
}

// Service is the desktop surface's gateway half: one hub per agent in use, its viewers,
// control, and the computer-use API.
type Service struct {
	cfg    Config
	open   OpenFunc
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelCauseFunc

	hubs *surface.Hubs[*hub] // owns the hubs' goroutines

	status statusState // the dashboard's (status.go)
}

var _ surface.Gateway = (*Service)(nil)

// NewService returns a Service that opens helper streams with open.
func NewService(cfg Config, open OpenFunc) *Service {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxModelBytes <= 0 {
		cfg.MaxModelBytes = DefaultMaxModelBytes
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.AgentHold <= 0 {
		cfg.AgentHold = DefaultAgentHold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Handoff == nil {
		cfg.Handoff = surface.NewHandoff()
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Service{cfg: cfg, open: open, log: cfg.Logger.With("surface", "desktop"),
		ctx: ctx, cancel: cancel, hubs: surface.NewHubs[*hub](func() time.Duration { return cfg.Grace }, errIdle)}
}

// Surface is the desktop as cmd/porthole lists it: the helper's handler of StreamKind
// (Xvfb, capture, input: helper_linux.go) and the gateway half.
var Surface = surface.Description{
	Name:    api.SurfaceDesktop,
	Streams: map[string]surface.Handler{StreamKind: ServeHelperStream},
	Gateway: NewGateway,
}

// NewGateway builds the gateway half from the server's Env (surface.Description.Gateway).
func NewGateway(env surface.Env) (surface.Gateway, error) {
	cfg := Config{Logger: env.Logger, OnChange: env.Changed, Handoff: env.Handoff}
	if env.Audit != nil {
		cfg.OnCall = func(agent api.Agent, v Viewer, action, detail string) { env.Audit(agent, v, action, detail) }
	}
	return NewService(cfg, func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		return env.Open(ctx, agent, StreamKind)
	}), nil
}

// acquire returns a use of the agent's hub, starting it (and its helper stream) if needed;
// the caller releases it.
func (s *Service) acquire(agent api.Agent) (*surface.HubUse[*hub], error) {
	u, ok := s.hubs.Acquire(agent.ID, func() *hub {
		h := newHub(s, agent)
		h.stopWatch = s.cfg.Handoff.Watch(agent.ID, h.syncHandoff)
		h.syncHandoff()
		return h
	})
	if !ok {
		return nil, ErrClosed
	}
	return u, nil
}

// Routes are the computer-use API: GET screenshot and POST actions (actions.go), both at drive
// level as the public API says (a watcher sees the screen through the viewer's WebSocket).
func (s *Service) Routes() []surface.Route {
	return []surface.Route{
		{Method: "GET", Path: "screenshot", Level: api.LevelDrive, HTTP: s.serveScreenshot},
		{Method: "POST", Path: "actions", Level: api.LevelDrive, HTTP: s.serveAction},
	}
}

// CloseAgent ends the agent's desktop: its helper stream and every viewer of it.
func (s *Service) CloseAgent(agentID string) {
	s.hubs.End(agentID, fmt.Errorf("%w: the agent was stopped", ErrHelper))
}

// Close ends every hub and viewer and waits for the hubs' goroutines. Serve calls in
// flight return soon after (their sessions end with ErrClosed).
func (s *Service) Close() {
	s.cancel(ErrClosed)
	s.hubs.Close(ErrClosed)
}

// Serve runs one viewer's WebSocket until it closes or ctx ends; the server has
// authenticated, authorized (at least watch) and upgraded it. It is the only writer of ws
// (through the session's writer goroutine, which it owns and waits for). It returns nil
// when the viewer closed normally.
func (s *Service) Serve(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopSvc := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	defer stopSvc()

	use, err := s.acquire(agent)
	if err != nil {
		return err
	}
	defer use.Release()
	h := use.Hub
	sess := newSession(h, ws, v, cancel)
	if err := h.join(sess); err != nil {
		code := ErrCodeHelper
		if !errors.Is(err, ErrHelper) && !errors.Is(err, ErrBadHelper) {
			code = ErrCodeInternal
		}
		ws.SetWriteDeadline(time.Now().Add(time.Second))
		ws.WriteMessage(websocket.BinaryMessage, Encode(ErrorMsg{Code: code, Message: err.Error()}))
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, err.Error()), time.Now().Add(time.Second))
		return err
	}
	defer h.leave(sess)

	sess.log.Debug("desktop viewer connected", "mode", sess.mode)
	err = sess.conn.Serve(ctx, cancel, surface.ViewerLoop{
		ReadLimit: viewerReadLimit, ReuseBuffer: true, // a viewer's messages are small, mostly Acks
		Flush: sess.flush, Close: sess.closeWS,
		Text: func() {
			sess.queueErr(ErrCodeBadMessage, "text messages are not part of the desktop protocol; send binary frames")
		},
		Frame: func(data []byte) {
			m, err := Decode(data)
			if err != nil {
				sess.queueErr(ErrCodeBadMessage, err.Error())
				return
			}
			h.handle(ctx, sess, m)
		},
	})
	sess.log.Debug("desktop viewer disconnected", "cause", context.Cause(ctx))
	return err
}
