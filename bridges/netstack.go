package bridges

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// A bwrap jail always has its own network namespace. With network "full" the gateway attaches
// user-mode networking to it: one slirp4netns per agent, started by the gateway (as root or as
// an unprivileged user), owned by the agent's Process and ended with it. slirp4netns runs in the
// host's network namespace and forwards the jail's TCP/UDP as ordinary sockets of the gateway's
// user, so the jail reaches what any outside client reaches: with --disable-host-loopback not the
// host's 127.0.0.1 (nor its 10.0.2.2 alias), and never the host's abstract unix sockets, which
// live in the host's network namespace. The jail sees tap0 10.0.2.100/24, gateway 10.0.2.2 and
// DNS 10.0.2.3 (its /etc/resolv.conf, generated).
//
// slirp4netns's sockets live in the host's network namespace, so the jail could reach whatever the
// host routes to, the networks of container agents included. Every "full" jail therefore gets an
// unreachable route for the container agents' subnet pool (Config.ContainerSubnetPool, from which
// the container backend takes each agent's network) and for each of Config.BlockedCIDRs, added by
// the gateway before the helper runs (blockRoutes). The routes belong to the jail's outer user
// namespace, in which the agent has no capability: it cannot remove them.
//
// Order at launch: bwrap writes the jail's pid on --info-fd and then waits on --block-fd before
// it runs the helper; the gateway attaches slirp4netns to /proc/<pid>/ns/net, waits for its
// --ready-fd (tap0 configured), and only then unblocks the jail. The helper thus never runs
// without its network: no command of the agent can start before it is up. Anything failing on
// the way fails the launch (ErrBackendUnavailable naming the cause); there is no fallback to the
// host's network.

// Addresses inside a "full" jail (slirp4netns defaults with --configure).
const (
	slirpDNS      = "10.0.2.3"
	slirpMTU      = 65520
	jailResolv    = "nameserver " + slirpDNS + "\n"
	netStackStart = 10 * time.Second // bound on the jail's info, slirp4netns ready
	tunDevice     = "/dev/net/tun"
	nsGetUserns   = 0xb701 // ioctl NS_GET_USERNS: the user namespace owning a namespace
)

// ErrNetStack is the user-mode network of a "full" agent that could not be set up; it always comes
// wrapped in ErrBackendUnavailable with the cause.
var ErrNetStack = errors.New("network stack for network full unavailable")

// lookSlirp finds slirp4netns ("" = look it up in PATH).
func lookSlirp(name string) (string, error) {
	if name == "" {
		name = "slirp4netns"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("slirp4netns not found (%v); install the slirp4netns package: %w", err, ErrNetStack)
	}
	return p, nil
}

// checkTun says whether this process can open /dev/net/tun, which slirp4netns needs.
func checkTun() error {
	f, err := os.OpenFile(tunDevice, os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return nil
	}
	mode := ""
	if fi, serr := os.Stat(tunDevice); serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			mode = fmt.Sprintf(" (mode %04o, owner uid %d)", fi.Mode().Perm(), st.Uid)
		}
	}
	return fmt.Errorf("%s is not usable by uid %d%s: %v; make it mode 0666 (chmod 0666 %s, as build/scripts/deps.sh does; under systemd also DeviceAllow=%s rw): %w",
		tunDevice, os.Getuid(), mode, err, tunDevice, tunDevice, ErrNetStack)
}

// netDetail describes the network stack for the probe (/readyz).
func (l *bwrapLauncher) netDetail() string {
	p, err := lookSlirp(l.slirp)
	if err == nil {
		err = checkTun()
	}
	if err == nil {
		_, _, err = lookRouteTools()
	}
	if err != nil {
		return "network full: UNAVAILABLE (" + err.Error() + "); network none works"
	}
	return "network: own namespace per jail; full via " + p + " (host loopback and abstract sockets unreachable; unreachable from full jails: " + strings.Join(l.blocked, ", ") + ")"
}

// DefaultContainerSubnetPool is where container agents' networks take their subnets (one /24
// each) when Config.ContainerSubnetPool is empty. It is unreachable from every "full" jail.
const DefaultContainerSubnetPool = "10.213.0.0/16"

// ErrBadCIDR is a subnet pool or blocked CIDR that does not parse (or is not IPv4 for the pool).
var ErrBadCIDR = errors.New("bad CIDR")

