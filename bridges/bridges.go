// Package bridges starts an agent's in-sandbox helper through the agent's isolation backend and speaks to it.
package bridges

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
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

// ErrHelperGone: the agent's helper has exited (crashed, idle-stopped, or the Manager closed);
// Conn.Err wraps it with the cause. The next Manager.Conn starts a new helper.
var ErrHelperGone = errors.New("helper gone")

// Config configures the Manager.
type Config struct {
	DataDir         string        // agents' homes live at DataDir/agents/<id>/home
	HelperPath      string        // the porthole binary run as the helper ("" = os.Executable)
	AllowHost       bool          // --allow-host-backend
	ContainerEngine string        // unix:///path.sock; "" = DOCKER_HOST or the default
	DefaultImage    string        // container image when an agent names none ("" = porthole-agent:latest)
	IdleTimeout     time.Duration // stop a helper with no open stream after this long (0 = 15 min)
	Logger          *slog.Logger

	BwrapPath     string     // bubblewrap binary ("" = "bwrap" looked up in PATH at each launch)
	CgroupRoot    string     // cgroup v1 mount root ("" = /sys/fs/cgroup; "none" = never use cgroups, rlimits only)
	Cgroup2Dir    string     // delegated cgroup v2 group for the agents' groups ("" = the gateway's own group, used if it offers memory or pids; "none" = not v2)
	DiskMode      string     // home size limit: DiskImage, DiskCheck, "" = DiskImage where it works, else DiskCheck
	Instance      string     // names this gateway's containers and cgroups ("" = derived from DataDir)
	DefaultLimits api.Limits // per-agent limits where an agent sets none (zero fields = DefaultLimits)

	DiskCheckInterval time.Duration // how often DiskCheck measures a running agent's home (0 = DefaultDiskCheckInterval)

	// Network: container agents' networks get their subnets from ContainerSubnetPool (IPv4 CIDR,
	// one /24 per agent; "" = DefaultContainerSubnetPool), and every network-"full" bwrap jail has
	// an unreachable route for the pool and for each of BlockedCIDRs (other host-side networks no
	// jail may reach, e.g. a Docker Engine's own default networks; default none).
	ContainerSubnetPool string
	BlockedCIDRs        []string

	// OnState, if set, is told every change of an agent's helper (the dashboard shows it). It
	// is called with the Manager's locks held, in order per agent: it must not block or call
	// back into the Manager.
	OnState func(agentID string, st HelperState)

	// BrowserProfile, if set, says which person's browser profile is lent to an agent (its id;
	// "" = none, the browser uses the agent's own profile). It is asked each time the agent's
	// helper starts; the profile's directory, ProfileDir(DataDir, id), is then bound read-write
	// at ProfileMountPath in the sandbox (profile.go). An error fails the start.
	BrowserProfile func(ctx context.Context, agentID string) (string, error)
}

// Helper states reported through Config.OnState.
const (
	HelperStarting = "starting" // the backend is starting the helper
	HelperRunning  = "running"  // the helper runs with streams open
	HelperIdle     = "idle"     // the helper runs with no stream open (it stops after IdleTimeout)
	HelperStopped  = "stopped"  // no helper: it exited, was stopped, or could not start
)

// HelperState is one change of an agent's helper.
type HelperState struct {
	State   string // HelperStarting, HelperRunning, HelperIdle, HelperStopped
	Streams int    // open streams (HelperRunning)
	// Err, with HelperStopped, says why when nobody asked for it: the helper could not start
	// (it wraps ErrBackendUnavailable when the backend is down) or exited on its own. nil after
	// an idle stop, a backend change, Forget or Close.
	Err error
}

// Default values.
const (
	DefaultImage       = "porthole-agent:latest"
	DefaultIdleTimeout = 15 * time.Minute
)

// DefaultLimits apply where neither the agent nor Config.DefaultLimits set a limit.
var DefaultLimits = api.Limits{Pids: 512, MemoryMiB: 2048, CPUPct: 100, DiskMiB: 10240}

