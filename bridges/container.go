package bridges

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/porthole/porthole/api"
)

// Container labels.
const (
	LabelAgent   = "porthole.agent"
	LabelGateway = "porthole.gateway"
	labelSpec    = "porthole.spec" // what the container was created with; another spec recreates it
)

// containerLauncher runs one long-lived container per agent through the Docker Engine API
// (podman's compatible API works) and starts the helper in it with an exec whose attached
// stdio carries the session.
type containerLauncher struct {
	engine   string // unix:///… ; "" = DOCKER_HOST or the default
	image    string // default image
	helper   string
	instance string
	logger   *slog.Logger
	pool     netip.Prefix // agents' networks take their subnets from it (netBlocks)

	subnetMu sync.Mutex // one subnet choice at a time

	mu         sync.Mutex
	cli        *client.Client
	reconciled bool
}

func (l *containerLauncher) Backend() string { return api.BackendContainer }

// ContainerName is the name of an agent's container for a gateway instance.
func ContainerName(instance, agentID string) string { return "porthole-" + instance + "-" + agentID }

// NetworkName is the name of the engine network of an agent with network "full": each such agent
// has a bridge network of its own, so that no two agents share a link.
func NetworkName(instance, agentID string) string { return ContainerName(instance, agentID) }

// agentNetSpec is the labelSpec of an agent's network: a network with another one is replaced.
//
// "isolate" drops forwarded traffic between two isolated networks (podman 4.3 with CNI: the
// firewall plugin's ingressPolicy "same-bridge"; netavark has the option too), so one agent cannot
// reach another agent's address through the host's routing. podman's compat API isolates the
// networks it creates even without the option; it is explicit here so that the intent does not
// depend on that default. Docker isolates its bridge networks from each other by default.
// Outbound traffic is masqueraded as on the default bridge, and the host's loopback stays out of
// reach as for any bridge (route_localnet is off).
//
// The subnet comes from the gateway's pool (Config.ContainerSubnetPool), never from the engine's:
// the host routes to every container network and a "full" bwrap jail's slirp4netns connects from
// the host, so each "full" jail has an unreachable route for the pool (netstack.go). A network
// made from another pool is replaced.
const agentNetSpec = "driver=bridge isolate=true"

// netSpec is agentNetSpec with the pool.
func (l *containerLauncher) netSpec() string { return agentNetSpec + " pool=" + l.pool.String() }

// ErrSubnetPoolExhausted: every subnet of the pool is in use by a network of the engine.
var ErrSubnetPoolExhausted = errors.New("container subnet pool exhausted")

// agentSubnetBits is the size of each agent's subnet (a /24, or the whole pool if smaller).
func (l *containerLauncher) agentSubnetBits() int { return max(24, l.pool.Bits()) }