// netBlocks parses the container subnet pool ("" = the default) and the extra blocked CIDRs, and
// returns the pool and the list of CIDRs a "full" jail cannot reach (the pool first).
func netBlocks(pool string, extra []string) (netip.Prefix, []string, error) {
	if pool == "" {
		pool = DefaultContainerSubnetPool
	}
	p, err := netip.ParsePrefix(pool)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return netip.Prefix{}, nil, fmt.Errorf("container subnet pool %q: want an IPv4 CIDR of at most /28, like %s: %w", pool, DefaultContainerSubnetPool, ErrBadCIDR)
	}
	p = p.Masked()
	blocked := []string{p.String()}
	for _, c := range extra {
		q, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return netip.Prefix{}, nil, fmt.Errorf("blocked CIDR %q: %v: %w", c, err, ErrBadCIDR)
		}
		blocked = append(blocked, q.Masked().String())
	}
	return p, blocked, nil
}

// lookRouteTools finds nsenter (util-linux) and ip (iproute2), which add the jail's routes; the
// gateway's PATH may lack the sbin directories.
func lookRouteTools() (nsenter, ip string, err error) {
	look := func(name string, dirs ...string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, d := range dirs {
			if fi, err := os.Stat(d + "/" + name); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return d + "/" + name, nil
			}
		}
		return "", fmt.Errorf("%s not found in PATH nor in %s", name, strings.Join(dirs, ", "))
	}
	if nsenter, err = look("nsenter", "/usr/bin", "/bin", "/usr/sbin", "/sbin"); err != nil {
		return "", "", fmt.Errorf("%v; install the util-linux package: %w", err, ErrNetStack)
	}
	if ip, err = look("ip", "/usr/sbin", "/sbin", "/usr/bin", "/bin"); err != nil {
		return "", "", fmt.Errorf("%v; install the iproute2 package: %w", err, ErrNetStack)
	}
	return nsenter, ip, nil
}

// blockRoutes adds an unreachable route for each of cidrs in the jail's network namespace netns,
// owned by the user namespace userns. Go cannot join a user namespace from a multithreaded process,
// so a child does: nsenter joins netns (and unprivileged first userns, which the gateway's uid
// owns, keeping its credentials) and runs `ip -batch`.
func blockRoutes(ctx context.Context, userns, netns *os.File, cidrs []string) error {
	if len(cidrs) == 0 {
		return nil
	}
	nsenter, ip, err := lookRouteTools()
	if err != nil {
		return err
	}
	var batch strings.Builder
	for _, c := range cidrs {
		batch.WriteString("route add unreachable " + c + "\n")
	}
	ctx, cancel := context.WithTimeout(ctx, netStackStart)
	defer cancel()
	// ExtraFiles: fd 3 userns, 4 netns. Root needs only the network namespace: its capabilities
	// in the host's user namespace cover the jail's. Unprivileged, joining the owner user namespace
	// gives them (its map makes the gateway's uid root there, so ip keeps them across exec).
	args := []string{"--net=/proc/self/fd/4", "--", ip, "-batch", "-"}
	if os.Geteuid() != 0 {
		args = append([]string{"--user=/proc/self/fd/3", "--preserve-credentials"}, args...)
	}
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{userns, netns}
	cmd.Stdin = strings.NewReader(batch.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("add the jail's unreachable routes (%s): %v: %s: %w", strings.Join(cidrs, " "), err, strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", " | "), ErrNetStack)
	}
	return nil
}

// readJailPID reads bwrap's --info-fd JSON ({"child-pid": N, ...}).
func readJailPID(r io.Reader) (int, error) {
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("read bwrap info: %w", err)
	}
	if info.ChildPID <= 0 {
		return 0, errors.New("bwrap info has no child-pid")
	}
	return info.ChildPID, nil
}

// netStack is one agent's slirp4netns.
type netStack struct {
	pid      int
	exitW    *os.File // closing it ends slirp4netns (--exit-fd)
	stderr   *tailBuffer
	done     chan struct{}
	err      error
	stopping atomic.Bool
	stopOnce sync.Once
}