// ProbeResult is one backend's startup/readiness probe.
type ProbeResult struct {
	Backend string `json:"backend"`
	OK      bool   `json:"ok"`
	Detail  string `json:"detail"` // the cause when !OK; what is in force (e.g. "limits: cgroup") when OK
}

// Manager owns every running helper: at most one per agent, started through the agent's backend.
type Manager struct {
	cfg       Config
	logger    *slog.Logger
	instance  string
	launchers map[string]Launcher
	container *containerLauncher
	disk      *homeDisk

	mu       sync.Mutex
	slots    map[string]*slot
	profiles map[string]*profileHold // lent browser profiles in running sandboxes, by profile id (profile.go)
	closed   bool

	probeMu  sync.Mutex // serialises probes; guards probed, probedAt
	probed   []ProbeResult
	probedAt time.Time
}

// slot serialises starting and stopping one agent's helper.
type slot struct {
	mu      sync.Mutex
	conn    *Conn
	backend string // the backend type last used by the agent (for Forget)
}

// AgentHome is where an agent's home lives on the host.
func AgentHome(dataDir, agentID string) string {
	return filepath.Join(dataDir, "agents", agentID, "home")
}

// InstanceFor derives a gateway instance name from its data directory (stable across restarts).
func InstanceFor(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(sum[:5])
}

// NewManager prepares the backends. It starts nothing; a container engine that is down is
// reported by Probe and by each Conn, not here. Containers left over by a previous gateway
// process of the same instance are removed now when the engine is reachable (else at first use).
func NewManager(cfg Config) (*Manager, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("bridges: DataDir is required")
	}
	dd, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("bridges: data dir: %w", err)
	}
	cfg.DataDir = dd
	if err := os.MkdirAll(filepath.Join(dd, "agents"), 0o700); err != nil {
		return nil, fmt.Errorf("bridges: create agents dir: %w", err)
	}
	if err := os.Chmod(filepath.Join(dd, "agents"), 0o700); err != nil {
		return nil, fmt.Errorf("bridges: agents dir: %w", err)
	}
	if cfg.HelperPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bridges: helper path: %w", err)
		}
		cfg.HelperPath = exe
	}
	if hp, err := filepath.EvalSymlinks(cfg.HelperPath); err == nil {
		cfg.HelperPath = hp
	}
	if hp, err := filepath.Abs(cfg.HelperPath); err == nil {
		cfg.HelperPath = hp
	}
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = DefaultImage
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Instance == "" {
		cfg.Instance = InstanceFor(dd)
	}
	if !agentIDRe.MatchString(cfg.Instance) {
		return nil, fmt.Errorf("bridges: instance %q: %w", cfg.Instance, ErrBadAgentID)
	}
	m := &Manager{
		cfg:       cfg,
		logger:    cfg.Logger.With("component", "bridges", "instance", cfg.Instance),
		instance:  cfg.Instance,
		launchers: map[string]Launcher{},
		slots:     map[string]*slot{},
		profiles:  map[string]*profileHold{},
	}
	var cg *cgroups
	var cg2 *cgroup2
	if cfg.CgroupRoot != "none" && cfg.Cgroup2Dir != "none" {
		if cg2, err = newCgroup2(cfg.Cgroup2Dir, cfg.Instance, cfg.Cgroup2Dir != ""); err != nil {
			if cfg.Cgroup2Dir != "" {
				return nil, fmt.Errorf("bridges: cgroup v2: %w", err)
			}
			m.logger.Info("no delegated cgroup v2 subtree", "cause", err)
			cg2 = nil
		} else if n, err := cg2.reconcile(); err != nil {
			m.logger.Warn("cgroups left over by a previous gateway", "err", err)
		} else if n > 0 {
			m.logger.Info("removed cgroups left over by a previous gateway", "agents", n)
		}
	}
	if cfg.CgroupRoot != "none" && cg2 == nil {
		if cg, err = newCgroups(cfg.CgroupRoot, cfg.Instance); err != nil {
			m.logger.Info("cgroups not usable; bwrap jails get rlimits", "cause", err)
			cg = nil
		} else if n, err := cg.reconcile(); err != nil {
			m.logger.Warn("cgroups left over by a previous gateway", "err", err)
		} else if n > 0 {
			m.logger.Info("removed cgroups left over by a previous gateway", "agents", n)
		}
	}
	if m.disk, err = newHomeDisk(cfg.DiskMode, dd, cfg.DiskCheckInterval, m.logger); err != nil {
		return nil, fmt.Errorf("bridges: %w", err)
	}
	if n := m.disk.reconcile(); n > 0 {
		m.logger.Info("unmounted home images left mounted by a previous gateway", "agents", n)
	}
	pool, blocked, err := netBlocks(cfg.ContainerSubnetPool, cfg.BlockedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("bridges: %w", err)
	}
	m.launchers[api.BackendBwrap] = &bwrapLauncher{bwrap: cfg.BwrapPath, helper: cfg.HelperPath, cg: cg, cg2: cg2, diskDetail: m.disk.describe(), diskFsize: m.disk.mode == DiskCheck, logger: m.logger, blocked: blocked}
	m.container = &containerLauncher{engine: cfg.ContainerEngine, image: cfg.DefaultImage, helper: cfg.HelperPath, instance: cfg.Instance, logger: m.logger, pool: pool}
	m.launchers[api.BackendContainer] = m.container
	if cfg.AllowHost {
		m.launchers[api.BackendHost] = &hostLauncher{helper: cfg.HelperPath}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if n, err := m.container.Reconcile(ctx); err != nil {
		m.logger.Info("container leftovers not reconciled yet", "cause", err)
	} else if n > 0 {
		m.logger.Info("removed containers left over by a previous gateway", "count", n)
	}
	return m, nil
}