// nextSubnet returns the first subnet of the pool after `after` (from the pool's start if it is
// invalid) that overlaps none of used.
func (l *containerLauncher) nextSubnet(used []netip.Prefix, after netip.Prefix) (netip.Prefix, bool) {
	bits := l.agentSubnetBits()
	step := uint32(1) << (32 - bits)
	u32 := func(a netip.Addr) uint32 {
		b := a.As4()
		return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	}
	start := u32(l.pool.Addr())
	if after.IsValid() {
		start = u32(after.Addr()) + step
	}
	for v := start; v >= u32(l.pool.Addr()); v += step {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		if !l.pool.Contains(p.Addr()) {
			break
		}
		free := true
		for _, u := range used {
			free = free && !u.Overlaps(p)
		}
		if free {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// usedSubnets lists the subnets of every network of the engine.
func usedSubnets(ctx context.Context, cli *client.Client) ([]netip.Prefix, error) {
	list, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, err
	}
	var used []netip.Prefix
	for _, n := range list.Items {
		for _, c := range n.IPAM.Config {
			if c.Subnet.IsValid() {
				used = append(used, c.Subnet)
			}
		}
	}
	return used, nil
}

// inPool says whether the network has subnets and all are in the pool.
func (l *containerLauncher) inPool(cfgs []network.IPAMConfig) bool {
	for _, c := range cfgs {
		if !c.Subnet.IsValid() || !l.pool.Contains(c.Subnet.Addr()) || c.Subnet.Bits() < l.pool.Bits() {
			return false
		}
	}
	return len(cfgs) > 0
}

func (l *containerLauncher) client() (*client.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cli != nil {
		return l.cli, nil
	}
	opts := []client.Opt{client.FromEnv}
	if l.engine != "" {
		opts = append(opts, client.WithHost(l.engine))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, unavailable(api.BackendContainer, "engine client for %q: %v", l.engineName(), err)
	}
	l.cli = cli
	return cli, nil
}

func (l *containerLauncher) engineName() string {
	if l.engine != "" {
		return l.engine
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// ping checks the engine answers; the error names it.
func (l *containerLauncher) ping(ctx context.Context) (*client.Client, error) {
	cli, err := l.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, unavailable(api.BackendContainer, "container engine %s is not reachable: %v", l.engineName(), err)
	}
	return cli, nil
}

func (l *containerLauncher) imageFor(b api.Backend) string {
	if b.Image != "" {
		return b.Image
	}
	return l.image
}

func (l *containerLauncher) Probe(ctx context.Context) ProbeResult {
	r := ProbeResult{Backend: api.BackendContainer}
	cli, err := l.ping(ctx)
	if err != nil {
		r.Detail = err.Error()
		return r
	}
	if _, err := cli.ImageInspect(ctx, l.image); err != nil {
		r.Detail = unavailable(api.BackendContainer, "image %q: %v (build it with build/agent-image/build.sh)", l.image, err).Error()
		return r
	}
	if _, err := os.Stat(l.helper); err != nil {
		r.Detail = unavailable(api.BackendContainer, "helper binary: %v", err).Error()
		return r
	}
	r.OK = true
	r.Detail = fmt.Sprintf("engine %s, image %s; limits: engine (pids, memory, cpu)", l.engineName(), l.image)
	return r
}

// Reconcile stops and removes every container labelled for this gateway instance: they are left
// over from a previous gateway process (a killed one leaves its agents' containers running).
func (l *containerLauncher) Reconcile(ctx context.Context) (int, error) {
	cli, err := l.ping(ctx)
	if err != nil {
		return 0, err
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelGateway+"="+l.instance),
	})
	if err != nil {
		return 0, fmt.Errorf("container backend: list leftovers: %w", err)
	}
	var errs []error
	for _, c := range list.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove leftover container %s: %w", c.ID[:12], err))
		}
	}
	// Then the agents' networks (a network in use cannot be removed).
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{
		Filters: make(client.Filters).Add("label", LabelGateway+"="+l.instance),
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("container backend: list leftover networks: %w", err))
	}
	for _, n := range nets.Items {
		if _, err := cli.NetworkRemove(ctx, n.Name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove leftover network %s: %w", n.Name, err))
		}
	}
	l.mu.Lock()
	l.reconciled = true
	l.mu.Unlock()
	return len(list.Items), errors.Join(errs...)
}