// startNetStack attaches slirp4netns to the network namespace of jailPID and returns once tap0 is
// configured and the routes of blocked are in place (added meanwhile). logger gets a line if slirp4netns dies before stop.
func startNetStack(ctx context.Context, slirp string, jailPID int, blocked []string, logger *slog.Logger) (*netStack, error) {
	if err := checkTun(); err != nil {
		return nil, err
	}
	nsPath := "/proc/" + strconv.Itoa(jailPID) + "/ns/net"
	netns, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open the jail's network namespace: %w", err)
	}
	defer netns.Close()
	// The namespace's owner: bwrap run unprivileged nests two user namespaces and the network
	// namespace belongs to the outer one, in which no process lives, so it is asked of the
	// namespace itself. slirp4netns joins it, then the network namespace (both by fd).
	ufd, err := unix.IoctlRetInt(int(netns.Fd()), nsGetUserns)
	if err != nil {
		return nil, fmt.Errorf("owner of the jail's network namespace (NS_GET_USERNS): %w", err)
	}
	userns := os.NewFile(uintptr(ufd), "userns")
	defer userns.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	// ExtraFiles: fd 3 ready, 4 exit, 5 userns, 6 netns.
	args := []string{"--configure", "--mtu=" + strconv.Itoa(slirpMTU), "--disable-host-loopback", "--enable-seccomp"}
	if os.Geteuid() == 0 {
		// Its own mount namespace with only what it needs (needs CAP_SYS_ADMIN: as root only;
		// an unprivileged slirp4netns keeps the seccomp filter).
		args = append(args, "--enable-sandbox")
	}
	args = append(args, "--ready-fd=3", "--exit-fd=4",
		"--userns-path=/proc/self/fd/5", "--netns-type=path", "/proc/self/fd/6", "tap0")
	cmd := exec.Command(slirp, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{readyW, exitR, userns, netns}
	n := &netStack{exitW: exitW, stderr: newTailBuffer(4 << 10), done: make(chan struct{})}
	cmd.Stdout = n.stderr
	cmd.Stderr = n.stderr
	// The gateway's death ends it; its own process group keeps a terminal's signals away.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return nil, fmt.Errorf("start %s: %w", slirp, err)
	}
	n.pid = cmd.Process.Pid
	// The unreachable routes go in while slirp4netns starts (they need no device).
	routes := make(chan error, 1)
	go func() { // owner: startNetStack, which waits for it on every path
		routes <- blockRoutes(ctx, userns, netns, blocked)
	}()
	go func() { // owner: the netStack; exits when slirp4netns exits
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exited")
		}
		n.err = fmt.Errorf("slirp4netns pid %d: %w; output: %s", n.pid, err, lastLines(strings.TrimSpace(n.stderr.String()), 3))
		close(n.done)
		if !n.stopping.Load() {
			logger.Error("slirp4netns of a network-full agent died: the agent has no network until its helper restarts",
				"pid", n.pid, "err", n.err)
		}
	}()
	ready := make(chan error, 1)
	go func() { // owner: startNetStack; ends when slirp4netns writes to or closes its ready fd
		var b [1]byte
		_, err := readyR.Read(b[:])
		ready <- err
	}()
	timer := time.NewTimer(netStackStart)
	defer timer.Stop()
	select {
	case err = <-ready:
		if err != nil {
			err = fmt.Errorf("slirp4netns ended before it was ready")
		}
	case <-timer.C:
		err = fmt.Errorf("slirp4netns not ready after %v", netStackStart)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err != nil {
		n.stop()
		<-routes // bounded by its timeout; userns and netns are closed after it
		return nil, fmt.Errorf("%w: %s", err, strings.ReplaceAll(strings.TrimSpace(n.stderr.String()), "\n", " | "))
	}
	if err := <-routes; err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// stop ends slirp4netns and waits for it (bounded); safe to call more than once.
func (n *netStack) stop() {
	n.stopOnce.Do(func() {
		n.stopping.Store(true)
		n.exitW.Close()
		select {
		case <-n.done:
		case <-time.After(2 * time.Second):
			syscall.Kill(-n.pid, syscall.SIGKILL)
			<-n.done
		}
	})
}

// Done is closed when slirp4netns has exited.
func (n *netStack) Done() <-chan struct{} { return n.done }

// jailNet is the plumbing of one "full" jail during Launch: its generated resolv.conf, bwrap's
// info pipe (the jail's pid) and block pipe (the jail waits until the network is up).
type jailNet struct {
	resolv, infoR, infoW, blockR, blockW *os.File
}

func newJailNet() (*jailNet, error) {
	rf, err := memFiles(jailResolv)
	if err != nil {
		return nil, err
	}
	j := &jailNet{resolv: rf[0]}
	if j.infoR, j.infoW, err = os.Pipe(); err != nil {
		j.close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if j.blockR, j.blockW, err = os.Pipe(); err != nil {
		j.close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	return j, nil
}

// add appends the jail's ends to files (ExtraFiles: fd 3+i) and records their fds in bs.
func (j *jailNet) add(bs *bwrapSpec, files []*os.File) []*os.File {
	bs.ResolvFD, bs.InfoFD, bs.BlockFD = 3+len(files), 4+len(files), 5+len(files)
	return append(files, j.resolv, j.infoW, j.blockR)
}

// close releases everything the gateway still holds (os.File.Close is safe to repeat).
func (j *jailNet) close() {
	for _, f := range []*os.File{j.resolv, j.infoR, j.infoW, j.blockR, j.blockW} {
		if f != nil {
			f.Close()
		}
	}
}

// attach runs once bwrap has started as p: it reads the jail's pid, attaches slirp4netns to its
// network namespace, waits until it is ready, then lets the jail run the helper. The netStack
// ends with p (its exit or Kill). On error the caller kills p.
func (j *jailNet) attach(ctx context.Context, slirp string, blocked []string, p *Process, logger *slog.Logger) (*netStack, error) {
	// The jail's ends live in bwrap now: without the gateway's copies, bwrap's death is an EOF.
	j.infoW.Close()
	j.blockR.Close()
	j.resolv.Close()
	type pidOrErr struct {
		pid int
		err error
	}
	got := make(chan pidOrErr, 1)
	go func() { // owner: attach; ends when bwrap writes its info or exits (EOF)
		pid, err := readJailPID(j.infoR)
		got <- pidOrErr{pid, err}
	}()
	timer := time.NewTimer(netStackStart)
	defer timer.Stop()
	var pid int
	select {
	case r := <-got:
		if r.err != nil {
			return nil, r.err
		}
		pid = r.pid
	case <-p.Done():
		return nil, fmt.Errorf("bwrap exited before the jail existed: %v", p.Err())
	case <-timer.C:
		return nil, fmt.Errorf("no jail pid from bwrap after %v", netStackStart)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	// bwrap's child brings the jail's loopback up (an address, then the link); slirp4netns's
	// --configure touches lo too, and racing it makes bwrap fail ("loopback: Failed
	// RTM_NEWADDR"). Its routes appear once bwrap is done with it.
	for fib := "/proc/" + strconv.Itoa(pid) + "/net/fib_trie"; ; {
		if b, err := os.ReadFile(fib); err == nil && bytes.Contains(b, []byte("127.0.0.1")) {
			break
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("bwrap exited while setting up the jail: %v", p.Err())
		case <-timer.C:
			return nil, fmt.Errorf("the jail's loopback not up after %v", netStackStart)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
	ns, err := startNetStack(ctx, slirp, pid, blocked, logger)
	if err != nil {
		return nil, err
	}
	if _, err := j.blockW.Write([]byte{1}); err != nil {
		ns.stop()
		return nil, fmt.Errorf("unblock the jail: %w", err)
	}
	j.blockW.Close()
	orig := p.kill
	p.kill = func() { orig(); ns.stop() }
	go func() { // owner: the Process; ends the network stack when the helper has exited
		<-p.Done()
		ns.stop()
	}()
	return ns, nil
}

// attachNet gives the started jail p its network (jailNet.attach) and tracks the stack until it
// ends; on failure the jail is killed and the launch fails closed.
func (l *bwrapLauncher) attachNet(ctx context.Context, jn *jailNet, slirp, agentID string, p *Process) error {
	ns, err := jn.attach(ctx, slirp, l.blocked, p, l.logger.With("agent", agentID))
	if err != nil {
		p.Kill()
		select {
		case <-p.Done():
		case <-time.After(2 * time.Second):
		}
		return unavailable(api.BackendBwrap, "network full: %v (%v)", err, ErrNetStack)
	}
	l.netMu.Lock()
	if l.nets == nil {
		l.nets = map[string]*netStack{}
	}
	l.nets[agentID] = ns
	l.netMu.Unlock()
	go func() { // owner: the netStack; forgets it once it has ended
		<-ns.Done()
		l.netMu.Lock()
		if l.nets[agentID] == ns {
			delete(l.nets, agentID)
		}
		l.netMu.Unlock()
	}()
	return nil
}

// netStackOf returns the agent's running network stack (nil if none); for tests and logs.
func (l *bwrapLauncher) netStackOf(agentID string) *netStack {
	l.netMu.Lock()
	defer l.netMu.Unlock()
	return l.nets[agentID]
}