// Instance is the name this gateway's containers and cgroups carry.
func (m *Manager) Instance() string { return m.instance }

// ProbeInterval is how long Probe results are reused: /readyz is public, and each probe starts a
// real (minimal) jail and pings the engine.
const ProbeInterval = 5 * time.Second

// Probe checks every backend (bwrap usable, engine reachable and image present, host allowed).
// Concurrent and repeated calls within ProbeInterval share one probe.
func (m *Manager) Probe(ctx context.Context) []ProbeResult {
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	if m.probed != nil && time.Since(m.probedAt) < ProbeInterval {
		return slices.Clone(m.probed)
	}
	var out []ProbeResult
	for _, b := range []string{api.BackendBwrap, api.BackendContainer, api.BackendHost} {
		if l := m.launchers[b]; l != nil {
			out = append(out, l.Probe(ctx))
		}
	}
	if ctx.Err() == nil {
		m.probed, m.probedAt = out, time.Now()
	}
	return slices.Clone(out)
}

func (m *Manager) limits(l api.Limits) api.Limits {
	pick := func(a, b, c int64) int64 {
		if a > 0 {
			return a
		}
		if b > 0 {
			return b
		}
		return c
	}
	d := m.cfg.DefaultLimits
	return api.Limits{
		Pids:      int(pick(int64(l.Pids), int64(d.Pids), int64(DefaultLimits.Pids))),
		MemoryMiB: pick(l.MemoryMiB, d.MemoryMiB, DefaultLimits.MemoryMiB),
		CPUPct:    int(pick(int64(l.CPUPct), int64(d.CPUPct), int64(DefaultLimits.CPUPct))),
		DiskMiB:   pick(l.DiskMiB, d.DiskMiB, DefaultLimits.DiskMiB),
	}
}

func (m *Manager) slot(id string) (*slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("bridges: manager closed: %w", ErrHelperGone)
	}
	s := m.slots[id]
	if s == nil {
		s = &slot{}
		m.slots[id] = s
	}
	return s, nil
}

