package bridges

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// childrenOf lists the live child processes of pid (from /proc).
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// sentinelHelper is a helper binary that records every run in a marker file, then runs the real one.
func sentinelHelper(t *testing.T) (path, marker string) {
	dir := t.TempDir()
	marker = filepath.Join(dir, "helper-ran")
	path = filepath.Join(dir, "porthole")
	script := fmt.Sprintf("#!/bin/sh\necho \"$$ $*\" >> %q\nexec %q \"$@\"\n", marker, helperBin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, marker
}

// TestFailClosed: when a backend cannot run, using it is a clear error wrapping
// ErrBackendUnavailable (or ErrHostNotAllowed) that names the cause, and nothing runs on the host.
func TestFailClosed(t *testing.T) {
	fakeBwrap := filepath.Join(t.TempDir(), "bwrap")
	// What bwrap prints where unprivileged user namespaces are disabled.
	os.WriteFile(fakeBwrap, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"), 0o755)
	emptyPath := t.TempDir()

	tests := []struct {
		name      string
		needs     string // backend whose real dependencies the case needs
		cfg       func(*Config)
		agent     api.Agent
		setPath   bool
		wantErr   error
		wantCause string
		probe     string // backend whose Probe must report !OK with wantCause
	}{
		{name: "bwrap_missing_from_PATH", setPath: true,
			agent: agent("fc1", api.BackendBwrap, api.NetworkNone, api.Limits{}), wantErr: ErrBackendUnavailable,
			wantCause: "bubblewrap not found", probe: api.BackendBwrap},
		{name: "bwrap_configured_path_missing", cfg: func(c *Config) { c.BwrapPath = "/nonexistent/bwrap" },
			agent: agent("fc2", api.BackendBwrap, api.NetworkNone, api.Limits{}), wantErr: ErrBackendUnavailable,
			wantCause: "bubblewrap not found", probe: api.BackendBwrap},
		{name: "user_namespaces_blocked", cfg: func(c *Config) { c.BwrapPath = fakeBwrap },
			agent: agent("fc3", api.BackendBwrap, api.NetworkNone, api.Limits{}), wantErr: ErrBackendUnavailable,
			wantCause: "No permissions to create new namespace", probe: api.BackendBwrap},
		{name: "engine_down", cfg: func(c *Config) { c.ContainerEngine = "unix://" + filepath.Join(emptyPath, "dead.sock") },
			agent: agent("fc4", api.BackendContainer, api.NetworkNone, api.Limits{}), wantErr: ErrBackendUnavailable,
			wantCause: "not reachable", probe: api.BackendContainer},
		{name: "image_missing", needs: api.BackendContainer,
			agent:   api.Agent{ID: "fc5", Backend: api.Backend{Type: api.BackendContainer, Network: api.NetworkNone, Image: "porthole-no-such-image:never"}},
			wantErr: ErrBackendUnavailable, wantCause: "porthole-no-such-image:never"},
		{name: "host_not_allowed",
			agent: agent("fc6", api.BackendHost, api.NetworkNone, api.Limits{}), wantErr: ErrHostNotAllowed},
		{name: "unknown_backend",
			agent: agent("fc7", "vm", api.NetworkNone, api.Limits{}), wantErr: ErrBackendUnavailable, wantCause: `"vm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needs != "" {
				requireBackend(t, tt.needs)
			}
			helper, marker := sentinelHelper(t)
			m, cfg := newTestManager(t, func(c *Config) {
				c.HelperPath = helper
				if tt.cfg != nil {
					tt.cfg(c)
				}
			})
			if tt.setPath {
				t.Setenv("PATH", emptyPath)
			}
			before := childrenOf(os.Getpid())
			res, err := m.Exec(context.Background(), tt.agent, api.ExecRequest{Command: []string{"sh", "-c", "echo RAN > /tmp/porthole-failclosed-ran"}})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Exec on %s = %+v, %v; want %v", tt.name, res, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantCause) {
				t.Errorf("error %q does not name the cause %q", err, tt.wantCause)
			}
			t.Logf("error: %v", err)
			if b, err := os.ReadFile(marker); err == nil {
				t.Errorf("the helper ran on the host: %s", b)
			}
			if _, err := os.Stat("/tmp/porthole-failclosed-ran"); err == nil {
				os.Remove("/tmp/porthole-failclosed-ran")
				t.Errorf("the command ran on the host")
			}
			after := childrenOf(os.Getpid())
			for _, p := range after {
				if !slices.Contains(before, p) {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
					t.Errorf("a new child process remains: pid %d %q", p, cmd)
				}
			}
			if _, err := os.Stat(AgentHome(cfg.DataDir, tt.agent.ID)); tt.wantErr == ErrHostNotAllowed && err == nil {
				t.Errorf("a home was created for a refused host agent")
			}
			if tt.probe != "" {
				for _, r := range m.Probe(context.Background()) {
					if r.Backend == tt.probe && (r.OK || !strings.Contains(r.Detail, tt.wantCause)) {
						t.Errorf("Probe(%s) = %+v, want !OK naming %q", tt.probe, r, tt.wantCause)
					}
				}
			}
		})
	}
}

// TestProbeIsRateLimited: /readyz is public and calls Probe; a burst of probes starts one jail.
func TestProbeIsRateLimited(t *testing.T) {
	real := testenv.LookPath(t, "bwrap")
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	counting := filepath.Join(dir, "bwrap")
	os.WriteFile(counting, []byte(fmt.Sprintf("#!/bin/sh\necho run >> %q\nexec %q \"$@\"\n", count, real)), 0o755)
	m, _ := newTestManager(t, func(c *Config) { c.BwrapPath = counting })
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range m.Probe(context.Background()) {
				if r.Backend == api.BackendBwrap && !r.OK {
					t.Errorf("probe: %+v", r)
				}
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(count)
	if n := strings.Count(string(b), "run"); n != 1 {
		t.Errorf("20 concurrent probes started bwrap %d times, want 1", n)
	}
}