// ensureNetwork returns the name of the agent's own network, creating it if needed.
func (l *containerLauncher) ensureNetwork(ctx context.Context, cli *client.Client, agentID string) (string, error) {
	name := NetworkName(l.instance, agentID)
	labels := map[string]string{LabelAgent: agentID, LabelGateway: l.instance, labelSpec: l.netSpec()}
	insp, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	switch {
	case err == nil:
		ok := l.inPool(insp.Network.IPAM.Config)
		for k, v := range labels {
			ok = ok && insp.Network.Labels[k] == v
		}
		if ok {
			return name, nil
		}
		// Made otherwise (an older gateway, or by hand): replaced; it cannot be while in use.
		if err := l.removeNetwork(ctx, cli, agentID); err != nil {
			return "", unavailable(api.BackendContainer, "replace network %s: %v", name, err)
		}
	case !cerrdefs.IsNotFound(err):
		return "", unavailable(api.BackendContainer, "inspect network %s: %v", name, err)
	}
	// The first subnet of the pool no network of the engine uses; another gateway (or the engine)
	// may take it meanwhile: the create then fails with a conflict and the next one is tried.
	l.subnetMu.Lock()
	defer l.subnetMu.Unlock()
	used, err := usedSubnets(ctx, cli)
	if err != nil {
		return "", unavailable(api.BackendContainer, "list networks: %v", err)
	}
	var res client.NetworkCreateResult
	var subnet netip.Prefix
	for tries := 0; ; tries++ {
		next, ok := l.nextSubnet(used, subnet)
		if !ok || tries == 32 {
			return "", unavailable(api.BackendContainer, "create network %s: no free /%d in %s (%d networks on the engine; give a larger pool with --container-subnet-pool, or delete agents): %v",
				name, l.agentSubnetBits(), l.pool, len(used), ErrSubnetPoolExhausted)
		}
		subnet = next
		res, err = cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver:  "bridge",
			Options: map[string]string{"isolate": "true"},
			Labels:  labels,
			IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
		})
		if err == nil {
			break
		}
		if !subnetConflict(err) {
			return "", unavailable(api.BackendContainer, "create network %s with subnet %s: %v", name, subnet, err)
		}
		l.logger.Info("subnet taken meanwhile; trying the next", "network", name, "subnet", subnet, "cause", err)
	}
	// podman's compat API warns `"isolate: true" is not a recognized option` and applies it.
	for _, w := range res.Warning {
		if !strings.Contains(w, "isolate") {
			l.logger.Warn("container engine warning on network create", "network", name, "warning", w)
		}
	}
	return name, nil
}

// subnetConflict says whether a network create failed because its subnet is in use (podman:
// "subnet … is already used on the host or by another config"; Docker: "Pool overlaps with other
// one on this address space").
func subnetConflict(err error) bool {
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "subnet") && !strings.Contains(msg, "pool") {
		return false // e.g. the name
	}
	return strings.Contains(msg, "already used") || strings.Contains(msg, "overlap") || strings.Contains(msg, "in use")
}

// removeNetwork removes the agent's own network, if any.
func (l *containerLauncher) removeNetwork(ctx context.Context, cli *client.Client, agentID string) error {
	name := NetworkName(l.instance, agentID)
	if _, err := cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container backend: remove network %s: %w", name, err)
	}
	return nil
}

func (l *containerLauncher) specLabel(spec AgentSpec, image, user string) string {
	net := spec.Backend.Network
	if net == api.NetworkFull {
		// Its own network: a container of an older gateway on the shared bridge is replaced.
		net += "(own " + l.netSpec() + ")"
	}
	label := fmt.Sprintf("image=%s net=%s pids=%d mem=%d cpu=%d home=%s helper=%s user=%s",
		image, net, spec.Limits.Pids, spec.Limits.MemoryMiB, spec.Limits.CPUPct, spec.Home, l.helper, user)
	if spec.BrowserProfile != "" {
		// A container gets its mounts when created: another (or no) profile replaces it.
		label += " profile=" + spec.BrowserProfile
	}
	return label
}

// containerNproc is the RLIMIT_NPROC of a container's processes. The agent runs as a non-root uid
// and, with a rootful engine, that limit counts every process of the uid on the host (other
// agents' containers, and for an unprivileged gateway the gateway itself and its bwrap jails), so
// it must not be the per-agent limit: the pids cgroup (PidsLimit) is. It is set explicitly
// because podman otherwise copies its own limits.
const containerNproc = 32768

