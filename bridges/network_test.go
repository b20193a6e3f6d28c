package bridges

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// The network tests try, from inside real agents, to reach what lives on the host: an X server
// (its path and its abstract socket), an abstract and a path unix socket, a TCP port on the
// host's 127.0.0.1 (standing for the gateway's own port) and slirp's alias of it (10.0.2.2).
// The jail side is `porthole nettest ...` of the test helper (bridges/internal/testhelper).

// tokenListener records the first line of every connection (or datagram) it receives.
type tokenListener struct {
	addr string
	mu   sync.Mutex
	got  map[string]bool
}

func (l *tokenListener) saw(tok string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[tok]
}

func (l *tokenListener) record(tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.got == nil {
		l.got = map[string]bool{}
	}
	l.got[strings.TrimSpace(tok)] = true
}

// waitSaw polls for tok (a connection's line arrives a little after the connect).
func (l *tokenListener) waitSaw(tok string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if l.saw(tok) || time.Now().After(deadline) {
			return l.saw(tok)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listenTokens serves network/addr until the test ends.
func listenTokens(t testing.TB, network, addr string) *tokenListener {
	t.Helper()
	tl := &tokenListener{}
	if network == "udp" {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		tl.addr = pc.LocalAddr().String()
		go func() { // owner: the test; ends when pc is closed at cleanup
			buf := make([]byte, 2048)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				tl.record(string(buf[:n]))
			}
		}()
		return tl
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tl.addr = ln.Addr().String()
	go func() { // owner: the test; ends when ln is closed at cleanup
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				tl.record(line)
			}()
		}
	}()
	return tl
}

// startXvfb starts `Xvfb :N -nolisten tcp` (path socket /tmp/.X11-unix/XN and abstract
// @/tmp/.X11-unix/XN) and returns N once both accept connections from the host.
func startXvfb(t testing.TB) int {
	t.Helper()
	xvfb := testenv.LookPath(t, "Xvfb")
	for range 20 {
		n := 200 + rand.IntN(700)
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", n)); err == nil {
			continue
		}
		cmd := exec.Command(xvfb, ":"+strconv.Itoa(n), "-nolisten", "tcp", "-screen", "0", "64x64x24")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }() // owner: the test; ends with Xvfb
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		path := fmt.Sprintf("/tmp/.X11-unix/X%d", n)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				t.Logf("Xvfb :%d exited: %s", n, out.String())
				deadline = time.Time{}
				continue
			default:
			}
			c1, err1 := net.Dial("unix", path)
			c2, err2 := net.Dial("unix", "@"+path)
			if err1 == nil && err2 == nil {
				c1.Close()
				c2.Close()
				return n
			}
			if c1 != nil {
				c1.Close()
			}
			if c2 != nil {
				c2.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
		if deadline.IsZero() {
			continue // display taken meanwhile: another number
		}
		t.Fatalf("Xvfb :%d: sockets not reachable from the host after 15s: %s", n, out.String())
	}
	t.Fatal("no free X display number")
	return 0
}

// hostTarget is one thing on the host no agent may reach.
type hostTarget struct {
	name, network, addr string
	ln                  *tokenListener // nil: only the connect result tells (Xvfb)
}

// hostTargets starts the host-side listeners and returns them.
func hostTargets(t *testing.T) []hostTarget {
	x := startXvfb(t)
	xpath := fmt.Sprintf("/tmp/.X11-unix/X%d", x)
	abstract := listenTokens(t, "unix", "@porthole-nettest-"+randHex(6))
	// A path socket outside /tmp (a jail has its own /tmp): /var/tmp, mode 0777 so that only the
	// jail's view of the filesystem can stop the connect.
	dir, err := os.MkdirTemp("/var/tmp", "porthole-nettest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	path := listenTokens(t, "unix", filepath.Join(dir, "s"))
	os.Chmod(filepath.Join(dir, "s"), 0o777)
	// Stands for the gateway's port on 127.0.0.1 (row 2: login attempts from a jail).
	loop := listenTokens(t, "tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(loop.addr)
	return []hostTarget{
		{"x11_path_socket", "unix", xpath, nil},
		{"x11_abstract_socket", "unix", "@" + xpath, nil},
		{"abstract_socket", "unix", abstract.addr, abstract},
		{"path_socket_outside_tmp", "unix", path.addr, path},
		{"host_loopback_tcp", "tcp", loop.addr, loop},
		{"slirp_host_loopback_alias", "tcp", "10.0.2.2:" + port, loop},
	}
}

// tryConnect runs `nettest connect` in the agent; true if it connected.
func tryConnect(t *testing.T, m *Manager, a api.Agent, network, addr, tok string) (bool, api.ExecResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{HelperPathInJail, "nettest", "connect", network, addr, tok}, TimeoutS: 20})
	if err != nil {
		t.Fatalf("exec nettest connect in %s: %v", a.ID, err)
	}
	return res.ExitCode == 0 && strings.Contains(res.Stdout, "CONNECTED"), res
}

