package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/surface"
)

// ServeConfig is `porthole serve`'s configuration: flags > PORTHOLE_* environment >
// the JSON config file (--config / PORTHOLE_CONFIG) > defaults.
type ServeConfig struct {
	Addr             string   `json:"addr"`
	Data             string   `json:"data"`
	DB               string   `json:"db"`
	AllowHostBackend bool     `json:"allow_host_backend"`
	TrustedProxies   []string `json:"trusted_proxies"`
	ContainerEngine  string   `json:"container_engine"`
	IdleTimeout      string   `json:"idle_timeout"`
	AllowedOrigins   []string `json:"allowed_origins"`
	Helper           string   `json:"helper"`
	LogFormat        string   `json:"log_format"` // text | json
	LogLevel         string   `json:"log_level"`  // debug | info | warn | error
	AllowedHosts     []string `json:"allowed_hosts"`
	// Network: container agents' subnets, and destinations no network-"full" bwrap agent reaches.
	ContainerSubnetPool string   `json:"container_subnet_pool"`
	BlockedCIDRs        []string `json:"blocked_cidrs"`

	// Agent limits (0 = built-in default): defaults (the most a non-admin may set) and maximums (admins).
	DefaultPids      int `json:"default_pids"`
	DefaultMemoryMiB int `json:"default_memory_mib"`
	DefaultCPUPct    int `json:"default_cpu_pct"`
	DefaultDiskMiB   int `json:"default_disk_mib"`
	MaxPids          int `json:"max_pids"`
	MaxMemoryMiB     int `json:"max_memory_mib"`
	MaxCPUPct        int `json:"max_cpu_pct"`
	MaxDiskMiB       int `json:"max_disk_mib"`
	// Quotas (0 = built-in default).
	MaxAgentsPerUser       int `json:"max_agents_per_user"`
	MaxExecsPerAgent       int `json:"max_execs_per_agent"`
	MaxExecsPerUser        int `json:"max_execs_per_user"`
	MaxTerminals           int `json:"max_terminals"`
	MaxTerminalsPerAgent   int `json:"max_terminals_per_agent"`
	MaxTerminalsPerUser    int `json:"max_terminals_per_user"`
	AdminReservedTerminals int `json:"admin_reserved_terminals"`
}

