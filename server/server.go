// Package server is the Porthole gateway: HTTP API, sessions, permissions, audit and WebSocket fan-out.
package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/assets"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
	"github.com/porthole/porthole/surface"
)

// Version is the gateway's version string.
var Version = "dev"

// ErrShutdown is the cause given to every session the gateway ends on Shutdown.
var ErrShutdown = errors.New("gateway shutting down")

// Bridge is what the gateway uses of *bridges.Manager.
type Bridge interface {
	Probe(ctx context.Context) []bridges.ProbeResult
	Exec(ctx context.Context, agent api.Agent, req api.ExecRequest) (api.ExecResult, error)
	Forget(ctx context.Context, agentID string, purge bool) error
	Close() error
}

var _ Bridge = (*bridges.Manager)(nil)

// streamOpener is the part of *bridges.Manager the surfaces' gateway halves need: Open starts
// the helper if needed and replaces one that idles out at that moment.
type streamOpener interface {
	Open(ctx context.Context, agent api.Agent, kind string) (net.Conn, error)
}

var _ streamOpener = (*bridges.Manager)(nil)

// Config configures the gateway.
type Config struct {
	Addr             string         // default 127.0.0.1:8080
	DataDir          string         // default ./data
	DB               string         // "" = SQLite in DataDir; postgres://... = PostgreSQL
	AllowHostBackend bool           // lets admins create host (not isolated) agents
	TrustedProxies   []netip.Prefix // only these peers may set X-Forwarded-For
	ContainerEngine  string         // unix:///path.sock ("" = DOCKER_HOST or default)
	SubnetPool       string         // bridges.Config.ContainerSubnetPool
	BlockedCIDRs     []string       // bridges.Config.BlockedCIDRs
	AdminPassword    string         // first start; "" = generate and print once
	HelperPath       string         // porthole binary used as the in-sandbox helper ("" = os.Executable())
	IdleTimeout      time.Duration  // helper idle stop
	Logger           *slog.Logger
	// Surfaces are the surfaces this gateway serves (cmd/porthole lists them); a surface of
	// api.Surfaces that is not here answers 501. Their gateway halves are built in New and
	// closed by Shutdown.
	Surfaces []surface.Description
	// Caps are the operator's caps on each surface's sessions (serve's --max-terminals*
	// flags cap the terminal's): a surface's surface.Env.Caps.
	Caps map[api.Surface]surface.Caps
	// Test seam (nil = the real bridges.Manager). Shutdown closes it either way.
	Bridge Bridge

	// AllowedOrigins are extra origins ("https://porthole.example:8443") accepted besides
	// same-origin on WebSocket upgrades and state-changing requests.
	AllowedOrigins []string
	// AllowedHosts are the Host header names served besides the defaults (the listen
	// address's host, localhost, this machine's hostname, IP literals and the hosts of
	// AllowedOrigins); other names get 421 (DNS rebinding). "*" allows any.
	AllowedHosts []string
	// Limits are the agent resource limits' defaults and maximums; Quotas what one user may hold.
	Limits LimitPolicy
	Quotas Quotas
	// AdminPasswordOut receives the generated admin password on first start (nil = os.Stderr).
	AdminPasswordOut interface{ Write([]byte) (int, error) }
}

// Server is a running gateway: its store, backends, surfaces and HTTP handler.
type Server struct {
	cfg      Config
	log      *slog.Logger
	st       *store.Store
	bridge   Bridge
	surfaces []gatewayHalf // in Config.Surfaces order
	conns    atomic.Uint64 // last surface.Viewer.Conn given out
	echo     *echo.Echo
	metrics  *metrics
	limiter  *loginGuard
	dash     *dashHub
	handoff  *surface.Handoff // one driver at a time across an agent's desktop and browser
	origins  map[string]bool
	hosts    hostAllow
	limits   LimitPolicy
	execs    *execLimiter
	now      func() time.Time

	// ctx lives until Shutdown; every WebSocket session derives from it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	sockets  map[*websocket.Conn]socketInfo // open WebSockets: closed on Shutdown or when their access changes
	closing  bool
	wsWG     sync.WaitGroup // one per WebSocket handler still running
	shutOnce sync.Once
	shutErr  error
}