// TestNetworkHostSocketsUnreachable: issue 7 row 1 (a full agent reached the host's abstract
// sockets, its X server and 127.0.0.1) and row 2 (the gateway's port on 127.0.0.1). For each
// backend and network, an agent tries to connect to each host target; each try must fail and no
// host listener may see the agent's token.
func TestNetworkHostSocketsUnreachable(t *testing.T) {
	targets := hostTargets(t)
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(typ, func(t *testing.T) {
			requireBackend(t, typ)
			m, _ := newTestManager(t, nil)
			for _, network := range []string{api.NetworkNone, api.NetworkFull} {
				t.Run(network, func(t *testing.T) {
					a := agent("net-"+network, typ, network, api.Limits{})
					for _, tg := range targets {
						t.Run(tg.name, func(t *testing.T) {
							tok := "tok-" + randHex(6)
							ok, res := tryConnect(t, m, a, tg.network, tg.addr, tok)
							if ok {
								t.Errorf("%s agent with network %s connected to the host's %s %s: %+v", typ, network, tg.network, tg.addr, res)
							}
							if tg.ln != nil && tg.ln.waitSaw(tok, 200*time.Millisecond) {
								t.Errorf("the host's %s %s received the token of a %s agent with network %s", tg.network, tg.addr, typ, network)
							}
							t.Logf("%s %s from %s/%s: %s", tg.network, tg.addr, typ, network, strings.TrimSpace(res.Stderr))
						})
					}
				})
			}
		})
	}
}

// outsideIP is an address of this machine that is not loopback: what a "full" agent reaches as it
// would reach any address outside.
func outsideIP(t testing.TB) string {
	ips := hostIPs()
	if len(ips) == 0 {
		testenv.Missing(t, "a non-loopback IPv4 address on this machine")
	}
	return ips[0]
}

