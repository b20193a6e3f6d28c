//go:build linux && !js

package browser

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/internal/testenv"
)

// The helper half in real sandboxes: the real porthole binary as the helper of bwrap jails
// (both networks) and container agents, Chromium inside, driven through the gateway's
// multiplexer (Service.newClient) over the bridges' helper stream.

var tcdpHelper struct {
	once      sync.Once
	dir, path string
	err       error
}

// browserHelperBin builds a helper with the exec and browser streams once (browser/internal/testhelper).
func browserHelperBin(t testing.TB) string {
	if p := os.Getenv("PORTHOLE_TEST_BROWSER_HELPER"); p != "" {
		return p
	}
	tcdpHelper.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		dir, err := os.MkdirTemp("", "porthole-browser-test-")
		if err != nil {
			tcdpHelper.err = err
			return
		}
		os.Chmod(dir, 0o755)
		tcdpHelper.dir, tcdpHelper.path = dir, filepath.Join(dir, "porthole")
		cmd := exec.Command("go", "build", "-o", tcdpHelper.path, "./browser/internal/testhelper")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tcdpHelper.err = fmt.Errorf("build porthole: %v\n%s", err, out)
		}
	})
	if tcdpHelper.err != nil {
		t.Fatal(tcdpHelper.err)
	}
	return tcdpHelper.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tcdpHelper.dir != "" {
		os.RemoveAll(tcdpHelper.dir)
	}
	os.Exit(code)
}

// newBrowserJails is a bridges.Manager of bwrap jails (engine "" ) or containers (engine set).
func newBrowserManager(t testing.TB, engine string) *bridges.Manager {
	cfg := bridges.Config{
		DataDir:     t.TempDir(),
		HelperPath:  browserHelperBin(t),
		IdleTimeout: time.Minute,
		Logger:      cdpTestLogger(t),
	}
	if engine == "" {
		cfg.BwrapPath = testenv.LookPath(t, "bwrap")
	} else {
		_, file, _, _ := runtime.Caller(0)
		cfg.ContainerEngine = engine
		cfg.DefaultImage = testenv.AgentImage(t, engine, filepath.Dir(filepath.Dir(file)))
	}
	testenv.LookPath(t, "chromium")
	m, err := bridges.NewManager(cfg)
	if err != nil {
		t.Fatalf("bridges.NewManager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func jailAgentB(id, owner, network string) api.Agent {
	return api.Agent{ID: id, Name: id, OwnerID: owner, Backend: api.Backend{Type: api.BackendBwrap, Network: network}}
}

func containerAgentB(id, owner string) api.Agent {
	return api.Agent{ID: id, Name: id, OwnerID: owner, Backend: api.Backend{Type: api.BackendContainer, Network: api.NetworkNone}}
}

// sh runs script in the agent's sandbox.
func sandboxSh(t testing.TB, m *bridges.Manager, a api.Agent, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", script}, TimeoutS: 45})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", script, a.ID, err)
	}
	return res.Stdout + res.Stderr
}

// browserService is a gateway's browser Service on m's helper streams.
func browserService(t testing.TB, m *bridges.Manager) *Service {
	s := NewService(Config{Logger: cdpTestLogger(t)}, func(ctx context.Context, a api.Agent) (net.Conn, error) {
		return m.Open(ctx, a, StreamKind)
	})
	t.Cleanup(s.Close)
	return s
}

func dialCDP(t testing.TB, s *Service, a api.Agent, name string) *cdpTestConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := s.newClient(ctx, a, name)
	if err != nil {
		t.Fatalf("newClient %s: %v", a.ID, err)
	}
	return newCDPTestConn(t, c)
}

// hostAddr is a non-loopback address of this host (a jail with network full reaches it).
func hostAddr(t testing.TB) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this host")
	return ""
}

// listeningSockets lists the TCP sockets in LISTEN state (st 0A) in the sandbox.
func listeningSockets(t testing.TB, m *bridges.Manager, a api.Agent) (listen []string, all string) {
	out := sandboxSh(t, m, a, "cat /proc/net/tcp /proc/net/tcp6; echo END")
	if !strings.Contains(out, "END") || !strings.Contains(out, "local_address") {
		t.Fatalf("cannot read /proc/net/tcp* in %s: %s", a.ID, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" {
			listen = append(listen, line)
		}
	}
	return listen, out
}

