package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// TestUserCommand: `porthole user add/list/passwd/rm` work on the store the gateway serves.
func TestUserCommand(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"PORTHOLE_DATA": dir}
	getenv := func(k string) string { return env[k] }
	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		err := userCommand(context.Background(), args, strings.NewReader(stdin), &out, getenv)
		return out.String(), err
	}
	if _, err := run("alice-password-1\n", "add", "alice", "--admin", "--password-stdin"); err != nil {
		t.Fatalf("user add alice: %v", err)
	}
	if _, err := run("bob-password-1\n", "add", "--password-stdin", "bob", "--data", dir); err != nil {
		t.Fatalf("user add bob (flags before NAME): %v", err)
	}
	errCases := []struct {
		stdin string
		args  []string
		want  string
	}{
		{"x-password-1\n", []string{"add", "bob", "--password-stdin"}, "exists"},
		{"short\n", []string{"add", "carol", "--password-stdin"}, "at least 8"},
		{"", []string{"add", "carol"}, "--password-stdin"},
		{"ok-password-1\n", []string{"add", "../x", "--password-stdin"}, "a username is"},
		{"", []string{"rm", "nobody"}, "no user"},
		{"", []string{"frobnicate"}, "unknown verb"},
		{"", []string{"rm", "alice"}, "last admin"},
	}
	for _, c := range errCases {
		if _, err := run(c.stdin, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("user %q = %v, want an error containing %q", c.args, err, c.want)
		}
	}
	out, err := run("", "list")
	if err != nil {
		t.Fatalf("user list: %v", err)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" admin="+f[1])
	}
	if want := []string{"alice admin=true", "bob admin=false"}; !slices.Equal(rows, want) {
		t.Errorf("user list rows = %q, want %q (output %q)", rows, want, out)
	}

	// The gateway on the same data dir: no admin is created (the store is not empty), and
	// the CLI's users log in.
	e := serveDir(t, dir)
	bobSession := e.login("bob", "bob-password-1", 200)
	e.login("alice", "alice-password-1", 200)
	if n, _ := e.srv.Store().GetUserByName(context.Background(), "admin"); n.ID != "" {
		t.Errorf("gateway created user admin on a store that had users")
	}

	if _, err := run("bob-password-2\n", "passwd", "bob", "--password-stdin"); err != nil {
		t.Fatalf("user passwd: %v", err)
	}
	e.login("bob", "bob-password-1", 401)
	e.login("bob", "bob-password-2", 200)
	if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: bobSession}); resp.StatusCode != 401 {
		t.Errorf("bob's session after `user passwd` = %d, want 401", resp.StatusCode)
	}
	if _, err := run("", "rm", "bob"); err != nil {
		t.Fatalf("user rm: %v", err)
	}
	e.login("bob", "bob-password-2", 401)
	out, _ = run("", "list")
	if strings.Contains(out, "bob") {
		t.Errorf("bob still listed after rm: %q", out)
	}
	var cli []string
	for _, ev := range e.audits() {
		if ev.Actor == "cli" {
			cli = append(cli, ev.Action)
		}
	}
	if want := []string{"user.delete", "user.update", "user.create", "user.create"}; !slices.Equal(cli, want) {
		t.Errorf("CLI audit = %v, want %v", cli, want)
	}
}

// serveDir runs a gateway (fake backends) on an existing data dir.
func serveDir(t *testing.T, dir string) *env {
	t.Helper()
	e := &env{t: t, bridge: &fakeBridge{}, terms: &fakeTerms{}, clock: &fakeClock{now: time.Now()}}
	s, err := New(context.Background(), Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler), Bridge: e.bridge, Surfaces: fakeTerminal(e.terms)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.srv = s
	e.ts = newHTTPTestServer(s.Handler())
	t.Cleanup(func() { e.ts.Close(); s.Shutdown(context.Background()) })
	return e
}

func (e *env) login(user, pw string, want int) string {
	e.t.Helper()
	resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: user, Password: pw}, auth{})
	if resp.StatusCode != want {
		e.t.Fatalf("login %s = %d (%s), want %d", user, resp.StatusCode, errMsg(out), want)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			return c.Value
		}
	}
	return ""
}