// Conn returns the agent's running helper, starting it through the agent's backend if needed.
func (m *Manager) Conn(ctx context.Context, agent api.Agent) (*Conn, error) {
	if err := checkAgentID(agent.ID); err != nil {
		return nil, err
	}
	b := agent.Backend
	if b.Type == api.BackendHost && !m.cfg.AllowHost {
		return nil, fmt.Errorf("agent %s: %w", agent.ID, ErrHostNotAllowed)
	}
	if b.Network == "" {
		b.Network = api.NetworkNone
	}
	if b.Network != api.NetworkNone && b.Network != api.NetworkFull {
		return nil, fmt.Errorf("agent %s: network %q is not none or full: %w", agent.ID, b.Network, ErrBackendUnavailable)
	}
	l := m.launchers[b.Type]
	if l == nil {
		return nil, fmt.Errorf("agent %s: unknown backend type %q: %w", agent.ID, b.Type, ErrBackendUnavailable)
	}
	s, err := m.slot(agent.ID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conn; c != nil {
		select {
		case <-c.done:
		default:
			if c.backend == b && !c.ending() {
				c.touch()
				return c, nil
			}
			if !c.ending() {
				// The agent's backend changed: the old helper goes.
				c.stop(errors.New("backend changed"))
			}
			// An ending helper (idle stop, crash) is waited for, then replaced.
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("agent %s: waiting for the previous helper to stop: %w", agent.ID, context.Cause(ctx))
			}
		}
		s.conn = nil
	}
	spec := AgentSpec{ID: agent.ID, Home: AgentHome(m.cfg.DataDir, agent.ID), Backend: b, Limits: m.limits(b.Limits)}
	if err := os.MkdirAll(spec.Home, 0o700); err != nil {
		return nil, fmt.Errorf("agent %s: create home: %w", agent.ID, err)
	}
	os.Chmod(filepath.Dir(spec.Home), 0o700)
	os.Chmod(spec.Home, 0o700)
	if err := m.disk.prepare(agent.ID, spec.Home, spec.Limits.DiskMiB); err != nil {
		return nil, fmt.Errorf("agent %s: home: %w", agent.ID, err)
	}
	hold, err := m.claimProfile(ctx, agent.ID, b.Type)
	if err != nil {
		return nil, err
	}
	if hold != nil {
		spec.BrowserProfile = hold.dir
	}
	s.backend = b.Type
	m.report(agent.ID, HelperState{State: HelperStarting})
	c, err := m.start(ctx, l, spec, hold)
	if err != nil {
		m.releaseProfile(hold)
		m.report(agent.ID, HelperState{State: HelperStopped, Err: err})
		return nil, err
	}
	s.conn = c
	c.mu.Lock()
	c.reportLocked()
	c.mu.Unlock()
	return c, nil
}

// report tells Config.OnState.
func (m *Manager) report(agentID string, st HelperState) {
	if f := m.cfg.OnState; f != nil {
		f(agentID, st)
	}
}

// start launches a helper and performs the version handshake; hold is the lent browser profile
// in spec (nil = none), released when the helper's sandbox is gone.
func (m *Manager) start(ctx context.Context, l Launcher, spec AgentSpec, hold *profileHold) (*Conn, error) {
	logger := m.logger.With("agent", spec.ID, "backend", spec.Backend.Type)
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	p, err := l.Launch(lctx, spec)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", spec.ID, err)
	}
	fail := func(err error) (*Conn, error) {
		p.Kill()
		select {
		case <-p.Done():
		case <-time.After(2 * time.Second):
		}
		if s := strings.TrimSpace(p.Stderr()); s != "" {
			err = fmt.Errorf("%w; helper stderr: %s", err, lastLines(s, 5))
		}
		return nil, fmt.Errorf("agent %s: %w", spec.ID, err)
	}
	sess, err := yamux.Client(p.Pipe, yamuxConfig())
	if err != nil {
		return fail(fmt.Errorf("yamux: %w", err))
	}
	hello, err := handshake(lctx, sess)
	if err != nil {
		sess.Close()
		if errors.Is(err, ErrHelperVersion) {
			return fail(err)
		}
		// The sandbox did not come up (bwrap refused, exec failed): the backend is unavailable.
		return fail(unavailable(spec.Backend.Type, "helper did not start (%v)", err))
	}
	c := &Conn{
		m:       m,
		agentID: spec.ID,
		backend: spec.Backend,
		sess:    sess,
		proc:    p,
		done:    make(chan struct{}),
		logger:  logger.With("helper", p.Desc),
		Hello:   hello,
	}
	m.holdProfile(hold, c)
	c.idle = time.AfterFunc(m.cfg.IdleTimeout, c.idleCheck)
	go c.watch() // owner: the Conn; exits when the helper or its session ends
	if m.disk.mode == DiskCheck {
		// owner: the Conn; exits when the helper has exited (c.done)
		go m.disk.watch(c.done, spec.Home, spec.Limits.DiskMiB, func(err error) {
			c.logger.Warn("agent stopped: home over its disk limit", "err", err)
			m.disk.noteStop(spec.ID, err)
			c.stop(err)
		})
	}
	c.logger.Info("helper started", "limits", hello.Limits)
	return c, nil
}