// chromiumRunning reports whether a Chromium with a debugging pipe runs in the sandbox.
func chromiumRunning(t testing.TB, m *bridges.Manager, a api.Agent) bool {
	out := sandboxSh(t, m, a, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -- '--remote-debugging-[p]ipe'`)
	return strings.TrimSpace(out) != "0"
}

// testBrowserSandbox: a page's title and a screenshot through the gateway's mux; the browser
// is headless (no desktop runs); two clients at once see only their own replies; no TCP port listens in the sandbox; file:/// shows the
// sandbox's own files and not the host's.
func testBrowserSandbox(t *testing.T, m *bridges.Manager, a api.Agent, pageURL, wantTitle string) {
	s := browserService(t, m)
	v := dialCDP(t, s, a, "view")
	auto := dialCDP(t, s, a, "automation:token:t1")
	sv := v.openPage(t, pageURL)
	if got := v.eval(t, sv, "document.title"); got != wantTitle {
		t.Errorf("title = %q, want %q", got, wantTitle)
	}
	png := v.screenshot(t, sv)
	t.Logf("%s: screenshot %d bytes", a.ID, len(png))

	// No desktop runs in the agent: its browser is headless.
	if ua := v.eval(t, sv, "navigator.userAgent"); !strings.Contains(ua, "HeadlessChrome") {
		t.Errorf("navigator.userAgent = %q, want HeadlessChrome (no desktop runs in %s)", ua, a.ID)
	}

	// Two clients at once, each its own page and calls: no reply of one reaches the other.
	sa := auto.openPage(t, "data:text/html,<title>auto</title>")
	var wg sync.WaitGroup
	for _, x := range []struct {
		tc         *cdpTestConn
		sess, want string
	}{{v, sv, wantTitle}, {auto, sa, "auto"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if got := x.tc.eval(t, x.sess, fmt.Sprintf("document.title + ':%d'", i)); got != fmt.Sprintf("%s:%d", x.want, i) {
					t.Errorf("eval %d = %q, want %s:%d", i, got, x.want, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, tc := range []*cdpTestConn{v, auto} {
		tc.mu.Lock()
		if len(tc.foreign) > 0 {
			t.Errorf("a client got replies it never asked for: %.200q", tc.foreign)
		}
		tc.mu.Unlock()
	}

	// No TCP port: the debugging protocol is on a pipe.
	if !chromiumRunning(t, m, a) {
		t.Fatalf("no Chromium with --remote-debugging-pipe runs in %s", a.ID)
	}
	if listen, all := listeningSockets(t, m, a); len(listen) > 0 {
		t.Errorf("TCP sockets listening in %s:\n%s\n(all:\n%s)", a.ID, strings.Join(listen, "\n"), all)
	}

	// file:/// is the sandbox's file system.
	marker := "porthole-marker-" + a.ID
	sandboxSh(t, m, a, "echo inside > ~/"+marker+".txt")
	v.navigate(t, sv, "file:///home/agent/")
	if body := v.eval(t, sv, "document.body.innerText"); !strings.Contains(body, marker) {
		t.Errorf("file:///home/agent/ does not list the agent's own file %s:\n%.500s", marker, body)
	}
	hostDir := t.TempDir()
	os.Chmod(hostDir, 0o755)
	secret := "host-secret-" + a.ID
	os.WriteFile(filepath.Join(hostDir, "secret.txt"), []byte(secret), 0o644)
	for _, u := range []string{"file://" + hostDir + "/secret.txt", "file://" + hostDir + "/"} {
		v.call(t, sv, "Page.navigate", map[string]any{"url": u})
		time.Sleep(500 * time.Millisecond)
		if body := v.eval(t, sv, "document.body ? document.body.innerText : ''"); strings.Contains(body, secret) || strings.Contains(body, "secret.txt") {
			t.Errorf("%s shows the host's file in %s: %.300s", u, a.ID, body)
		}
	}
}

// TestBrowserInJail: Chromium in bwrap jails, network none and full.
func TestBrowserInJail(t *testing.T) {
	m := newBrowserManager(t, "")
	t.Run("none", func(t *testing.T) {
		testBrowserSandbox(t, m, jailAgentB("brnone", "alice", api.NetworkNone),
			"data:text/html,<title>hello jail</title><h1 style='color:red'>hi</h1>", "hello jail")
	})
	t.Run("full", func(t *testing.T) {
		testenv.LookPath(t, "slirp4netns")
		ln, err := net.Listen("tcp", hostAddr(t)+":0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<title>served by the test</title><p>over the network</p>")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		testBrowserSandbox(t, m, jailAgentB("brfull", "alice", api.NetworkFull), "http://"+ln.Addr().String()+"/", "served by the test")
	})
}

// TestBrowserInContainer: the same in a container agent (the agent image carries Chromium and fonts).
func TestBrowserInContainer(t *testing.T) {
	engine := testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
	m := newBrowserManager(t, engine)
	testBrowserSandbox(t, m, containerAgentB("brcont", "alice"),
		"data:text/html,<title>hello container</title><h1>hi</h1>", "hello container")
}

// TestBrowserProfilesIsolatedAndPersistent: a cookie set in Alice's agent is in her profile
// (via CDP and as a file), absent from Bob's agent (via CDP and as a file), and still there
// after Alice's helper (and so her Chromium) was stopped and started again.
func TestBrowserProfilesIsolatedAndPersistent(t *testing.T) {
	m := newBrowserManager(t, "")
	testBrowserProfiles(t, m, jailAgentB("bralice", "alice", api.NetworkNone), jailAgentB("brbob", "bob", api.NetworkNone))
}

// TestBrowserProfilesInContainers: the same with Alice's and Bob's agents in containers.
func TestBrowserProfilesInContainers(t *testing.T) {
	m := newBrowserManager(t, testenv.Getenv(t, "PORTHOLE_TEST_ENGINE"))
	testBrowserProfiles(t, m, containerAgentB("bralicec", "alice"), containerAgentB("brbobc", "bob"))
}

// testBrowserProfiles: a cookie set in Alice's agent's browser is absent from Bob's (over CDP
// and as a file), and it survives a restart of Alice's helper (the profile in her home).
func testBrowserProfiles(t *testing.T, m *bridges.Manager, alice, bob api.Agent) {
	s := browserService(t, m)
	const domain = "porthole-cookie.test"
	cookies := func(tc *cdpTestConn) string {
		return string(tc.call(t, "", "Storage.getCookies", nil))
	}
	ac := dialCDP(t, s, alice, "view")
	ac.call(t, "", "Storage.setCookies", map[string]any{"cookies": []map[string]any{{
		"name": "sid", "value": "alice-secret-cookie", "domain": domain, "path": "/",
		"expires": float64(time.Now().Add(24 * time.Hour).Unix()), "secure": true,
	}}})
	if got := cookies(ac); !strings.Contains(got, "alice-secret-cookie") {
		t.Fatalf("Alice's cookie is not in her browser: %s", got)
	}
	bc := dialCDP(t, s, bob, "view")
	if got := cookies(bc); strings.Contains(got, "alice-secret-cookie") || strings.Contains(got, domain) {
		t.Errorf("Alice's cookie is in Bob's browser: %s", got)
	}

	// Stop Alice's helper: Chromium closes gracefully and writes its cookie store.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc, err := m.Conn(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Alice's first helper's stderr:\n%s", hc.Process().Stderr())
		}
	})
	select {
	case <-ac.done:
		t.Logf("Alice's client ended with the helper: %v", ac.err)
	case <-time.After(10 * time.Second):
		t.Errorf("Alice's client did not end when her helper stopped")
	}
	cookieFile := "~/" + ProfileSubdir + "/Default/Cookies"
	if out := sandboxSh(t, m, alice, "grep -a -c "+domain+" "+cookieFile+" || true"); strings.TrimSpace(out) == "0" || strings.Contains(out, "No such file") {
		t.Errorf("Alice's cookie file %s does not hold %s after a restart: %s", cookieFile, domain, out)
	}
	if out := sandboxSh(t, m, bob, "grep -a -c "+domain+" "+cookieFile+" 2>&1 || true"); !strings.HasPrefix(strings.TrimSpace(out), "0") && !strings.Contains(out, "No such file") {
		t.Errorf("Bob's cookie file holds Alice's cookie: %s", out)
	}
	ac2 := dialCDP(t, s, alice, "view")
	if got := cookies(ac2); !strings.Contains(got, "alice-secret-cookie") {
		t.Errorf("Alice's cookie did not survive her helper's restart: %s", got)
	}
}

// TestBrowserCrashRestarts: Chromium killed inside the sandbox ends the clients with the
// helper's reason; the next client starts it again.
func TestBrowserCrashRestarts(t *testing.T) {
	m := newBrowserManager(t, "")
	s := browserService(t, m)
	a := jailAgentB("brcrash", "alice", api.NetworkNone)
	c := dialCDP(t, s, a, "view")
	if got := c.eval(t, c.openPage(t, ""), "1+1"); got != "2" {
		t.Fatalf("1+1 = %q", got)
	}
	sandboxSh(t, m, a, `for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- '--remote-debugging-[p]ipe'; then kill -9 ${p#/proc/}; fi; done`)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the client did not end when Chromium was killed; in the sandbox:\n%s", sandboxSh(t, m, a, "ps -eo pid,ppid,stat,args | cut -c1-200; cat /tmp/porthole-browser/chromium.log | tail -5"))
	}
	if c.err == nil || !strings.Contains(c.err.Error(), "Chromium exited") {
		t.Errorf("client error = %v, want the helper's 'Chromium exited …'", c.err)
	}
	c2 := dialCDP(t, s, a, "view")
	if got := c2.eval(t, c2.openPage(t, ""), "2+2"); got != "4" {
		t.Errorf("after the restart 2+2 = %q", got)
	}
}

// TestUnprivilegedBrowser re-runs the jail tests as the unprivileged user the gateway runs as
// in deployments (bwrap jails with rlimits instead of cgroups).
func TestUnprivilegedBrowser(t *testing.T) {
	if os.Getenv(testenv.UnprivilegedChildEnv) != "" {
		return // the re-run itself (its pattern does not name this test; a guard against recursion)
	}
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "chromium")
	out := testenv.RerunUnprivileged(t, "^(TestBrowserInJail|TestBrowserProfilesIsolatedAndPersistent|TestBrowserCrashRestarts)$/^none$",
		map[string]string{"PORTHOLE_TEST_BROWSER_HELPER": browserHelperBin(t)})
	for _, want := range []string{"--- PASS: TestBrowserInJail ", "--- PASS: TestBrowserProfilesIsolatedAndPersistent ", "--- PASS: TestBrowserCrashRestarts "} {
		if !strings.Contains(out, want) {
			t.Errorf("the unprivileged run lacks %q", want)
		}
	}
}