func defaultServeConfig() ServeConfig {
	return ServeConfig{Addr: "127.0.0.1:8080", Data: "./data", IdleTimeout: "10m", LogFormat: "text", LogLevel: "info"}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// option binds one setting to its flag, environment variable and config-file field.
type option struct {
	flag, env, usage string
	str              *string
	list             *[]string
	boolean          *bool
	integer          *int
}

func (c *ServeConfig) options() []option {
	return []option{
		{flag: "addr", env: "PORTHOLE_ADDR", usage: "listen address", str: &c.Addr},
		{flag: "data", env: "PORTHOLE_DATA", usage: "data directory (SQLite database, agents' homes)", str: &c.Data},
		{flag: "db", env: "PORTHOLE_DB", usage: "database URL: empty = SQLite in the data dir, postgres://... = PostgreSQL", str: &c.DB},
		{flag: "allow-host-backend", env: "PORTHOLE_ALLOW_HOST_BACKEND", usage: "let admins create host agents (NOT isolated)", boolean: &c.AllowHostBackend},
		{flag: "trusted-proxy", env: "PORTHOLE_TRUSTED_PROXY", usage: "CIDR of a reverse proxy allowed to set X-Forwarded-For (repeatable; env: comma-separated)", list: &c.TrustedProxies},
		{flag: "container-engine", env: "PORTHOLE_CONTAINER_ENGINE", usage: "Docker-compatible engine socket, unix:///path.sock", str: &c.ContainerEngine},
		{flag: "idle-timeout", env: "PORTHOLE_IDLE_TIMEOUT", usage: "stop an agent's helper after this long without a stream", str: &c.IdleTimeout},
		{flag: "allowed-origin", env: "PORTHOLE_ALLOWED_ORIGIN", usage: "extra allowed Origin, scheme://host[:port] (repeatable; env: comma-separated)", list: &c.AllowedOrigins},
		{flag: "helper", env: "PORTHOLE_HELPER", usage: "porthole binary run as the in-sandbox helper (default: this binary)", str: &c.Helper},
		{flag: "log-format", env: "PORTHOLE_LOG_FORMAT", usage: "text or json", str: &c.LogFormat},
		{flag: "log-level", env: "PORTHOLE_LOG_LEVEL", usage: "debug, info, warn or error", str: &c.LogLevel},
		{flag: "allowed-host", env: "PORTHOLE_ALLOWED_HOST", usage: "extra Host name served (repeatable; env: comma-separated; * = any); others get 421", list: &c.AllowedHosts},
		{flag: "container-subnet-pool", env: "PORTHOLE_CONTAINER_SUBNET_POOL", usage: "IPv4 CIDR the container agents' networks take their /24s from; unreachable from full bwrap agents (default " + bridges.DefaultContainerSubnetPool + ")", str: &c.ContainerSubnetPool},
		{flag: "blocked-cidr", env: "PORTHOLE_BLOCKED_CIDR", usage: "CIDR no network-full bwrap agent may reach, e.g. a Docker Engine's own networks or private host-side services (repeatable; env: comma-separated)", list: &c.BlockedCIDRs},
		{flag: "default-pids", env: "PORTHOLE_DEFAULT_PIDS", usage: "agent pids limit by default, and the most a non-admin may set (0 = 512)", integer: &c.DefaultPids},
		{flag: "default-memory-mib", env: "PORTHOLE_DEFAULT_MEMORY_MIB", usage: "agent memory limit in MiB by default, and the most a non-admin may set (0 = 2048)", integer: &c.DefaultMemoryMiB},
		{flag: "default-cpu-pct", env: "PORTHOLE_DEFAULT_CPU_PCT", usage: "agent CPU limit (100 = one core) by default, and the most a non-admin may set (0 = 100)", integer: &c.DefaultCPUPct},
		{flag: "default-disk-mib", env: "PORTHOLE_DEFAULT_DISK_MIB", usage: "agent home size limit in MiB by default, and the most a non-admin may set (0 = 10240)", integer: &c.DefaultDiskMiB},
		{flag: "max-pids", env: "PORTHOLE_MAX_PIDS", usage: "most pids an admin may give an agent (0 = 8192)", integer: &c.MaxPids},
		{flag: "max-memory-mib", env: "PORTHOLE_MAX_MEMORY_MIB", usage: "most memory in MiB an admin may give an agent (0 = 65536)", integer: &c.MaxMemoryMiB},
		{flag: "max-cpu-pct", env: "PORTHOLE_MAX_CPU_PCT", usage: "most CPU an admin may give an agent (0 = 100 x CPUs)", integer: &c.MaxCPUPct},
		{flag: "max-disk-mib", env: "PORTHOLE_MAX_DISK_MIB", usage: "most home size in MiB an admin may give an agent (0 = 102400)", integer: &c.MaxDiskMiB},
		{flag: "max-agents-per-user", env: "PORTHOLE_MAX_AGENTS_PER_USER", usage: "agents a non-admin may own (0 = 32)", integer: &c.MaxAgentsPerUser},
		{flag: "max-execs-per-agent", env: "PORTHOLE_MAX_EXECS_PER_AGENT", usage: "concurrent execs on one agent (0 = 16)", integer: &c.MaxExecsPerAgent},
		{flag: "max-execs-per-user", env: "PORTHOLE_MAX_EXECS_PER_USER", usage: "concurrent execs of one non-admin user (0 = 32)", integer: &c.MaxExecsPerUser},
		{flag: "max-terminals", env: "PORTHOLE_MAX_TERMINALS", usage: "open terminals on the server (0 = 64)", integer: &c.MaxTerminals},
		{flag: "max-terminals-per-agent", env: "PORTHOLE_MAX_TERMINALS_PER_AGENT", usage: "open terminals per agent (0 = 8)", integer: &c.MaxTerminalsPerAgent},
		{flag: "max-terminals-per-user", env: "PORTHOLE_MAX_TERMINALS_PER_USER", usage: "open terminals one non-admin user may open (0 = 16)", integer: &c.MaxTerminalsPerUser},
		{flag: "admin-reserved-terminals", env: "PORTHOLE_ADMIN_RESERVED_TERMINALS", usage: "of --max-terminals, how many only admins may open (0 = an eighth, -1 = none)", integer: &c.AdminReservedTerminals},
	}
}

// LoadServeConfig resolves serve's configuration from args, getenv and the config file.
func LoadServeConfig(args []string, getenv func(string) string, stderr io.Writer) (ServeConfig, error) {
	// Pass 1: parse flags into a scratch config, to learn which were set and the config file.
	var fromFlags ServeConfig
	fs := flag.NewFlagSet("porthole serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "JSON config file (env PORTHOLE_CONFIG)")
	for _, o := range fromFlags.options() {
		switch {
		case o.str != nil:
			fs.StringVar(o.str, o.flag, "", o.usage+" (env "+o.env+")")
		case o.list != nil:
			fs.Var((*listFlag)(o.list), o.flag, o.usage+" (env "+o.env+")")
		case o.boolean != nil:
			fs.BoolVar(o.boolean, o.flag, false, o.usage+" (env "+o.env+")")
		case o.integer != nil:
			fs.IntVar(o.integer, o.flag, 0, o.usage+" (env "+o.env+")")
		}
	}
	if err := fs.Parse(args); err != nil {
		return ServeConfig{}, err
	}
	if fs.NArg() > 0 {
		return ServeConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := defaultServeConfig()
	path := *configFile
	if path == "" {
		path = getenv("PORTHOLE_CONFIG")
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return ServeConfig{}, fmt.Errorf("read config file: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return ServeConfig{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	dst, src := cfg.options(), fromFlags.options()
	for i, o := range dst {
		if v := getenv(o.env); v != "" {
			switch {
			case o.str != nil:
				*o.str = v
			case o.list != nil:
				*o.list = nil
				for _, p := range strings.Split(v, ",") {
					if p = strings.TrimSpace(p); p != "" {
						*o.list = append(*o.list, p)
					}
				}
			case o.boolean != nil:
				b, err := strconv.ParseBool(v)
				if err != nil {
					return ServeConfig{}, fmt.Errorf("%s=%q: not a boolean", o.env, v)
				}
				*o.boolean = b
			case o.integer != nil:
				n, err := strconv.Atoi(v)
				if err != nil {
					return ServeConfig{}, fmt.Errorf("%s=%q: not an integer", o.env, v)
				}
				*o.integer = n
			}
		}
		if set[o.flag] {
			switch {
			case o.str != nil:
				*o.str = *src[i].str
			case o.list != nil:
				*o.list = *src[i].list
			case o.boolean != nil:
				*o.boolean = *src[i].boolean
			case o.integer != nil:
				*o.integer = *src[i].integer
			}
		}
	}
	return cfg, nil
}

// Config turns the resolved settings into the gateway's Config.
func (c ServeConfig) Config(getenv func(string) string, logger *slog.Logger) (Config, error) {
	cfg := Config{
		Addr:             c.Addr,
		DataDir:          c.Data,
		DB:               c.DB,
		AllowHostBackend: c.AllowHostBackend,
		ContainerEngine:  c.ContainerEngine,
		AdminPassword:    getenv("PORTHOLE_ADMIN_PASSWORD"),
		HelperPath:       c.Helper,
		AllowedOrigins:   c.AllowedOrigins,
		AllowedHosts:     c.AllowedHosts,
		Logger:           logger,
		SubnetPool:       c.ContainerSubnetPool,
		BlockedCIDRs:     c.BlockedCIDRs,
		Limits: LimitPolicy{
			Default: api.Limits{Pids: c.DefaultPids, MemoryMiB: int64(c.DefaultMemoryMiB), CPUPct: c.DefaultCPUPct, DiskMiB: int64(c.DefaultDiskMiB)},
			Max:     api.Limits{Pids: c.MaxPids, MemoryMiB: int64(c.MaxMemoryMiB), CPUPct: c.MaxCPUPct, DiskMiB: int64(c.MaxDiskMiB)},
		},
		Quotas: Quotas{AgentsPerUser: c.MaxAgentsPerUser, ExecsPerAgent: c.MaxExecsPerAgent, ExecsPerUser: c.MaxExecsPerUser},
		Caps: map[api.Surface]surface.Caps{api.SurfaceTerminal: {MaxTotal: c.MaxTerminals, MaxPerAgent: c.MaxTerminalsPerAgent,
			MaxPerUser: c.MaxTerminalsPerUser, AdminReserve: c.AdminReservedTerminals}},
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max-agents-per-user", c.MaxAgentsPerUser}, {"max-execs-per-agent", c.MaxExecsPerAgent}, {"max-execs-per-user", c.MaxExecsPerUser},
		{"max-terminals", c.MaxTerminals}, {"max-terminals-per-agent", c.MaxTerminalsPerAgent}, {"max-terminals-per-user", c.MaxTerminalsPerUser}} {
		if n.v < 0 {
			return Config{}, fmt.Errorf("--%s %d: must be 0 (the default) or more", n.name, n.v)
		}
	}
	if _, err := cfg.Limits.resolve(); err != nil {
		return Config{}, fmt.Errorf("agent limits: %w", err)
	}
	for _, p := range c.TrustedProxies {
		pfx, err := parsePrefix(p)
		if err != nil {
			return Config{}, fmt.Errorf("trusted proxy %q: %w", p, err)
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, pfx)
	}
	d, err := time.ParseDuration(c.IdleTimeout)
	if err != nil || d <= 0 {
		return Config{}, fmt.Errorf("idle timeout %q: a positive duration like 10m", c.IdleTimeout)
	}
	cfg.IdleTimeout = d
	return cfg, nil
}

// parsePrefix accepts a CIDR or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// NewLogger builds the slog logger for format (text|json) and level.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: text or json", format)
}

// Serve parses serve's flags and runs the gateway with surfaces until ctx ends, then shuts
// down gracefully.
func Serve(ctx context.Context, args []string, surfaces []surface.Description) error {
	sc, err := LoadServeConfig(args, os.Getenv, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	logger, err := NewLogger(os.Stderr, sc.LogFormat, sc.LogLevel)
	if err != nil {
		return err
	}
	cfg, err := sc.Config(os.Getenv, logger)
	if err != nil {
		return err
	}
	cfg.Surfaces = surfaces
	return run(ctx, cfg)
}

// run serves cfg until ctx ends.
func run(ctx context.Context, cfg Config) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		s.Shutdown(context.Background())
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }() // exits when hs is shut down or the listener fails
	cfg.Logger.Info("porthole listening", "addr", ln.Addr().String(), "version", Version, "store", s.Store().Kind())

	served := false
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		served = true
	}
	cfg.Logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	if err := hs.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := s.Shutdown(sctx); err != nil {
		errs = append(errs, err)
	}
	if !served {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
	}
	return errors.Join(errs...)
}