// handshake exchanges Hello on the session's first stream.
func handshake(ctx context.Context, sess *yamux.Session) (Hello, error) {
	st, err := sess.OpenStream()
	if err != nil {
		return Hello{}, fmt.Errorf("open hello stream: %w", err)
	}
	defer st.Close()
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	st.SetDeadline(deadline)
	if err := WriteFrame(st, StreamHeader{Kind: streamHello}); err != nil {
		return Hello{}, err
	}
	if err := WriteFrame(st, Hello{Proto: ProtoVersion}); err != nil {
		return Hello{}, err
	}
	var h Hello
	if err := ReadFrame(st, &h); err != nil {
		return Hello{}, err
	}
	if h.Proto != ProtoVersion || h.Error != "" {
		msg := h.Error
		if msg == "" {
			msg = fmt.Sprintf("helper speaks protocol %d, gateway %d", h.Proto, ProtoVersion)
		}
		return h, fmt.Errorf("%s (helper binary and gateway are from different releases): %w", msg, ErrHelperVersion)
	}
	return h, nil
}

// Exec runs req inside the agent's backend through its helper.
func (m *Manager) Exec(ctx context.Context, agent api.Agent, req api.ExecRequest) (api.ExecResult, error) {
	if _, err := ValidateExec(req); err != nil {
		return api.ExecResult{}, err
	}
	st, err := m.Open(ctx, agent, StreamExec)
	if err != nil {
		return api.ExecResult{}, err
	}
	res, err := ExecOverStream(ctx, st, req)
	return res, m.disk.explain(agent.ID, err)
}

// Open opens a stream of kind to the agent's helper, starting it if needed. A helper that
// stopped (idle) between Conn and Conn.Open is replaced once, so callers do not see that race.
func (m *Manager) Open(ctx context.Context, agent api.Agent, kind string) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		c, err := m.Conn(ctx, agent)
		if err != nil {
			return nil, err
		}
		st, err := c.Open(ctx, kind)
		if err == nil || attempt > 0 || !errors.Is(err, ErrHelperGone) {
			return st, err
		}
	}
}