// TestServeConfigPrecedence: flags > PORTHOLE_* environment > config file > defaults.
func TestServeConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "porthole.json")
	os.WriteFile(file, []byte(`{"addr":"127.0.0.1:7001","data":"/from/file","db":"postgres://file","trusted_proxies":["10.0.0.0/8"],"idle_timeout":"5m","log_format":"json"}`), 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		get  func(ServeConfig) any
		want any
	}{
		{"default addr", nil, nil, func(c ServeConfig) any { return c.Addr }, "127.0.0.1:8080"},
		{"default data", nil, nil, func(c ServeConfig) any { return c.Data }, "./data"},
		{"default idle", nil, nil, func(c ServeConfig) any { return c.IdleTimeout }, "10m"},
		{"file", []string{"--config", file}, nil, func(c ServeConfig) any { return c.Addr }, "127.0.0.1:7001"},
		{"file via env", nil, map[string]string{"PORTHOLE_CONFIG": file}, func(c ServeConfig) any { return c.Data }, "/from/file"},
		{"env over file", []string{"--config", file}, map[string]string{"PORTHOLE_ADDR": "127.0.0.1:7002"}, func(c ServeConfig) any { return c.Addr }, "127.0.0.1:7002"},
		{"flag over env", []string{"--config", file, "--addr", "127.0.0.1:7003"}, map[string]string{"PORTHOLE_ADDR": "127.0.0.1:7002"}, func(c ServeConfig) any { return c.Addr }, "127.0.0.1:7003"},
		{"file kept when not overridden", []string{"--config", file, "--addr", ":1"}, nil, func(c ServeConfig) any { return c.DB }, "postgres://file"},
		{"env list", nil, map[string]string{"PORTHOLE_TRUSTED_PROXY": "10.0.0.1, 192.168.0.0/16"}, func(c ServeConfig) any { return strings.Join(c.TrustedProxies, "|") }, "10.0.0.1|192.168.0.0/16"},
		{"flag list repeatable", []string{"--config", file, "--trusted-proxy", "1.2.3.4", "--trusted-proxy", "5.6.7.0/24"}, nil, func(c ServeConfig) any { return strings.Join(c.TrustedProxies, "|") }, "1.2.3.4|5.6.7.0/24"},
		{"env bool", nil, map[string]string{"PORTHOLE_ALLOW_HOST_BACKEND": "true"}, func(c ServeConfig) any { return c.AllowHostBackend }, true},
		{"flag bool over env", []string{"--allow-host-backend=false"}, map[string]string{"PORTHOLE_ALLOW_HOST_BACKEND": "true"}, func(c ServeConfig) any { return c.AllowHostBackend }, false},
		{"env engine", nil, map[string]string{"PORTHOLE_CONTAINER_ENGINE": "unix:///run/x.sock"}, func(c ServeConfig) any { return c.ContainerEngine }, "unix:///run/x.sock"},
		{"env int", nil, map[string]string{"PORTHOLE_MAX_PIDS": "4096"}, func(c ServeConfig) any { return c.MaxPids }, 4096},
		{"flag int over env", []string{"--max-pids", "1024"}, map[string]string{"PORTHOLE_MAX_PIDS": "4096"}, func(c ServeConfig) any { return c.MaxPids }, 1024},
		{"flag quota", []string{"--max-terminals-per-user", "4"}, nil, func(c ServeConfig) any { return c.MaxTerminalsPerUser }, 4},
		{"env hosts", nil, map[string]string{"PORTHOLE_ALLOWED_HOST": "a.example, b.example"}, func(c ServeConfig) any { return strings.Join(c.AllowedHosts, "|") }, "a.example|b.example"},
		{"flag subnet pool", []string{"--container-subnet-pool", "10.99.0.0/16"}, nil, func(c ServeConfig) any { return c.ContainerSubnetPool }, "10.99.0.0/16"},
		{"env blocked cidrs", nil, map[string]string{"PORTHOLE_BLOCKED_CIDR": "172.17.0.0/16, 192.168.1.0/24"}, func(c ServeConfig) any { return strings.Join(c.BlockedCIDRs, "|") }, "172.17.0.0/16|192.168.1.0/24"},
	}
	for _, c := range cases {
		got, err := LoadServeConfig(c.args, func(k string) string { return c.env[k] }, io.Discard)
		if err != nil {
			t.Errorf("%s: LoadServeConfig(%q) error %v", c.name, c.args, err)
			continue
		}
		if v := c.get(got); v != c.want {
			t.Errorf("%s: LoadServeConfig(%q, env %v) = %v, want %v", c.name, c.args, c.env, v, c.want)
		}
	}
	bad := []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--nope"}, nil},
		{[]string{"extra"}, nil},
		{[]string{"--config", "/does/not/exist.json"}, nil},
		{nil, map[string]string{"PORTHOLE_ALLOW_HOST_BACKEND": "maybe"}},
		{nil, map[string]string{"PORTHOLE_MAX_PIDS": "lots"}},
		{[]string{"--max-pids", "x"}, nil},
	}
	for _, b := range bad {
		if _, err := LoadServeConfig(b.args, func(k string) string { return b.env[k] }, io.Discard); err == nil {
			t.Errorf("LoadServeConfig(%q, %v) = nil error, want one", b.args, b.env)
		}
	}
	// An unknown field in the file is an error, not silently ignored.
	badFile := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badFile, []byte(`{"adress":"typo"}`), 0o600)
	if _, err := LoadServeConfig([]string{"--config", badFile}, func(string) string { return "" }, io.Discard); err == nil {
		t.Errorf("config file with an unknown field: want an error")
	}
	sc, _ := LoadServeConfig([]string{"--config", file}, func(k string) string { return map[string]string{"PORTHOLE_ADMIN_PASSWORD": "pw-from-env"}[k] }, io.Discard)
	cfg, err := sc.Config(func(k string) string { return map[string]string{"PORTHOLE_ADMIN_PASSWORD": "pw-from-env"}[k] }, slog.New(slog.DiscardHandler))
	if err != nil || cfg.IdleTimeout != 5*time.Minute || cfg.AdminPassword != "pw-from-env" || len(cfg.TrustedProxies) != 1 || cfg.TrustedProxies[0].String() != "10.0.0.0/8" {
		t.Errorf("Config() = %+v, %v", cfg, err)
	}
	sc, _ = LoadServeConfig([]string{"--default-pids", "256", "--max-pids", "1024", "--max-terminals-per-user", "3", "--max-execs-per-agent", "5"}, func(string) string { return "" }, io.Discard)
	if cfg, err := sc.Config(func(string) string { return "" }, nil); err != nil || cfg.Limits.Default.Pids != 256 || cfg.Limits.Max.Pids != 1024 ||
		cfg.Caps[api.SurfaceTerminal].MaxPerUser != 3 || cfg.Quotas.ExecsPerAgent != 5 {
		t.Errorf("Config() limits and quotas = %+v %+v %+v, %v", cfg.Limits, cfg.Caps, cfg.Quotas, err)
	}
	for _, bad := range []ServeConfig{{IdleTimeout: "soon"}, {IdleTimeout: "1m", TrustedProxies: []string{"not-an-ip"}},
		{IdleTimeout: "1m", DefaultPids: 600, MaxPids: 500}, {IdleTimeout: "1m", MaxMemoryMiB: -1}, {IdleTimeout: "1m", MaxAgentsPerUser: -2}} {
		if _, err := bad.Config(func(string) string { return "" }, nil); err == nil {
			t.Errorf("Config(%+v) = nil error, want one", bad)
		}
	}
}

// TestServeRuns: run serves on the configured address and shuts down when ctx ends.
func TestServeRuns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, Config{Addr: addr, DataDir: t.TempDir(), AdminPassword: adminPassword,
			Logger: slog.New(slog.DiscardHandler), Bridge: &fakeBridge{}, Surfaces: fakeTerminal(&fakeTerms{})})
	}()
	waitFor(t, "healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after ctx end: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after ctx ended")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("still serving after shutdown")
	}
}