// TestNetworkFullOutbound: a "full" bwrap agent has its own stack (tap0 10.0.2.100, MTU 65520,
// slirp's DNS in a generated resolv.conf) and reaches an outside address by TCP and UDP.
func TestNetworkFullOutbound(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	testenv.LookPath(t, "slirp4netns")
	ip := outsideIP(t)
	tcp := listenTokens(t, "tcp", net.JoinHostPort(ip, "0"))
	udp := listenTokens(t, "udp", net.JoinHostPort(ip, "0"))
	m, _ := newTestManager(t, nil)
	a := agent("netfull1", api.BackendBwrap, api.NetworkFull, api.Limits{})

	res := sh(t, m, a, `cat /etc/resolv.conf; ip -o -4 addr show dev tap0 | awk '{print $4}'; ip -o link show dev tap0 | grep -o 'mtu [0-9]*' | cut -d' ' -f2; ip route show default | awk '{print $3}'`)
	want := "nameserver 10.0.2.3\n10.0.2.100/24\n65520\n10.0.2.2\n"
	if res.Stdout != want {
		t.Errorf("resolv.conf, tap0 address, MTU, default route in the jail = %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	tok := "tcp-" + randHex(6)
	if ok, res := tryConnect(t, m, a, "tcp", tcp.addr, tok); !ok || !tcp.waitSaw(tok, 5*time.Second) {
		t.Errorf("full agent did not reach the outside TCP address %s: %+v", tcp.addr, res)
	}
	tok = "udp-" + randHex(6)
	// UDP is connectionless: send a few datagrams, one must arrive.
	for range 3 {
		tryConnect(t, m, a, "udp", udp.addr, tok)
		if udp.waitSaw(tok, time.Second) {
			break
		}
	}
	if !udp.saw(tok) {
		t.Errorf("no UDP datagram of the full agent arrived at %s", udp.addr)
	}
	// The jail's own loopback is its own: a listener there is reachable from inside only.
	res = sh(t, m, a, HelperPathInJail+` nettest listen tcp 127.0.0.1:7777 2 & sleep 0.5; `+HelperPathInJail+` nettest connect tcp 127.0.0.1:7777 self; wait`)
	if !strings.Contains(res.Stdout, "GOT self") {
		t.Errorf("the jail's own loopback does not work: %+v", res)
	}
}

// TestNetworkAgentsIsolated: two "full" agents cannot reach each other, in either direction. A bwrap
// agent has its own namespace (both have 10.0.2.100); a container agent has a network of its own
// (isolated from the other agents' networks), so neither its address nor its name leads to another
// agent. The prober tries every address it could use for the listener: the listener's own addresses,
// slirp's, the host's, and for containers the listener's container and network names.
func TestNetworkAgentsIsolated(t *testing.T) {
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(typ, func(t *testing.T) {
			requireBackend(t, typ)
			m, _ := newTestManager(t, nil)
			a := agent("neta", typ, api.NetworkFull, api.Limits{})
			b := agent("netb", typ, api.NetworkFull, api.Limits{})
			t.Run("b_to_a", func(t *testing.T) { checkAgentUnreachable(t, m, a, b) })
			t.Run("a_to_b", func(t *testing.T) { checkAgentUnreachable(t, m, b, a) })
		})
	}
}

// checkAgentUnreachable listens in agent l and has agent p connect to every address of l it could
// try; l must receive its own connection and none of p's.
func checkAgentUnreachable(t *testing.T, m *Manager, l, p api.Agent) {
	typ := l.Backend.Type
	// l's addresses as l sees them (a container has its own on its network); from the kernel's
	// local routes, as an image may have no `ip`.
	res := sh(t, m, l, `awk '/32 host LOCAL/ {print prev} {prev=$2}' /proc/net/fib_trie | sort -u`)
	addrs := append(strings.Fields(res.Stdout), "10.0.2.100", "10.0.2.2", "10.0.2.15", "127.0.0.1")
	addrs = append(addrs, hostIPs()...)
	if typ == api.BackendContainer {
		// By name: the listener's container and network names (an engine with container DNS would
		// resolve them), and the host's name for itself.
		addrs = append(addrs, ContainerName(m.Instance(), l.ID), NetworkName(m.Instance(), l.ID), "host.containers.internal")
	}
	const port = "7778"
	listening := make(chan api.ExecResult, 1)
	selfTok := "self-" + randHex(4)
	go func() { // owner: this test; ends with the exec (bounded by the listen time)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := m.Exec(ctx, l, api.ExecRequest{Command: []string{"sh", "-c",
			HelperPathInJail + ` nettest listen tcp 0.0.0.0:` + port + ` 20 & sleep 0.5; ` + HelperPathInJail + ` nettest connect tcp 127.0.0.1:` + port + ` ` + selfTok + `; wait`}, TimeoutS: 40})
		if err != nil {
			r.Stderr = err.Error()
		}
		listening <- r
	}()
	time.Sleep(1500 * time.Millisecond)
	// One exec for all tries (each failed connect takes up to 3 s): the token of try i is pfx-i.
	pfx := "p-" + randHex(4)
	var script strings.Builder
	for i, addr := range addrs {
		fmt.Fprintf(&script, "echo %q: $(%s nettest connect tcp %q %s-%d 2>&1)\n", addr, HelperPathInJail, net.JoinHostPort(addr, port), pfx, i)
	}
	// A connect may succeed and reach something else (whatever answers that address outside);
	// what must never happen is the listener receiving the prober's token.
	t.Logf("%s -> %s tries:\n%s", p.ID, l.ID, sh(t, m, p, script.String()).Stdout)
	rl := <-listening
	if !strings.Contains(rl.Stdout, "GOT "+selfTok) {
		t.Fatalf("agent %s's listener did not work (the check is void): %+v", l.ID, rl)
	}
	for i, addr := range addrs {
		if strings.Contains(rl.Stdout, fmt.Sprintf("GOT %s-%d\n", pfx, i)) {
			t.Errorf("agent %s received agent %s's connection to %s:%s (%s)", l.ID, p.ID, addr, port, typ)
		}
	}
}

