// Package bridges starts an agent's in-sandbox helper through the agent's isolation backend and speaks to it.
package bridges

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/porthole/porthole/api"
)

// Sentinel errors; the gateway maps them to HTTP statuses (503, 403).
var (
	// ErrBackendUnavailable wraps the named cause (bwrap missing, user namespaces blocked, engine down, image missing).
	ErrBackendUnavailable = errors.New("backend unavailable")
	// ErrHostNotAllowed: a host agent while the server runs without --allow-host-backend.
	ErrHostNotAllowed = errors.New("host backend not allowed on this server")
	// ErrHelperVersion: the helper speaks another protocol version.
	ErrHelperVersion = errors.New("helper protocol version mismatch")
)

// Stream kinds a helper serves; surfaces add theirs (append-only).
const (
	StreamExec     = "exec"
	StreamTerminal = "terminal"
	StreamDesktop  = "desktop"
	StreamBrowser  = "browser"
)

// Config configures the Manager. TODO(bridges helper): fields may grow.
type Config struct {
	DataDir         string        // agents' homes live at DataDir/agents/<id>/home
	HelperPath      string        // the porthole binary run as the helper ("" = os.Executable)
	AllowHost       bool          // --allow-host-backend
	ContainerEngine string        // unix:///path.sock; "" = DOCKER_HOST or the default
	DefaultImage    string        // container image when an agent names none
	IdleTimeout     time.Duration // stop a helper with no open stream after this long
	Logger          *slog.Logger
}

// ProbeResult is one backend's startup/readiness probe.
type ProbeResult struct {
	Backend string `json:"backend"`
	OK      bool   `json:"ok"`
	Detail  string `json:"detail"` // the cause when !OK; what is in force (e.g. "limits: cgroup") when OK
}

// Manager owns every running helper. TODO(bridges helper): implement; signatures are the contract.
type Manager struct{}

func NewManager(cfg Config) (*Manager, error) { panic("TODO") }

// Probe checks every backend (bwrap usable, engine reachable and image present, host allowed).
func (m *Manager) Probe(ctx context.Context) []ProbeResult { panic("TODO") }

// Conn returns the agent's running helper, starting it through the agent's backend if needed.
func (m *Manager) Conn(ctx context.Context, agent api.Agent) (*Conn, error) { panic("TODO") }

// Exec runs req inside the agent's backend through its helper.
func (m *Manager) Exec(ctx context.Context, agent api.Agent, req api.ExecRequest) (api.ExecResult, error) {
	panic("TODO")
}

// Forget stops the agent's helper (and container) and, if purge, removes its home. Used on agent delete.
func (m *Manager) Forget(ctx context.Context, agentID string, purge bool) error { panic("TODO") }

// Close stops every helper.
func (m *Manager) Close() error { panic("TODO") }

// Conn is the gateway's side of one running helper.
type Conn struct{}

// Open opens a stream of the given kind to the helper; it counts as activity until closed.
func (c *Conn) Open(ctx context.Context, kind string) (net.Conn, error) { panic("TODO") }

// Done is closed when the helper has exited; Err then says why.
func (c *Conn) Done() <-chan struct{} { panic("TODO") }
func (c *Conn) Err() error            { panic("TODO") }