// agentUser makes the agent's home usable by the uid the container's processes run as and
// returns that "uid:gid" for the container's Config.User: never root. A root gateway runs them as
// the fixed agent uid/gid 1000 (the bwrap jails' uid) and chowns the home to it; an unprivileged
// gateway created the home (mode 0700) as its own uid, so they run as the home's owner.
func agentUser(home string) (string, error) {
	if os.Geteuid() == 0 {
		if err := chownTree(home, jailUID, jailUID); err != nil {
			return "", unavailable(api.BackendContainer, "give the agent's home to uid %d: %v", jailUID, err)
		}
		return fmt.Sprintf("%d:%d", jailUID, jailUID), nil
	}
	fi, err := os.Stat(home)
	if err != nil {
		return "", fmt.Errorf("container backend: agent home: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", unavailable(api.BackendContainer, "agent home %s: no owner information", home)
	}
	if st.Uid == 0 {
		return "", unavailable(api.BackendContainer, "agent home %s belongs to root: the agent must not run as root", home)
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid), nil
}

// chownTree gives root and everything under it (symlinks themselves, not their targets) to
// uid:gid; a tree whose root already belongs to them is left as it is.
func chownTree(root string, uid, gid int) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// ensure returns the id of the agent's running container, creating/starting it as needed.
// Its processes run as agentUser's uid.
func (l *containerLauncher) ensure(ctx context.Context, cli *client.Client, spec AgentSpec) (string, error) {
	user, err := agentUser(spec.Home)
	if err != nil {
		return "", err
	}
	return l.ensureAs(ctx, cli, spec, user)
}

// ensureAs is ensure with the container's user ("uid:gid") already settled.
func (l *containerLauncher) ensureAs(ctx context.Context, cli *client.Client, spec AgentSpec, user string) (string, error) {
	name := ContainerName(l.instance, spec.ID)
	image := l.imageFor(spec.Backend)
	want := l.specLabel(spec, image, user)
	full := spec.Backend.Network == api.NetworkFull
	insp, err := cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		c := insp.Container
		if c.Config != nil && c.Config.Labels[labelSpec] == want {
			if c.State != nil && c.State.Running {
				return c.ID, nil
			}
			if full {
				if _, err := l.ensureNetwork(ctx, cli, spec.ID); err != nil {
					return "", err
				}
			}
			if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err == nil {
				return c.ID, nil
			}
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("container backend: replace %s: %w", name, err)
		}
	case !cerrdefs.IsNotFound(err):
		return "", unavailable(api.BackendContainer, "inspect %s: %v", name, err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return "", unavailable(api.BackendContainer, "image %q: %v", image, err)
	}
	// "none": no network at all; "full": the agent's own network, never the engine's shared bridge.
	network := "none"
	if full {
		if network, err = l.ensureNetwork(ctx, cli, spec.ID); err != nil {
			return "", err
		}
	} else if err := l.removeNetwork(ctx, cli, spec.ID); err != nil {
		// The network of a former "full" spec, now unused.
		l.logger.Warn("remove the network of a former full agent", "agent", spec.ID, "err", err)
	}
	pids := int64(spec.Limits.Pids)
	hc := &container.HostConfig{
		Binds: []string{
			spec.Home + ":" + jailHome + ":rw",
			l.helper + ":" + HelperPathInJail + ":ro",
		},
		NetworkMode:    container.NetworkMode(network),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=1g", "/var/tmp": "rw,nosuid,nodev,mode=1777", "/run": "rw,nosuid,nodev,mode=755"},
		ShmSize:        shmBytes,
		Resources: container.Resources{
			PidsLimit: &pids,
			Memory:    spec.Limits.MemoryMiB << 20,
			NanoCPUs:  int64(spec.Limits.CPUPct) * 10_000_000,
			// Explicit: podman otherwise copies the engine's own (huge) limits.
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: 4096, Hard: 4096},
				{Name: "nproc", Soft: max(containerNproc, int64(spec.Limits.Pids)), Hard: max(containerNproc, int64(spec.Limits.Pids))},
			},
		},
	}
	if spec.BrowserProfile != "" {
		hc.Binds = append(hc.Binds, spec.BrowserProfile+":"+ProfileMountPath+":rw")
	}
	cfg := &container.Config{
		Image:      image,
		Hostname:   "porthole-agent",
		Cmd:        []string{HelperPathInJail, "helper", "init"},
		Env:        sandboxEnv(jailHome),
		WorkingDir: jailHome,
		User:       user,
		Labels: map[string]string{
			LabelAgent:   spec.ID,
			LabelGateway: l.instance,
			labelSpec:    want,
		},
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return "", unavailable(api.BackendContainer, "create %s: %v", name, err)
	}
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
		return "", unavailable(api.BackendContainer, "start %s: %v", name, err)
	}
	return created.ID, nil
}