// syncBuffer is a log sink the test reads while the Manager writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNetworkStackLifecycle: one slirp4netns per "full" agent, ended with the helper; its death is
// logged; none of it for "none".
func TestNetworkStackLifecycle(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	testenv.LookPath(t, "slirp4netns")
	var logs syncBuffer
	m, _ := newTestManager(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	l := m.launchers[api.BackendBwrap].(*bwrapLauncher)
	ctx := t.Context()
	none := agent("netlife0", api.BackendBwrap, api.NetworkNone, api.Limits{})
	if _, err := m.Conn(ctx, none); err != nil {
		t.Fatal(err)
	}
	if l.netStackOf(none.ID) != nil {
		t.Errorf("an agent with network none has a network stack")
	}
	full := agent("netlife1", api.BackendBwrap, api.NetworkFull, api.Limits{})
	if _, err := m.Conn(ctx, full); err != nil {
		t.Fatal(err)
	}
	ns := l.netStackOf(full.ID)
	if ns == nil {
		t.Fatal("no network stack for a full agent")
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ns.pid)); strings.TrimSpace(string(comm)) != "slirp4netns" {
		t.Fatalf("pid %d is %q, want slirp4netns", ns.pid, comm)
	}
	// Stopping the helper ends its network stack.
	if err := m.Stop(ctx, full.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ns.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("slirp4netns pid %d still runs 5s after its helper stopped", ns.pid)
	}
	if err := syscall.Kill(ns.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 slirp4netns pid %d after stop: %v, want ESRCH", ns.pid, err)
	}
	if strings.Contains(logs.String(), "slirp4netns of a network-full agent died") {
		t.Errorf("an orderly stop was logged as a death:\n%s", logs.String())
	}
	// A slirp4netns that dies under a running agent is logged.
	if _, err := m.Conn(ctx, full); err != nil {
		t.Fatal(err)
	}
	ns = l.netStackOf(full.ID)
	syscall.Kill(ns.pid, syscall.SIGKILL)
	select {
	case <-ns.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("killed slirp4netns not reaped")
	}
	time.Sleep(50 * time.Millisecond)
	if !strings.Contains(logs.String(), "slirp4netns of a network-full agent died") {
		t.Errorf("the death of slirp4netns was not logged:\n%s", logs.String())
	}
}

// TestNetworkStackFailsClosed: without a working slirp4netns a "full" agent does not start
// (ErrBackendUnavailable naming the cause), never on the host's network; "none" still starts,
// and the probe says which.
func TestNetworkStackFailsClosed(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	fake := filepath.Join(t.TempDir(), "slirp4netns-broken")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'slirp4netns: broken on purpose' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(fake), 0o755)
	for _, tc := range []struct{ name, slirp, want string }{
		{"missing", "/nonexistent/slirp4netns", "slirp4netns not found"},
		{"fails", fake, "broken on purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t, nil)
			m.launchers[api.BackendBwrap].(*bwrapLauncher).slirp = tc.slirp
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := m.Exec(ctx, agent("netfail1", api.BackendBwrap, api.NetworkFull, api.Limits{}), api.ExecRequest{Command: []string{"true"}})
			if !errors.Is(err, ErrBackendUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("full agent with slirp4netns %s: err = %v, want ErrBackendUnavailable naming %q", tc.name, err, tc.want)
			}
			if res := sh(t, m, agent("netfail0", api.BackendBwrap, api.NetworkNone, api.Limits{}), "echo ok"); strings.TrimSpace(res.Stdout) != "ok" {
				t.Errorf("a none agent next to a broken network stack: %+v", res)
			}
			var detail string
			for _, r := range m.Probe(ctx) {
				if r.Backend == api.BackendBwrap {
					detail = r.Detail
				}
			}
			if tc.name == "missing" && !strings.Contains(detail, "network full: UNAVAILABLE") {
				t.Errorf("probe detail = %q, want it to say network full is unavailable", detail)
			}
		})
	}
	// The probe of a working setup names the network stack.
	m, _ := newTestManager(t, nil)
	for _, r := range m.Probe(t.Context()) {
		if r.Backend == api.BackendBwrap && !strings.Contains(r.Detail, "slirp4netns") {
			t.Errorf("bwrap probe detail = %q, want the network stack named", r.Detail)
		}
	}
}

