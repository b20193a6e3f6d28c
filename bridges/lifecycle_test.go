package bridges

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/porthole/porthole/api"
	"go.uber.org/goleak"
)

// descendants returns pid and every process below it (host view, from /proc).
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, childrenOf(out[i])...)
	}
	return out
}

// alive reports which of pids still exist (zombies count as gone).
func alive(pids []int) []string {
	var out []string
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z") {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}

func hostPid(t *testing.T, c *Conn) int {
	f := strings.Fields(c.Process().Desc)
	p, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("no host pid in %q", c.Process().Desc)
	}
	return p
}

func waitDone(t *testing.T, c *Conn, within time.Duration) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(within):
		t.Fatalf("Conn.Done not closed within %v", within)
	}
}

func containerState(t *testing.T, eng, name string) (exists, running bool) {
	cli, err := client.New(client.WithHost(eng))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	insp, err := cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, insp.Container.State != nil && insp.Container.State.Running
}

// TestLifecycle: the helper starts on first use, is shared, stops when idle, reports a crash to
// its viewers and restarts on the next use; Manager.Close leaves nothing running.
func TestLifecycle(t *testing.T) {
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(typ, func(t *testing.T) {
			requireBackend(t, typ)
			m, cfg := newTestManager(t, func(c *Config) { c.IdleTimeout = 700 * time.Millisecond })
			ctx := context.Background()
			a := agent("life1", typ, api.NetworkNone, api.Limits{})

			t.Run("first_use_starts_one_shared_helper", func(t *testing.T) {
				c1, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				c2, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				if c1 != c2 {
					t.Errorf("two Conn calls started two helpers")
				}
				if c1.Hello.Proto != ProtoVersion || c1.Hello.PID <= 0 {
					t.Errorf("hello = %+v", c1.Hello)
				}
			})
			t.Run("idle_stop_only_without_open_streams", func(t *testing.T) {
				c, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				st, err := c.Open(ctx, StreamExec)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Second) // > IdleTimeout, but a stream is open
				if c.Err() != nil {
					t.Fatalf("helper stopped with a stream open: %v", c.Err())
				}
				st.Close()
				waitDone(t, c, 10*time.Second)
				if !errors.Is(c.Err(), ErrHelperGone) || !strings.Contains(c.Err().Error(), "idle") {
					t.Errorf("Err after idle = %v, want ErrHelperGone naming idle", c.Err())
				}
				if typ == api.BackendContainer {
					if _, running := containerState(t, cfg.ContainerEngine, ContainerName(m.Instance(), a.ID)); running {
						t.Errorf("container still running after the idle stop")
					}
				}
				if res := sh(t, m, a, "echo again"); res.Stdout != "again\n" {
					t.Errorf("exec after idle stop = %+v", res)
				}
			})
			t.Run("crash_is_reported_to_viewers_and_restarts", func(t *testing.T) {
				c, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				viewer, err := c.Open(ctx, StreamExec) // e.g. a terminal viewer's stream
				if err != nil {
					t.Fatal(err)
				}
				// The helper dies inside the sandbox (its command kills the parent of its reaper).
				_, err = m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", "kill -9 $(ps -o ppid= -p $PPID); sleep 5"}})
				if err == nil {
					t.Errorf("Exec whose helper died returned no error")
				}
				waitDone(t, c, 10*time.Second)
				if !errors.Is(c.Err(), ErrHelperGone) {
					t.Errorf("Err = %v, want ErrHelperGone", c.Err())
				}
				viewer.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := viewer.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("viewer's stream after the crash: read err = %v, want it closed", err)
				}
				viewer.Close()
				c2, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				if c2 == c {
					t.Fatal("Conn returned the dead helper")
				}
				if res := sh(t, m, a, "echo restarted"); res.Stdout != "restarted\n" {
					t.Errorf("exec after restart = %+v", res)
				}
			})
			t.Run("backend_change_restarts_the_helper", func(t *testing.T) {
				c, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				full := a
				full.Backend.Network = api.NetworkFull
				c2, err := m.Conn(ctx, full)
				if err != nil {
					t.Fatal(err)
				}
				if c2 == c || c.Err() == nil {
					t.Errorf("changing the network kept the old helper")
				}
			})
			t.Run("close_leaves_nothing_running", func(t *testing.T) {
				c, err := m.Conn(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				// A running exec with a setsid'd child (escaping its process group): the reaper of
				// each exec kills such escapes when the exec ends, so the exec is still running here.
				go m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", "setsid sleep 1000 > /dev/null 2>&1 & sleep 1000"}, TimeoutS: 600}) // owner: this test; ends when m closes
				time.Sleep(500 * time.Millisecond)
				var tree []int
				if typ == api.BackendBwrap {
					tree = descendants(hostPid(t, c))
					if len(tree) < 4 {
						t.Fatalf("jail process tree = %v, want bwrap, its init, the helper and the sleep", alive(tree))
					}
				}
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				waitDone(t, c, 10*time.Second)
				time.Sleep(200 * time.Millisecond)
				if left := alive(tree); len(left) > 0 {
					t.Errorf("processes left after Close: %q", left)
				}
				if typ == api.BackendContainer {
					if exists, _ := containerState(t, cfg.ContainerEngine, ContainerName(m.Instance(), a.ID)); exists {
						t.Errorf("container left after Close")
					}
				}
				if _, err := m.Conn(ctx, a); err == nil {
					t.Errorf("Conn after Close succeeded")
				}
			})
		})
	}
}