// New opens and migrates the store, creates the admin on an empty store, starts the
// backend manager (failing closed if it cannot) and probes the backends.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./data"
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	origins := map[string]bool{}
	for _, o := range cfg.AllowedOrigins {
		n, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		origins[n] = true
	}
	limits, err := cfg.Limits.resolve()
	if err != nil {
		return nil, fmt.Errorf("agent limits: %w", err)
	}
	cfg.Limits, cfg.Quotas = limits, cfg.Quotas.resolve()
	hosts, err := newHostAllow(cfg.Addr, cfg.AllowedHosts, origins)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	st, err := store.Open(ctx, cfg.DB, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		st:      st,
		metrics: newMetrics(),
		limiter: newLoginGuard(),
		origins: origins,
		hosts:   hosts,
		limits:  limits,
		execs:   newExecLimiter(cfg.Quotas),
		now:     time.Now,
		sockets: map[*websocket.Conn]socketInfo{},
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.dash = newDashHub(s)
	s.handoff = surface.NewHandoff()
	fail := func(err error) (*Server, error) {
		s.cancel(err)
		s.closeSurfaces()
		if s.bridge != nil && cfg.Bridge == nil {
			s.bridge.Close()
		}
		st.Close()
		return nil, err
	}
	if err := s.ensureAdmin(ctx); err != nil {
		return fail(err)
	}
	s.reconcileProfiles(ctx)

	s.bridge = cfg.Bridge
	if s.bridge == nil {
		mgr, err := bridges.NewManager(bridges.Config{
			DataDir:             cfg.DataDir,
			HelperPath:          cfg.HelperPath,
			AllowHost:           cfg.AllowHostBackend,
			ContainerEngine:     cfg.ContainerEngine,
			IdleTimeout:         cfg.IdleTimeout,
			ContainerSubnetPool: cfg.SubnetPool,
			BlockedCIDRs:        cfg.BlockedCIDRs,
			DefaultLimits:       limits.Default,
			Logger:              cfg.Logger.With("part", "bridges"),
			BrowserProfile:      s.lentProfileID,
			OnState:             s.dash.onHelper,
		})
		if err != nil {
			return fail(fmt.Errorf("start backends: %w", err))
		}
		s.bridge = mgr
	}
	if err := s.startSurfaces(); err != nil {
		return fail(err)
	}
	for _, p := range s.bridge.Probe(ctx) {
		if p.OK {
			s.log.Info("backend ready", "backend", p.Backend, "detail", p.Detail)
		} else {
			s.log.Warn("backend unavailable", "backend", p.Backend, "cause", p.Detail)
		}
	}
	s.echo = s.routes(assets.Handler())
	return s, nil
}

// ensureAdmin creates user admin on an empty store.
func (s *Server) ensureAdmin(ctx context.Context) error {
	n, err := s.st.CountUsers(ctx)
	if err != nil {
		return fmt.Errorf("count users: %w", err)
	}
	if n > 0 {
		return nil
	}
	pw := s.cfg.AdminPassword
	generated := pw == ""
	if generated {
		pw = randomPassword()
	}
	hash, err := hashPassword(pw)
	if err != nil {
		return err
	}
	u := store.User{User: api.User{Username: "admin", Admin: true,
		Permissions: api.Permissions{Terminal: api.LevelDrive, Desktop: api.LevelDrive, Browser: api.LevelDrive}},
		PasswordHash: hash}
	if _, err := s.st.CreateUser(ctx, u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil // another process created it first
		}
		return fmt.Errorf("create admin: %w", err)
	}
	s.appendAudit(ctx, api.AuditEvent{Actor: "system", Action: "user.create", Detail: "admin (first start)"})
	if generated {
		out := s.cfg.AdminPasswordOut
		if out == nil {
			out = os.Stderr
		}
		fmt.Fprintf(out, "porthole: created user \"admin\" with password %s (shown once; change it with `porthole user passwd admin --password-stdin`)\n", pw)
	}
	s.log.Info("created admin user", "generated_password", generated)
	return nil
}

