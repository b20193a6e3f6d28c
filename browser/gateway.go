//go:build !js

package browser

// The gateway half's skeleton: the Service, its per-agent browser connections (cdp.go: the
// CDP multiplexer over one helper stream), the live view (view.go: Serve) and the raw CDP
// route for the agent's own automation (cdproute.go).

import (
	"context"
	"log/slog"
	"net"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// StreamKind is the helper stream that carries one agent's CDP pipe.
const StreamKind = string(api.SurfaceBrowser)

// Viewer is who watches or drives a browser (surface.Viewer).
type Viewer = surface.Viewer

// cdpClient is one CDP client's share of an agent's browser (the live view of one agent, one
// automation WebSocket): its own message-id space, the replies to its own calls, the events
// of the sessions it attached to, and browser-wide events. The multiplexer (cdp.go) gives
// each client one; the live view (view.go) consumes it.
type cdpClient interface {
	// Send sends one CDP message: JSON with the client's own "id" and an optional
	// "sessionId" of a session this client attached to.
	Send(ctx context.Context, msg []byte) error
	// Recv returns the next reply or event for this client; it fails once the client is
	// closed or the browser is gone (crash, agent stopped).
	Recv(ctx context.Context) ([]byte, error)
	// Close detaches the client; the browser keeps running for the others.
	Close() error
}

// Surface is the browser as cmd/porthole lists it: the helper's handler of StreamKind
// (Chromium inside the sandbox) and the gateway half.
var Surface = surface.Description{
	Name:    api.SurfaceBrowser,
	Streams: map[string]surface.Handler{StreamKind: ServeHelperStream, FilesStreamKind: ServeFilesStream},
	Gateway: NewGateway,
}

// OpenFunc opens a helper stream of StreamKind to the agent's helper.
type OpenFunc func(ctx context.Context, agent api.Agent) (net.Conn, error)

// Config tunes the gateway half; zero values take defaults.
type Config struct {
	Logger *slog.Logger
	// OnCall audits an event (surface.Env.Audit).
	OnCall func(agent api.Agent, v Viewer, action, detail string)
	// OnChange, if set, is called when what Status returns for an agent may have changed
	// (status.go: the browser connected or ended, an automation connection opened or closed,
	// a new frame): surface.Env.Changed. It is called with no lock held, possibly often, and
	// must not block.
	OnChange func(agentID string)
	// Handoff is the control handoff the browser shares with the agent's desktop
	// (surface.Env.Handoff; nil = the browser's own).
	Handoff *surface.Handoff
}

// Service is the browser surface's gateway half.
type Service struct {
	cfg  Config
	open OpenFunc
	log  *slog.Logger
	// The CDP side (cdp.go) adds its fields through cdpState; the view (view.go) through
	// viewState; the dashboard's Status (status.go) through statusState.
	cdpState
	viewState
	statusState
}

var _ surface.Gateway = (*Service)(nil)

// NewService returns a Service that opens helper streams with open.
func NewService(cfg Config, open OpenFunc) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Handoff == nil {
		cfg.Handoff = surface.NewHandoff()
	}
	s := &Service{cfg: cfg, open: open, log: cfg.Logger.With("surface", "browser")}
	s.initCDP()
	s.initView()
	s.initStatus()
	return s
}

// NewGateway builds the gateway half from the server's Env (surface.Description.Gateway).
func NewGateway(env surface.Env) (surface.Gateway, error) {
	cfg := Config{Logger: env.Logger, OnChange: env.Changed, Handoff: env.Handoff}
	if env.Audit != nil {
		cfg.OnCall = func(agent api.Agent, v Viewer, action, detail string) { env.Audit(agent, v, action, detail) }
	}
	s := NewService(cfg, func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		return env.Open(ctx, agent, StreamKind)
	})
	s.openFiles = func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		return env.Open(ctx, agent, FilesStreamKind)
	}
	return s, nil
}

// Serve runs one viewer's live view (view.go).
func (s *Service) Serve(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	return s.serveView(ctx, ws, agent, v)
}

// Routes are the CDP route for the agent's own automation (cdproute.go) and the view's routes.
func (s *Service) Routes() []surface.Route {
	return append(s.cdpRoutes(), s.viewRoutes()...)
}

// CloseAgent ends the agent's browser connection and every viewer and client of it.
func (s *Service) CloseAgent(agentID string) {
	s.closeViewAgent(agentID)
	s.closeCDPAgent(agentID)
	s.statusChanged(agentID)
}

// Close ends everything on gateway shutdown and waits for the goroutines.
func (s *Service) Close() {
	s.closeView()
	s.closeCDP()
}