// agentNetworks lists the engine networks labelled for the gateway instance, by name.
func agentNetworks(t testing.TB, instance string) map[string]network.Summary {
	t.Helper()
	cli, err := client.New(client.WithHost(engine(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.NetworkList(context.Background(), client.NetworkListOptions{
		Filters: make(client.Filters).Add("label", LabelGateway+"="+instance),
	})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	out := map[string]network.Summary{}
	for _, n := range list.Items {
		out[n.Name] = n
	}
	return out
}

// TestNetworkContainerOwnNetwork: a "full" container agent is attached to a network of its own
// (never the engine's shared bridge), labelled for its gateway and agent; it reaches an outside
// address; the network goes when the agent becomes "none" and when the agent is forgotten.
func TestNetworkContainerOwnNetwork(t *testing.T) {
	requireBackend(t, api.BackendContainer)
	ip := outsideIP(t)
	tcp := listenTokens(t, "tcp", net.JoinHostPort(ip, "0"))
	m, _ := newTestManager(t, nil)
	a := agent("cnet1", api.BackendContainer, api.NetworkFull, api.Limits{})
	tok := "tcp-" + randHex(6)
	if ok, res := tryConnect(t, m, a, "tcp", tcp.addr, tok); !ok || !tcp.waitSaw(tok, 5*time.Second) {
		t.Errorf("full container agent did not reach the outside TCP address %s: %+v", tcp.addr, res)
	}

	cli, err := client.New(client.WithHost(engine(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	name := NetworkName(m.Instance(), a.ID)
	insp, err := cli.ContainerInspect(t.Context(), ContainerName(m.Instance(), a.ID), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var attached []string
	if ns := insp.Container.NetworkSettings; ns != nil {
		for n := range ns.Networks {
			attached = append(attached, n)
		}
	}
	if len(attached) != 1 || attached[0] != name {
		t.Errorf("full container agent is attached to %q, want only its own network %q", attached, name)
	}
	nets := agentNetworks(t, m.Instance())
	if n, ok := nets[name]; !ok || n.Labels[LabelAgent] != a.ID {
		t.Errorf("agent network %s: %+v (of %d labelled for the gateway), want it labelled %s=%s", name, n, len(nets), LabelAgent, a.ID)
	}

	// The agent's network is set to none: no network left for it.
	none := agent("cnet1", api.BackendContainer, api.NetworkNone, api.Limits{})
	if res := sh(t, m, none, "echo ok"); strings.TrimSpace(res.Stdout) != "ok" {
		t.Fatalf("agent switched to network none: %+v", res)
	}
	if _, ok := agentNetworks(t, m.Instance())[name]; ok {
		t.Errorf("network %s remains after its agent switched to network none", name)
	}
	// Back to full, then forgotten: its network goes with it.
	sh(t, m, a, "true")
	if _, ok := agentNetworks(t, m.Instance())[name]; !ok {
		t.Fatalf("network %s not recreated when the agent is full again", name)
	}
	if err := m.Forget(t.Context(), a.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := agentNetworks(t, m.Instance())[name]; ok {
		t.Errorf("network %s remains after its agent was forgotten", name)
	}
}

// TestNetworkContainerNetworksNotLeaked: every "full" container agent gets a network of its own,
// each with its own subnet; forgetting agents and closing the gateway remove them all, so that
// creating and deleting agents does not exhaust the engine's subnet pool.
func TestNetworkContainerNetworksNotLeaked(t *testing.T) {
	requireBackend(t, api.BackendContainer)
	m, _ := newTestManager(t, nil)
	const n = 4
	for round := range 2 {
		var ids []string
		for i := range n {
			a := agent(fmt.Sprintf("leak%d", i), api.BackendContainer, api.NetworkFull, api.Limits{})
			if _, err := m.Conn(t.Context(), a); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.ID)
		}
		nets := agentNetworks(t, m.Instance())
		subnets := map[string]bool{}
		for _, nw := range nets {
			for _, c := range nw.IPAM.Config {
				subnets[c.Subnet.String()] = true
			}
		}
		if len(nets) != n || len(subnets) != n {
			t.Fatalf("round %d: %d agents have %d networks with %d subnets, want %d each: %v", round, n, len(nets), len(subnets), n, subnets)
		}
		if round == 1 {
			break // the rest goes with Close
		}
		for _, id := range ids {
			if err := m.Forget(t.Context(), id, true); err != nil {
				t.Fatal(err)
			}
		}
		if left := agentNetworks(t, m.Instance()); len(left) > 0 {
			t.Fatalf("%d network(s) remain after all agents were forgotten", len(left))
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if left := agentNetworks(t, m.Instance()); len(left) > 0 {
		t.Errorf("%d network(s) remain after the gateway closed", len(left))
	}
}

// containerAddrs are the container agent's own IPv4 addresses (its kernel's local routes, as the
// image may have no `ip`), loopback excluded.
func containerAddrs(t *testing.T, m *Manager, a api.Agent) []string {
	t.Helper()
	res := sh(t, m, a, `awk '/32 host LOCAL/ {print prev} {prev=$2}' /proc/net/fib_trie | sort -u`)
	var out []string
	for _, s := range strings.Fields(res.Stdout) {
		if !strings.HasPrefix(s, "127.") {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatalf("container agent %s has no address of its own: %+v", a.ID, res)
	}
	return out
}

// TestNetworkCrossBackendIsolated: a "full" bwrap agent cannot reach a "full" container agent.
// slirp4netns connects from the host's network namespace, which routes to the engine's container
// networks; container agents' networks therefore come from Config.ContainerSubnetPool and every
// "full" jail has an unreachable route for the pool (and for Config.BlockedCIDRs), which the agent
// cannot remove. The host itself reaches the container's listener (so the check is not void), the
// bwrap agent does not; the bwrap agent still reaches outside addresses, except a configured
// blocked one.
func TestNetworkCrossBackendIsolated(t *testing.T) {
	requireBackend(t, api.BackendContainer)
	requireBackend(t, api.BackendBwrap)
	testenv.LookPath(t, "slirp4netns")
	testenv.LookPath(t, "curl")
	ip := outsideIP(t)
	outside := listenTokens(t, "tcp", net.JoinHostPort(ip, "0"))
	blocked := listenTokens(t, "tcp", net.JoinHostPort(ip, "0"))
	_, blockedPort, _ := net.SplitHostPort(blocked.addr)
	m, _ := newTestManager(t, nil)
	c := agent("xbc", api.BackendContainer, api.NetworkFull, api.Limits{})
	b := agent("xbb", api.BackendBwrap, api.NetworkFull, api.Limits{})

	addrs := containerAddrs(t, m, c)
	pool := netip.MustParsePrefix(DefaultContainerSubnetPool)
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err != nil || !pool.Contains(a) {
			t.Errorf("container agent's address %s is not in the subnet pool %s", s, pool)
		}
	}
	const port = "7791"
	listening := make(chan api.ExecResult, 1)
	go func() { // owner: this test; ends with the exec (bounded by the listen time)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := m.Exec(ctx, c, api.ExecRequest{Command: []string{HelperPathInJail, "nettest", "listen", "tcp", "0.0.0.0:" + port, "15"}, TimeoutS: 40})
		if err != nil {
			r.Stderr = err.Error()
		}
		listening <- r
	}()
	time.Sleep(1500 * time.Millisecond)
	hostTok := "host-" + randHex(4)
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(addrs[0], port), 3*time.Second); err == nil {
		fmt.Fprintln(conn, hostTok)
		conn.Close()
	} else {
		t.Errorf("the host cannot reach the container agent's listener %s:%s (the check is void): %v", addrs[0], port, err)
	}
	var script strings.Builder
	pfx := "xb-" + randHex(4)
	for i, addr := range addrs {
		fmt.Fprintf(&script, "echo %q: $(%s nettest connect tcp %q %s-%d 2>&1)\n", addr, HelperPathInJail, net.JoinHostPort(addr, port), pfx, i)
		// Bound to tap0 (SO_BINDTODEVICE, allowed unprivileged): a failed route lookup then makes
		// the kernel assume the address is on tap0's link; nothing there answers its ARP.
		fmt.Fprintf(&script, "echo %q bound to tap0: $(curl -sS -m 4 --interface tap0 http://%s/%s-dev%d 2>&1 && echo CONNECTED)\n", addr, net.JoinHostPort(addr, port), pfx, i)
	}
	tries := sh(t, m, b, script.String())
	t.Logf("bwrap -> container tries:\n%s", tries.Stdout)
	if strings.Contains(tries.Stdout, "CONNECTED") {
		t.Errorf("a full bwrap agent connected to a full container agent's address: %s", tries.Stdout)
	}
	rl := <-listening
	if !strings.Contains(rl.Stdout, "GOT "+hostTok) {
		t.Errorf("the container agent's listener did not get the host's connection (the check is void): %+v", rl)
	}
	for i, addr := range addrs {
		if strings.Contains(rl.Stdout, fmt.Sprintf("GOT %s-%d\n", pfx, i)) || strings.Contains(rl.Stdout, fmt.Sprintf("%s-dev%d", pfx, i)) {
			t.Errorf("container agent received the bwrap agent's connection to %s:%s", addr, port)
		}
	}

	// The jail's route for the pool is its gateway's: the agent cannot remove or replace it.
	res := sh(t, m, b, `ip route show type unreachable; ip route del `+pool.String()+` 2>&1 && echo DELETED; ip route replace `+pool.String()+` via 10.0.2.2 2>&1 && echo REPLACED; ip route show type unreachable`)
	if strings.Count(res.Stdout, "unreachable "+pool.String()) != 2 || strings.Contains(res.Stdout, "DELETED") || strings.Contains(res.Stdout, "REPLACED") {
		t.Errorf("the jail's unreachable route for %s is missing or the agent changed it:\n%s%s", pool, res.Stdout, res.Stderr)
	}
	t.Logf("route changes in the jail: %s", res.Stdout)
	// Outside addresses stay reachable.
	tok := "out-" + randHex(4)
	if ok, res := tryConnect(t, m, b, "tcp", outside.addr, tok); !ok || !outside.waitSaw(tok, 5*time.Second) {
		t.Errorf("full bwrap agent did not reach the outside address %s: %+v", outside.addr, res)
	}

	// Config.BlockedCIDRs: a configured destination is unreachable too (here the host's outside
	// address; its other listener on it then is unreachable as well).
	m2, _ := newTestManager(t, func(c *Config) { c.BlockedCIDRs = []string{ip + "/32"} })
	b2 := agent("xbb2", api.BackendBwrap, api.NetworkFull, api.Limits{})
	tok = "blk-" + randHex(4)
	if ok, res := tryConnect(t, m2, b2, "tcp", net.JoinHostPort(ip, blockedPort), tok); ok || blocked.waitSaw(tok, 300*time.Millisecond) {
		t.Errorf("full bwrap agent reached %s, a blocked CIDR: %+v", blocked.addr, res)
	} else {
		t.Logf("blocked CIDR: %s", strings.TrimSpace(res.Stderr))
	}
}

// TestNetworkSubnetPoolConfig: the pool and blocked CIDRs are checked at startup, and subnets are
// carved from the pool past those in use.
func TestNetworkSubnetPoolConfig(t *testing.T) {
	for _, c := range []struct {
		pool    string
		blocked []string
	}{{"bogus", nil}, {"fd00::/64", nil}, {"10.1.0.0/30", nil}, {"", []string{"10.0.0.0/8", "not-a-cidr"}}} {
		_, err := NewManager(Config{DataDir: t.TempDir(), HelperPath: helperBin, ContainerSubnetPool: c.pool, BlockedCIDRs: c.blocked, CgroupRoot: "none"})
		if !errors.Is(err, ErrBadCIDR) {
			t.Errorf("NewManager with pool %q, blocked %q: err = %v, want ErrBadCIDR", c.pool, c.blocked, err)
		}
	}
	_, blocked, err := netBlocks("10.50.7.9/16", []string{" 172.17.0.1/16", "fd00::/8"})
	if err != nil || strings.Join(blocked, " ") != "10.50.0.0/16 172.17.0.0/16 fd00::/8" {
		t.Errorf("netBlocks = %q, %v", blocked, err)
	}
	l := &containerLauncher{pool: netip.MustParsePrefix("10.50.0.0/22")}
	used := []netip.Prefix{netip.MustParsePrefix("10.50.0.0/24"), netip.MustParsePrefix("10.50.2.128/25"), netip.MustParsePrefix("10.88.0.0/16")}
	var got []string
	for p, ok := l.nextSubnet(used, netip.Prefix{}); ok; p, ok = l.nextSubnet(used, p) {
		got = append(got, p.String())
	}
	if strings.Join(got, " ") != "10.50.1.0/24 10.50.3.0/24" {
		t.Errorf("free subnets of %s past %v = %q, want 10.50.1.0/24 10.50.3.0/24", l.pool, used, got)
	}
}