func randomPassword() string {
	b := make([]byte, 18)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Handler serves everything: /api, /healthz, /readyz, /metrics, and the web app.
func (s *Server) Handler() http.Handler { return s.echo }

// Store is the gateway's open store.
func (s *Server) Store() *store.Store { return s.st }

// Shutdown closes every WebSocket, stops the terminals and helpers, then closes the store.
// It waits for WebSocket handlers until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		socks := make([]*websocket.Conn, 0, len(s.sockets))
		for ws := range s.sockets {
			socks = append(socks, ws)
		}
		s.mu.Unlock()
		// Tell every client first (WriteControl and Close may run concurrently with the
		// session's one writer), then end the sessions.
		deadline := time.Now().Add(time.Second)
		for _, ws := range socks {
			ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), deadline)
		}
		s.dash.close()
		s.cancel(ErrShutdown)
		s.closeSurfaces()
		for _, ws := range socks {
			ws.Close()
		}
		done := make(chan struct{})
		go func() { s.wsWG.Wait(); close(done) }() // exits when the last WebSocket handler returns
		var errs []error
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("wait for websockets: %w", context.Cause(ctx)))
		}
		if err := s.bridge.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop helpers: %w", err))
		}
		if err := s.st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		s.shutErr = errors.Join(errs...)
	})
	return s.shutErr
}

// gatewayHalf is one registered surface's gateway half.
type gatewayHalf struct {
	name api.Surface
	gw   surface.Gateway
}

// startSurfaces builds the gateway half of every surface in Config.Surfaces.
func (s *Server) startSurfaces() error {
	for _, d := range s.cfg.Surfaces {
		if !slices.Contains(api.Surfaces, d.Name) {
			return fmt.Errorf("surface %q: not one of the API's surfaces %v", d.Name, api.Surfaces)
		}
		if s.surfaceOf(d.Name) != nil {
			return fmt.Errorf("surface %q is listed twice", d.Name)
		}
		if d.Gateway == nil {
			continue
		}
		gw, err := d.Gateway(s.surfaceEnv(d.Name))
		if err != nil {
			return fmt.Errorf("start the %s surface: %w", d.Name, err)
		}
		s.surfaces = append(s.surfaces, gatewayHalf{name: d.Name, gw: gw})
	}
	return nil
}

// surfaceOf is the gateway half of sf, or nil when it is not registered.
func (s *Server) surfaceOf(sf api.Surface) surface.Gateway {
	for _, h := range s.surfaces {
		if h.name == sf {
			return h.gw
		}
	}
	return nil
}

// closeSurfaces closes every gateway half, the last registered first.
func (s *Server) closeSurfaces() {
	for _, h := range slices.Backward(s.surfaces) {
		h.gw.Close()
	}
}

// surfaceEnv is what the gateway gives the gateway half of sf.
func (s *Server) surfaceEnv(sf api.Surface) surface.Env {
	env := surface.Env{
		Open: func(ctx context.Context, agent api.Agent, kind string) (net.Conn, error) {
			return nil, fmt.Errorf("open a %s stream: this gateway's backend cannot open helper streams", kind)
		},
		Audit: func(agent api.Agent, v surface.Viewer, action, detail string) {
			actor := v.Name
			if v.Token != "" {
				actor = "token:" + v.Token
			}
			s.appendAudit(s.ctx, api.AuditEvent{Actor: actor, Action: string(sf) + "." + action, AgentID: agent.ID,
				Surface: sf, Mode: v.Mode, Detail: detail})
		},
		Logger:  s.log.With("part", string(sf)),
		Changed: s.dash.surfaceChanged,
		Handoff: s.handoff,
	}
	if o, ok := s.bridge.(streamOpener); ok {
		env.Open = func(ctx context.Context, agent api.Agent, kind string) (net.Conn, error) {
			return o.Open(ctx, s.clampLimits(agent), kind)
		}
	}
	env.Caps = s.cfg.Caps[sf]
	return env
}
