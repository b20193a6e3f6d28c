package bridges

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// TestIsolationMap is the isolation map of the Octop analysis, inverted: for each backend, Alice
// and Bob own one agent each, and everything here runs from inside Bob's agent through Exec.
// Each row is a subtest: TestIsolationMap/<backend>/<row>.
func TestIsolationMap(t *testing.T) {
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer, api.BackendHost} {
		t.Run(typ, func(t *testing.T) { isolationMap(t, typ) })
	}
}

// isoFixture is one gateway (Manager) with Alice's and Bob's agents and the secrets Bob must not reach.
type isoFixture struct {
	m                         *Manager
	cfg                       Config
	alice, bob, carol         api.Agent
	aliceSecret, storeSecret  string
	aliceHome, dataDir, store string
}

func newIsoFixture(t *testing.T, typ string) *isoFixture {
	f := &isoFixture{aliceSecret: "alice-" + randHex(8), storeSecret: "store-" + randHex(8)}
	f.m, f.cfg = newTestManager(t, func(c *Config) { c.AllowHost = typ == api.BackendHost })
	f.dataDir = f.cfg.DataDir
	// The gateway's store lives in the data dir, next to the agents' homes.
	f.store = filepath.Join(f.dataDir, "porthole.db")
	if err := os.WriteFile(f.store, []byte("users: admin hash "+f.storeSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.alice = agent("alice1", typ, api.NetworkNone, api.Limits{})
	f.bob = agent("bob1", typ, api.NetworkNone, api.Limits{Pids: 64, MemoryMiB: 256})
	f.carol = agent("bob2", typ, api.NetworkFull, api.Limits{})
	f.aliceHome = AgentHome(f.dataDir, f.alice.ID)
	res := sh(t, f.m, f.alice, "echo "+f.aliceSecret+" > /home/agent/secret.txt 2>/dev/null || echo "+f.aliceSecret+" > \"$HOME/secret.txt\"; cat \"$HOME/secret.txt\"")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, f.aliceSecret) {
		t.Fatalf("Alice writes her secret: %+v", res)
	}
	return f
}

// mustNotLeak fails if any secret of the gateway or of Alice appears in out.
func (f *isoFixture) mustNotLeak(t *testing.T, what string, res api.ExecResult) {
	t.Helper()
	for name, s := range map[string]string{"Alice's secret": f.aliceSecret, "the store's secret": f.storeSecret, "the gateway's env secret": gatewaySecret} {
		if strings.Contains(res.Stdout, s) || strings.Contains(res.Stderr, s) {
			t.Errorf("%s: %s leaked into Bob's agent:\nstdout: %s\nstderr: %s", what, name, res.Stdout, res.Stderr)
		}
	}
}

func isolationMap(t *testing.T, typ string) {
	requireBackend(t, typ)
	f := newIsoFixture(t, typ)
	isolated := typ != api.BackendHost

	t.Run("env_has_no_gateway_secret", func(t *testing.T) {
		script := `env; echo ---; cat /proc/self/environ /proc/$PPID/environ | tr '\0' '\n'`
		if isolated {
			script = `env; echo ---; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'`
		}
		res := sh(t, f.m, f.bob, script)
		f.mustNotLeak(t, "env and /proc/*/environ", res)
		if !strings.Contains(res.Stdout, "USER=agent") || strings.Contains(res.Stdout, secretEnv) {
			t.Errorf("env = %q, want the allowlisted environment (USER=agent) and no %s", res.Stdout, secretEnv)
		}
		for _, v := range []string{"HOME=", "PATH="} {
			if !strings.Contains(res.Stdout, v) {
				t.Errorf("env lacks %s: %q", v, res.Stdout)
			}
		}
	})
	t.Run("cwd_is_agent_home", func(t *testing.T) {
		res := sh(t, f.m, f.bob, `pwd; echo "$HOME"`)
		want := jailHome
		if !isolated {
			want = AgentHome(f.dataDir, f.bob.ID)
		}
		if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("pwd, $HOME = %q, want %q twice", res.Stdout, want)
		}
	})
	if !isolated {
		// The host backend is "not isolated" by definition: the rows below do not apply.
		return
	}

	t.Run("agent_is_not_root", func(t *testing.T) {
		// In a bwrap jail the agent is uid 1000 of its own user namespace. In a container it is a
		// host uid: 1000 under a root gateway (which gives it the home), the gateway's own uid under
		// an unprivileged one (whose home is 0700) — never root, with no capabilities either way.
		want := strconv.Itoa(jailUID)
		if typ == api.BackendContainer && os.Getuid() != 0 {
			want = strconv.Itoa(os.Getuid())
		}
		res := sh(t, f.m, f.bob, `id -u; grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | tr -s '\t' ' '; touch "$HOME/mine" && stat -c %u "$HOME/mine"`)
		got := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		wantLines := []string{want, "CapPrm: 0000000000000000", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", want}
		if res.ExitCode != 0 || strings.Join(got, "|") != strings.Join(wantLines, "|") {
			t.Errorf("id -u, capabilities, owner of a new file in the agent (%s) = %q (exit %d, stderr %q), want %q",
				typ, got, res.ExitCode, res.Stderr, wantLines)
		}
		t.Logf("in the %s agent: id -u = %s (gateway uid %d)", typ, got[0], os.Getuid())
		if got[0] == "0" {
			t.Errorf("the agent's processes run as root (id -u = 0) in the %s backend", typ)
		}
	})

	t.Run("alice_home_unreadable", func(t *testing.T) {
		script := fmt.Sprintf(`for p in %[1]q %[1]q/secret.txt %[2]q %[3]q; do
  ls -la "$p" >/dev/null 2>&1 && echo "LISTED $p"
  cat "$p" 2>/dev/null && echo "READ $p"
done
ls /home; cat /home/*/secret.txt 2>/dev/null; true`, f.aliceHome, filepath.Dir(f.aliceHome), filepath.Join(f.dataDir, "agents"))
		res := sh(t, f.m, f.bob, script)
		f.mustNotLeak(t, "reading Alice's home", res)
		if strings.Contains(res.Stdout, "LISTED") || strings.Contains(res.Stdout, "READ") {
			t.Errorf("Bob reached Alice's home:\n%s", res.Stdout)
		}
		if got := strings.Fields(res.Stdout); len(got) != 1 || got[0] != "agent" {
			t.Errorf("ls /home = %q, want only Bob's own \"agent\"", res.Stdout)
		}
	})
	t.Run("data_dir_and_store_unreadable", func(t *testing.T) {
		script := fmt.Sprintf(`for p in %q %q; do
  ls -la "$p" >/dev/null 2>&1 && echo "LISTED $p"
  cat "$p" 2>/dev/null && echo "READ $p"
done; true`, f.dataDir, f.store)
		res := sh(t, f.m, f.bob, script)
		f.mustNotLeak(t, "reading the data dir", res)
		if strings.Contains(res.Stdout, "LISTED") || strings.Contains(res.Stdout, "READ") {
			t.Errorf("Bob reached the gateway's data dir:\n%s", res.Stdout)
		}
	})
	t.Run("no_secret_anywhere_in_the_filesystem", func(t *testing.T) {
		// Every file Bob can see outside the read-only system tree, searched for the three secrets.
		script := fmt.Sprintf(`grep -rIl -e %s -e %s -e %s / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null; echo searched`,
			f.aliceSecret, f.storeSecret, gatewaySecret)
		res := sh(t, f.m, f.bob, script)
		if strings.TrimSpace(res.Stdout) != "searched" {
			t.Errorf("files holding a secret visible to Bob: %q", res.Stdout)
		}
	})
	t.Run("no_host_sockets", func(t *testing.T) {
		res := sh(t, f.m, f.bob, `ls -la /tmp/.X11-unix /run/dbus /run/docker.sock /var/run/docker.sock /run/podman /run/porthole-test /run/user 2>/dev/null | grep -v '^total' ; echo "DISPLAY=$DISPLAY DBUS=$DBUS_SESSION_BUS_ADDRESS"`)
		// DISPLAY is the agent's own display (sandboxproc.AgentDisplay, its jail's /tmp), never the host's.
		if strings.Contains(res.Stdout, ".sock") || strings.Contains(res.Stdout, "X0") || strings.TrimSpace(res.Stdout) != "DISPLAY=:0 DBUS=" {
			t.Errorf("host sockets or display visible to Bob: %q", res.Stdout)
		}
	})
	t.Run("only_own_processes", func(t *testing.T) {
		res := sh(t, f.m, f.bob, `ps -eo pid=,args=; ls /proc | grep -c '^[0-9]'`)
		f.mustNotLeak(t, "ps", res)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		before := strings.Join(lines[:len(lines)-1], "\n")
		n, _ := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
		// bwrap: the jail's init, the helper, sh, ps (+ ls/grep); container: init, helper, sh, ps, ...
		if n == 0 || n > 8 {
			t.Errorf("Bob sees %d processes, want only his sandbox's few:\n%s", n, before)
		}
		for _, bad := range []string{filepath.Base(os.Args[0]), f.dataDir, "podman", "conmon", "alice"} {
			if strings.Contains(before, bad) {
				t.Errorf("ps in Bob's agent shows %q:\n%s", bad, before)
			}
		}
	})
	t.Run("gateway_pid_unsignalable", func(t *testing.T) {
		// Alice's helper too: her jail's processes on the host.
		pids := []int{os.Getpid(), os.Getppid()}
		if c, err := f.m.Conn(context.Background(), f.alice); err == nil {
			if fields := strings.Fields(c.Process().Desc); len(fields) > 0 {
				if p, err := strconv.Atoi(fields[len(fields)-1]); err == nil {
					pids = append(pids, p)
				}
			}
		}
		for _, pid := range pids {
			res := sh(t, f.m, f.bob, fmt.Sprintf(`kill -0 %[1]d 2>/dev/null && echo ALIVE; kill -STOP %[1]d 2>/dev/null && echo STOPPED; true`, pid))
			if strings.Contains(res.Stdout, "STOPPED") {
				syscallKillCont(pid)
				t.Errorf("Bob stopped host pid %d", pid)
			}
			if strings.Contains(res.Stdout, "ALIVE") {
				t.Errorf("kill -0 %d from Bob's agent succeeded, want it to fail", pid)
			}
		}
		// And the process really exists on the host (the check above is meaningful).
		if err := syscallKill0(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	})

	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	var accepted sync.Map
	go func() { // owner: this test; exits when ln is closed at cleanup
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				accepted.Store(strings.TrimSpace(line), true)
			}()
		}
	}()
	// The address of the gateway's host as a sandbox with network "full" reaches it: a
	// non-loopback one (a full jail has its own network stack, without the host's 127.0.0.1).
	hostAddr := outsideIP(t)
	if typ == api.BackendContainer {
		hostAddr = "host.containers.internal"
	}
	connect := func(a api.Agent, addr, token string) api.ExecResult {
		return sh(t, f.m, a, fmt.Sprintf(`timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d && echo %s >&3 && echo CONNECTED'; true`, addr, port, token))
	}
	t.Run("network_none_cannot_reach_gateway_port", func(t *testing.T) {
		for _, addr := range append([]string{"127.0.0.1", "10.88.0.1"}, hostIPs()...) {
			tok := "none-" + randHex(4)
			res := connect(f.bob, addr, tok)
			time.Sleep(50 * time.Millisecond)
			if _, ok := accepted.Load(tok); ok || strings.Contains(res.Stdout, "CONNECTED") {
				t.Errorf("Bob (network none) connected to %s:%d: %+v", addr, port, res)
			}
		}
	})
	t.Run("network_full_reaches_gateway_port", func(t *testing.T) {
		tok := "full-" + randHex(4)
		res := connect(f.carol, hostAddr, tok)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, ok := accepted.Load(tok); ok {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, ok := accepted.Load(tok); !ok || !strings.Contains(res.Stdout, "CONNECTED") {
			t.Errorf("Bob's agent with network full did not reach %s:%d: %+v", hostAddr, port, res)
		}
	})

	t.Run("fork_bomb_stopped_alice_unaffected", func(t *testing.T) {
		// Bob's limit is 64 pids. bash retries a refused fork ("fork: retry: Resource temporarily
		// unavailable") until the exec's timeout kills the whole group.
		var bomb api.ExecResult
		var bombErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			bomb, bombErr = f.m.Exec(context.Background(), f.bob, api.ExecRequest{
				Command:  []string{"bash", "-c", `for i in $(seq 1000); do sleep 60 & done; wait`},
				TimeoutS: 6,
			})
		}()
		time.Sleep(2 * time.Second)
		start := time.Now()
		res := sh(t, f.m, f.alice, "echo alive; cat /home/agent/secret.txt")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "alive") {
			t.Errorf("Alice's agent during Bob's fork bomb: %+v", res)
		}
		t.Logf("Alice's exec during the fork bomb took %v", time.Since(start))
		<-done
		if bombErr != nil {
			t.Fatalf("fork bomb exec: %v", bombErr)
		}
		if !strings.Contains(bomb.Stderr, "Resource temporarily unavailable") {
			t.Errorf("fork bomb was not refused by a limit: exit %d, stderr %q", bomb.ExitCode, lastLines(bomb.Stderr, 3))
		}
		// Bob's agent recovers once the bomb is gone.
		if res := sh(t, f.m, f.bob, "echo recovered"); !strings.Contains(res.Stdout, "recovered") {
			t.Errorf("Bob's agent after the fork bomb: %+v", res)
		}
	})
	t.Run("memory_hog_stopped_alice_unaffected", func(t *testing.T) {
		// tail -c 900M of a pipe holds 900 MiB; Bob's limit is 256 MiB.
		var hog api.ExecResult
		var hogErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			hog, hogErr = f.m.Exec(context.Background(), f.bob, api.ExecRequest{
				Command:  []string{"sh", "-c", `head -c 1000m /dev/zero | tail -c 900m | wc -c`},
				TimeoutS: 60,
			})
		}()
		res := sh(t, f.m, f.alice, "echo alive")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "alive") {
			t.Errorf("Alice's agent during Bob's memory hog: %+v", res)
		}
		<-done
		if hogErr != nil {
			t.Fatalf("memory hog exec: %v", hogErr)
		}
		if strings.TrimSpace(hog.Stdout) == strconv.Itoa(900<<20) {
			t.Errorf("memory hog held 900 MiB under a 256 MiB limit: %+v", hog)
		}
		if !strings.Contains(hog.Stderr, "Killed") && !strings.Contains(hog.Stderr, "memory exhausted") {
			t.Errorf("memory hog was not stopped by a limit (OOM kill or ENOMEM): %+v", hog)
		}
		if res := sh(t, f.m, f.bob, "echo recovered"); !strings.Contains(res.Stdout, "recovered") {
			t.Errorf("Bob's agent after the memory hog: %+v", res)
		}
	})

	t.Run("home_survives_helper_restart_and_gateway_restart", func(t *testing.T) {
		tok := "persist-" + randHex(6)
		sh(t, f.m, f.bob, "echo "+tok+" > /home/agent/persist.txt")
		// A crash: kill the helper; the next use starts a new one.
		c, err := f.m.Conn(context.Background(), f.bob)
		if err != nil {
			t.Fatal(err)
		}
		c.Process().Kill()
		select {
		case <-c.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("Conn.Done not closed after the helper was killed")
		}
		if res := sh(t, f.m, f.bob, "cat /home/agent/persist.txt"); strings.TrimSpace(res.Stdout) != tok {
			t.Errorf("after a helper restart: cat = %+v, want %q", res, tok)
		}
		// A gateway restart: a new Manager over the same data dir.
		if err := f.m.Close(); err != nil {
			t.Fatal(err)
		}
		m2, err := NewManager(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m2.Close() })
		if res := sh(t, m2, f.bob, "cat /home/agent/persist.txt"); strings.TrimSpace(res.Stdout) != tok {
			t.Errorf("after a gateway restart: cat = %+v, want %q", res, tok)
		}
	})
}

// TestJailAccounts: a jail knows only root and the agent; the host's accounts are not there.
func TestJailAccounts(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, _ := newTestManager(t, nil)
	res := sh(t, m, agent("acct1", api.BackendBwrap, api.NetworkNone, api.Limits{}), "cut -d: -f1 /etc/passwd | tr '\\n' ' '; echo; cut -d: -f1 /etc/group | tr '\\n' ' '; echo; id -un; ls /etc/shadow 2>&1 >/dev/null | grep -c 'No such' ")
	want := "root agent \nroot agent \nagent\n1\n"
	if res.Stdout != want {
		t.Errorf("accounts in the jail = %q, want %q", res.Stdout, want)
	}
}