// TestForgetPurge removes the agent's helper, backend state and home.
func TestForgetPurge(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, cfg := newTestManager(t, nil)
	a := agent("gone1", api.BackendBwrap, api.NetworkNone, api.Limits{})
	sh(t, m, a, "echo x > /home/agent/f")
	home := AgentHome(cfg.DataDir, a.ID)
	if _, err := os.Stat(filepath.Join(home, "f")); err != nil {
		t.Fatal(err)
	}
	c, _ := m.Conn(context.Background(), a)
	if err := m.Forget(context.Background(), a.ID, true); err != nil {
		t.Fatal(err)
	}
	waitDone(t, c, 5*time.Second)
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home after Forget(purge) = %v, want gone", err)
	}
	for _, bad := range []string{"../x", "a/b", "", ".hidden", strings.Repeat("x", 65)} {
		if _, err := m.Conn(context.Background(), agent(bad, api.BackendBwrap, api.NetworkNone, api.Limits{})); !errors.Is(err, ErrBadAgentID) {
			t.Errorf("Conn(agent id %q) = %v, want ErrBadAgentID", bad, err)
		}
	}
}

// TestCloseLeaksNoGoroutines: every goroutine the Manager, its Conns and exec streams start ends
// once Close returns.
func TestCloseLeaksNoGoroutines(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, err := NewManager(Config{DataDir: t.TempDir(), HelperPath: helperBin, ContainerEngine: os.Getenv("PORTHOLE_TEST_ENGINE"), IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"leak1", "leak2"} {
		a := agent(id, api.BackendBwrap, api.NetworkNone, api.Limits{})
		if res := sh(t, m, a, "echo hi"); res.Stdout != "hi\n" {
			t.Fatalf("exec: %+v", res)
		}
		c, _ := m.Conn(context.Background(), a)
		st, _ := c.Open(context.Background(), StreamExec) // left open: Close must end it
		_ = st
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIdleStopRacesNoCaller: uses that land right at the idle deadline either keep the helper or
// get a new one; none fails.
func TestIdleStopRacesNoCaller(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, _ := newTestManager(t, func(c *Config) { c.IdleTimeout = 30 * time.Millisecond })
	a := agent("race1", api.BackendBwrap, api.NetworkNone, api.Limits{})
	restarts := map[*Conn]bool{}
	for i := range 40 {
		time.Sleep(time.Duration(20+i%3*10) * time.Millisecond) // around the idle deadline
		res, err := m.Exec(context.Background(), a, api.ExecRequest{Command: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %d at the idle deadline: %+v, %v", i, res, err)
		}
		if c, err := m.Conn(context.Background(), a); err == nil {
			restarts[c] = true
		}
	}
	t.Logf("%d helpers over 40 execs", len(restarts))
	if len(restarts) < 2 {
		t.Errorf("the helper never idled out (%d helpers): the race was not exercised", len(restarts))
	}
}