func (l *containerLauncher) Launch(ctx context.Context, spec AgentSpec) (*Process, error) {
	cli, err := l.ping(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	reconciled := l.reconciled
	l.mu.Unlock()
	if !reconciled {
		if n, err := l.Reconcile(ctx); err != nil {
			return nil, err
		} else if n > 0 {
			l.logger.Info("removed leftover containers", "count", n)
		}
	}
	if _, err := os.Stat(l.helper); err != nil {
		return nil, unavailable(api.BackendContainer, "helper binary: %v", err)
	}
	user, err := agentUser(spec.Home)
	if err != nil {
		return nil, err
	}
	if spec.BrowserProfile != "" {
		// The profile belongs to the uid the container's processes run as, like the home.
		uid, gid, err := parseUser(user)
		if err == nil {
			err = prepareProfile(spec.BrowserProfile, uid, gid)
		}
		if err != nil {
			return nil, unavailable(api.BackendContainer, "%v", err)
		}
	}
	id, err := l.ensureAs(ctx, cli, spec, user)
	if err != nil {
		return nil, err
	}
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{HelperPathInJail, "helper", "--kill-all-on-exit", "--seccomp"},
		Env:          sandboxEnv(jailHome),
		WorkingDir:   jailHome,
		User:         user,
	})
	if err != nil {
		return nil, unavailable(api.BackendContainer, "exec in %s: %v", id[:12], err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, unavailable(api.BackendContainer, "attach exec in %s: %v", id[:12], err)
	}
	return newExecProcess(att.HijackedResponse, fmt.Sprintf("container %s exec %s", ContainerName(l.instance, spec.ID), ex.ID[:12])), nil
}

// newExecProcess turns a hijacked exec connection into a Process: stdin is written raw; stdout
// and stderr come multiplexed (8-byte stdcopy headers, Tty=false) and are split here, stdout to
// the session, stderr to the captured tail.
func newExecProcess(h client.HijackedResponse, desc string) *Process {
	p := &Process{Desc: desc, stderr: newTailBuffer(8 << 10), done: make(chan struct{})}
	pr, pw := io.Pipe()
	p.Pipe = &hijackedPipe{r: pr, h: h}
	var once sync.Once
	p.kill = func() { once.Do(func() { h.Close() }) }
	go func() { // owner: the Process; exits when the engine ends the exec's output (helper exited or connection closed)
		// Tty=false: always multiplexed (podman 4.3 labels it raw-stream but still multiplexes).
		_, err := stdcopy.StdCopy(pw, p.stderr, h.Reader)
		if err == nil {
			err = errors.New("helper exited")
		} else {
			err = fmt.Errorf("helper stream: %w", err)
		}
		if s := strings.TrimSpace(p.stderr.String()); s != "" {
			err = fmt.Errorf("%w; stderr: %s", err, lastLines(s, 5))
		}
		p.err = err
		pw.CloseWithError(io.EOF)
		h.Close()
		close(p.done)
	}()
	return p
}

type hijackedPipe struct {
	r *io.PipeReader
	h client.HijackedResponse
}

func (c *hijackedPipe) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *hijackedPipe) Write(b []byte) (int, error) { return c.h.Conn.Write(b) }
func (c *hijackedPipe) Close() error {
	c.h.CloseWrite()
	c.r.Close()
	return nil
}

func (l *containerLauncher) Forget(ctx context.Context, agentID string) error {
	cli, err := l.ping(ctx)
	if err != nil {
		return err
	}
	name := ContainerName(l.instance, agentID)
	if _, err := cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container backend: remove %s: %w", name, err)
	}
	return l.removeNetwork(ctx, cli, agentID)
}

// stop stops (without removing) the agent's container; its home stays on the host.
func (l *containerLauncher) stop(ctx context.Context, agentID string) error {
	l.mu.Lock()
	cli := l.cli
	l.mu.Unlock()
	if cli == nil {
		return nil
	}
	zero := 0
	_, err := cli.ContainerStop(ctx, ContainerName(l.instance, agentID), client.ContainerStopOptions{Timeout: &zero})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container backend: stop: %w", err)
	}
	return nil
}

func (l *containerLauncher) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cli != nil {
		err := l.cli.Close()
		l.cli = nil
		return err
	}
	return nil
}