// Stop stops the agent's helper (and its container) if it runs; its home and backend state stay.
// The next Conn starts it again.
func (m *Manager) Stop(ctx context.Context, agentID string) error {
	if err := checkAgentID(agentID); err != nil {
		return err
	}
	s, err := m.slot(agentID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(ctx, errors.New("stopped"))
}

// stopLocked stops the slot's helper, if any, and waits for it to exit or ctx to end;
// callers hold s.mu.
func (s *slot) stopLocked(ctx context.Context, cause error) error {
	c := s.conn
	if c == nil {
		return nil
	}
	c.stop(cause)
	select {
	case <-c.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	s.conn = nil
	return nil
}

// Forget stops the agent's helper (and container) and, if purge, removes its home. Used on agent delete.
func (m *Manager) Forget(ctx context.Context, agentID string, purge bool) error {
	if err := checkAgentID(agentID); err != nil {
		return err
	}
	s, err := m.slot(agentID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(ctx, errors.New("agent forgotten")); err != nil {
		return fmt.Errorf("agent %s: stop helper: %w", agentID, err)
	}
	var errs []error
	for _, l := range m.launchers {
		if l == m.container && s.backend != api.BackendContainer {
			// Only ask the engine about agents known to have used it (it may be down).
			if err := l.Forget(ctx, agentID); err != nil && !errors.Is(err, ErrBackendUnavailable) {
				errs = append(errs, err)
			}
			continue
		}
		if err := l.Forget(ctx, agentID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.disk.release(agentID, AgentHome(m.cfg.DataDir, agentID)); err != nil {
		errs = append(errs, err)
		purge = false // never remove files through a home still mounted
	}
	if purge {
		if err := os.RemoveAll(filepath.Join(m.cfg.DataDir, "agents", agentID)); err != nil {
			errs = append(errs, fmt.Errorf("remove home: %w", err))
		}
	}
	m.mu.Lock()
	delete(m.slots, agentID)
	m.mu.Unlock()
	return errors.Join(errs...)
}

// Close stops every helper and removes this gateway's containers (homes stay).
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	slots := m.slots
	m.slots = map[string]*slot{}
	m.mu.Unlock()
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id, s := range slots {
		s.mu.Lock()
		if c := s.conn; c != nil {
			c.stop(errors.New("manager closed"))
			<-c.done
			s.conn = nil
		}
		for _, l := range m.launchers {
			if l == m.container && s.backend != api.BackendContainer {
				continue
			}
			if err := l.Forget(ctx, id); err != nil {
				if errors.Is(err, ErrBackendUnavailable) {
					// The next gateway start reconciles what could not be removed now.
					m.logger.Warn("cannot release agent's backend state", "agent", id, "err", err)
					continue
				}
				errs = append(errs, err)
			}
		}
		if err := m.disk.release(id, AgentHome(m.cfg.DataDir, id)); err != nil {
			errs = append(errs, err)
		}
		s.mu.Unlock()
	}
	for _, l := range m.launchers {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Conn is the gateway's side of one running helper.
type Conn struct {
	m       *Manager
	agentID string
	backend api.Backend
	sess    *yamux.Session
	proc    *Process
	logger  *slog.Logger
	profile *profileHold // the lent browser profile mounted in its sandbox (nil = none)
	// Hello is what the helper said in the handshake (its pid inside the sandbox, its rlimits).
	Hello Hello

	mu       sync.Mutex
	active   int
	idle     *time.Timer
	lastUse  time.Time
	stopping error
	gone     bool // HelperStopped was reported: report no more

	done chan struct{}
	err  error
}

// Open opens a stream of the given kind to the helper; it counts as activity until closed.
func (c *Conn) Open(ctx context.Context, kind string) (net.Conn, error) {
	select {
	case <-c.done:
		return nil, c.err
	default:
	}
	c.mu.Lock()
	if c.stopping != nil {
		cause := c.stopping
		c.mu.Unlock()
		return nil, fmt.Errorf("agent %s: %w: %v", c.agentID, ErrHelperGone, cause)
	}
	c.active++
	c.lastUse = time.Now()
	c.reportLocked()
	c.mu.Unlock()
	st, err := c.sess.OpenStream()
	if err == nil {
		stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Now()) })
		err = WriteFrame(st, StreamHeader{Kind: kind})
		if !stop() && err != nil {
			err = context.Cause(ctx)
		}
	}
	if err != nil {
		c.release()
		if st != nil {
			st.Close()
		}
		select {
		case <-c.done:
			return nil, c.err
		default:
		}
		if c.ending() {
			return nil, fmt.Errorf("open %s stream to agent %s: %w: %v", kind, c.agentID, ErrHelperGone, err)
		}
		return nil, fmt.Errorf("open %s stream to agent %s: %w", kind, c.agentID, err)
	}
	return &countedStream{Stream: st, c: c}, nil
}

// Done is closed when the helper has exited; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the helper is gone (wraps ErrHelperGone); nil while it runs.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Process is the launched helper (for tests and diagnostics).
func (c *Conn) Process() *Process { return c.proc }

// ending reports whether the helper is being stopped or its session is gone.
func (c *Conn) ending() bool {
	c.mu.Lock()
	stopping := c.stopping != nil
	c.mu.Unlock()
	return stopping || c.sess.IsClosed()
}

func (c *Conn) touch() {
	c.mu.Lock()
	c.lastUse = time.Now()
	c.mu.Unlock()
}

func (c *Conn) release() {
	c.mu.Lock()
	c.active--
	c.lastUse = time.Now()
	c.reportLocked()
	c.mu.Unlock()
}

// reportLocked reports running or idle by the open streams, while the helper lives; callers hold c.mu.
func (c *Conn) reportLocked() {
	if c.gone || c.stopping != nil {
		return
	}
	st := HelperState{State: HelperIdle}
	if c.active > 0 {
		st = HelperState{State: HelperRunning, Streams: c.active}
	}
	c.m.report(c.agentID, st)
}

// idleCheck runs on the idle timer: stop when no stream was open for IdleTimeout, else re-arm.
func (c *Conn) idleCheck() {
	timeout := c.m.cfg.IdleTimeout
	c.mu.Lock()
	idleFor := time.Since(c.lastUse)
	active := c.active
	if active == 0 && idleFor >= timeout && c.stopping == nil {
		// Decided under the lock Open takes: no stream can slip in now.
		c.stopping = fmt.Errorf("idle for %s", timeout.Round(time.Millisecond))
		c.mu.Unlock()
		c.stop(nil)
		return
	}
	c.mu.Unlock()
	next := timeout - idleFor
	if active > 0 || next <= 0 {
		next = timeout
	}
	c.idle.Reset(next)
}

// stop ends the helper: close the session (the helper exits on EOF), then kill it.
func (c *Conn) stop(cause error) {
	c.mu.Lock()
	if c.stopping == nil && cause != nil {
		c.stopping = cause
	}
	c.mu.Unlock()
	c.sess.Close()
	go func() { // owner: stop; exits when the helper has exited or was killed
		select {
		case <-c.proc.Done():
		case <-time.After(2 * time.Second):
		}
		c.proc.Kill()
	}()
}

// watch waits for the helper or its session to end, then records why and cleans up.
func (c *Conn) watch() {
	select {
	case <-c.proc.Done():
	case <-c.sess.CloseChan():
	}
	c.sess.Close()
	c.mu.Lock()
	cause := c.stopping
	c.mu.Unlock()
	crashed := cause == nil // nobody asked it to stop
	// The helper exits on its own once the session is closed, after its surfaces have shut
	// down (the browser writes its profile to disk on the way): give it the same 2 s whether
	// the stop was asked for or not, then kill it.
	select {
	case <-c.proc.Done():
	case <-time.After(2 * time.Second):
	}
	if cause == nil {
		cause = c.proc.Err()
		if cause == nil {
			cause = errors.New("session closed")
		}
		c.logger.Warn("helper exited", "cause", cause)
	}
	c.proc.Kill()
	select {
	case <-c.proc.Done():
	case <-time.After(5 * time.Second):
		c.logger.Error("helper did not exit after kill")
	}
	c.idle.Stop()
	if c.backend.Type == api.BackendContainer {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := c.m.container.stop(ctx, c.agentID); err != nil {
			c.logger.Warn("stop container", "err", err)
		}
		cancel()
	}
	c.err = fmt.Errorf("agent %s: %w: %w", c.agentID, ErrHelperGone, cause)
	c.m.releaseProfile(c.profile) // its sandbox is gone: the profile is mounted nowhere now
	c.mu.Lock()
	st := HelperState{State: HelperStopped}
	if crashed {
		st.Err = c.err
	}
	c.gone = true
	c.m.report(c.agentID, st)
	c.mu.Unlock()
	close(c.done)
}

// countedStream is a helper stream that counts as activity until closed.
type countedStream struct {
	*yamux.Stream
	c    *Conn
	once sync.Once
}

func (s *countedStream) Close() error {
	err := s.Stream.Close()
	s.once.Do(s.c.release)
	return err
}
