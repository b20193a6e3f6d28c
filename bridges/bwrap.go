package bridges

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// Inside every bwrap jail the agent is uid/gid 1000 "agent" in its own user namespace,
// whatever user the gateway runs as (root or an unprivileged user).
const (
	jailUID  = 1000
	jailHome = "/home/agent"
	shmBytes = 256 << 20 // size cap of the jail's /dev/shm
)

// etcReadOnly are the pieces of the host's /etc a jail sees (read-only, when present):
// fonts, Chromium, TLS roots, alternatives' links, the dynamic linker cache, X keyboard data.
var etcReadOnly = []string{
	"/etc/alternatives",
	"/etc/ca-certificates",
	"/etc/chromium",
	"/etc/chromium.d",
	"/etc/fonts",
	"/etc/ld.so.cache",
	"/etc/localtime",
	"/etc/mime.types",
	"/etc/ssl",
	"/etc/X11",
}

// etcNetwork are added only for network "full" (name resolution). /etc/resolv.conf is generated
// (slirp4netns's DNS), never the host's, which may name a resolver on the host's loopback.
var etcNetwork = []string{
	"/etc/gai.conf",
	"/etc/host.conf",
}

// bwrapSpec is everything that determines a jail's argv.
type bwrapSpec struct {
	Helper     string          // host path of the helper binary, bound at HelperPathInJail
	Home       string          // host path of the agent's home, bound at /home/agent
	Network    string          // api.NetworkNone | api.NetworkFull
	UsrLinks   map[string]bool // for /bin /sbin /lib /lib64: true = symlink into /usr (merged-usr host); false = ro-bind the dir
	HelperArgs []string        // extra flags for `porthole helper` (rlimits)
	MemoryMiB  int64           // the agent's memory limit: sizes the jail's tmpfs mounts (0 = default)
	// BrowserProfile is the host path of a person's browser profile lent to the agent, bound
	// read-write at ProfileMountPath ("" = none; profile.go).
	BrowserProfile string
	// File descriptors (in the bwrap process) carrying generated files.
	PasswdFD, GroupFD, HostsFD, NsswitchFD int
	// Network "full" only: the generated resolv.conf, bwrap's --info-fd (the jail's pid for the
	// network stack) and --block-fd (the jail waits there until its network is up).
	ResolvFD, InfoFD, BlockFD int
	// SeccompFD carries the jail's seccomp filter (seccomp.go); 0 = none.
	SeccompFD int
}

// bwrapArgs builds the exact bwrap argv (without argv[0]) for spec; it is golden-tested.
func bwrapArgs(s bwrapSpec) []string {
	a := []string{
		"--unshare-all",
		"--unshare-user", "--uid", strconv.Itoa(jailUID), "--gid", strconv.Itoa(jailUID),
		"--disable-userns",
		"--hostname", "porthole-agent",
	}
	// Every jail has its own network namespace (--unshare-all); "full" gets user-mode networking
	// attached by the gateway (netstack.go), never the host's namespace.
	if s.Network == api.NetworkFull {
		a = append(a, "--info-fd", strconv.Itoa(s.InfoFD), "--block-fd", strconv.Itoa(s.BlockFD))
	}
	a = append(a,
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
		"--clearenv",
		"--ro-bind", "/usr", "/usr",
	)
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		link, ok := s.UsrLinks[d]
		switch {
		case !ok:
		case link:
			a = append(a, "--symlink", "usr"+d, d)
		default:
			a = append(a, "--ro-bind", d, d)
		}
	}
	etc := etcReadOnly
	if s.Network == api.NetworkFull {
		etc = append(append([]string(nil), etcReadOnly...), etcNetwork...)
	}
	for _, p := range etc {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a,
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(s.PasswdFD), "/etc/passwd",
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(s.GroupFD), "/etc/group",
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(s.HostsFD), "/etc/hosts",
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(s.NsswitchFD), "/etc/nsswitch.conf",
	)
	if s.Network == api.NetworkFull {
		a = append(a, "--perms", "0644", "--ro-bind-data", strconv.Itoa(s.ResolvFD), "/etc/resolv.conf")
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
	)
	a = append(a, tmpfsArgs(s.MemoryMiB)...)
	a = append(a,
		"--bind", s.Home, jailHome, // bwrap binds are nosuid,nodev
		"--ro-bind", s.Helper, HelperPathInJail,
	)
	if s.BrowserProfile != "" {
		// Under the jail's own /run tmpfs; nosuid,nodev like every bwrap bind.
		a = append(a, "--bind", s.BrowserProfile, ProfileMountPath)
	}
	a = append(a,
		// The root is bwrap's unsized tmpfs (holding /etc, /opt, …): read-only once set up.
		"--remount-ro", "/",
		"--chdir", jailHome,
	)
	if s.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(s.SeccompFD))
	}
	for _, kv := range sandboxEnv(jailHome) {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--", HelperPathInJail, "helper")
	return append(a, s.HelperArgs...)
}

// Generated /etc files of a jail: only the agent and root exist.
const (
	jailPasswd   = "root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:1000:1000:agent:/home/agent:/bin/bash\n"
	jailGroup    = "root:x:0:\nagent:x:1000:\n"
	jailHosts    = "127.0.0.1\tlocalhost porthole-agent\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	jailNsswitch = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
)

// hostUsrLinks looks at how the host lays out /bin /sbin /lib /lib64.
func hostUsrLinks() map[string]bool {
	m := map[string]bool{}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(d); err == nil && strings.TrimPrefix(t, "/") == "usr"+d {
				m[d] = true
				continue
			}
		}
		m[d] = false
	}
	return m
}

// bwrapLauncher runs the helper in a bubblewrap jail.
type bwrapLauncher struct {
	bwrap   string // configured path; "" = look up "bwrap" in PATH at each launch
	helper  string
	cg      *cgroups // cgroup v1; nil = rlimits (or cg2)
	cg2     *cgroup2 // delegated cgroup v2 (preferred over cg)
	logger  *slog.Logger
	slirp   string   // slirp4netns for network "full" ("" = looked up in PATH at each launch)
	blocked []string // CIDRs unreachable from a network-"full" jail (netstack.go: the container subnet pool and Config.BlockedCIDRs)

	netMu sync.Mutex
	nets  map[string]*netStack // running network stacks by agent id

	diskDetail string // the home size limit in force (for Probe)
	diskFsize  bool   // homes are only checked periodically: RLIMIT_FSIZE = the disk limit
}

func (l *bwrapLauncher) Backend() string { return api.BackendBwrap }
func (l *bwrapLauncher) Close() error    { return nil }

func (l *bwrapLauncher) lookBwrap() (string, error) {
	name := l.bwrap
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", unavailable(api.BackendBwrap, "bubblewrap not found (%v); install the bubblewrap package", err)
	}
	return p, nil
}

func (l *bwrapLauncher) Probe(ctx context.Context) ProbeResult {
	r := ProbeResult{Backend: api.BackendBwrap}
	bw, err := l.lookBwrap()
	if err != nil {
		r.Detail = err.Error()
		return r
	}
	if _, err := os.Stat(l.helper); err != nil {
		r.Detail = unavailable(api.BackendBwrap, "helper binary: %v", err).Error()
		return r
	}
	// A real, minimal jail with the same namespaces as an agent's.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"--unshare-all", "--unshare-user", "--uid", strconv.Itoa(jailUID), "--gid", strconv.Itoa(jailUID),
		"--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
		"--ro-bind", "/usr", "/usr"}
	for d, link := range hostUsrLinks() {
		if link {
			args = append(args, "--symlink", "usr"+d, d)
		} else {
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true")
	cmd := exec.CommandContext(ctx, bw, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		r.Detail = unavailable(api.BackendBwrap, "cannot create a jail (user namespaces blocked?): %v: %s", err, strings.TrimSpace(stderr.String())).Error()
		return r
	}
	r.OK = true
	r.Detail = l.limitsDetail() + "; " + l.netDetail()
	return r
}

func (l *bwrapLauncher) Launch(ctx context.Context, spec AgentSpec) (*Process, error) {
	bw, err := l.lookBwrap()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(l.helper); err != nil {
		return nil, unavailable(api.BackendBwrap, "helper binary: %v", err)
	}
	files, err := memFiles(jailPasswd, jailGroup, jailHosts, jailNsswitch)
	if err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	bs := bwrapSpec{
		Helper:   l.helper,
		Home:     spec.Home,
		Network:  spec.Backend.Network,
		UsrLinks: hostUsrLinks(),
		// ExtraFiles[i] is fd 3+i in bwrap.
		PasswdFD: 3, GroupFD: 4, HostsFD: 5, NsswitchFD: 6,
	}
	sec, err := seccompFile()
	if err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	if sec != nil {
		files = append(files, sec) // closed with the others
		bs.SeccompFD = 3 + len(files) - 1
	}
	var jn *jailNet
	var slirp string
	if bs.Network == api.NetworkFull {
		// Fail closed before anything starts: no network stack, no "full" agent.
		slirp, err = lookSlirp(l.slirp)
		if err == nil {
			err = checkTun()
		}
		if err != nil {
			return nil, unavailable(api.BackendBwrap, "%v", err)
		}
		if jn, err = newJailNet(); err != nil {
			return nil, fmt.Errorf("bwrap: %w", err)
		}
		defer jn.close()
		files = jn.add(&bs, files)
	}
	bs.MemoryMiB = spec.Limits.MemoryMiB
	if spec.BrowserProfile != "" {
		// The jail's uid 1000 is the gateway's own uid on the host (root or not).
		if err := prepareProfile(spec.BrowserProfile, os.Geteuid(), os.Getegid()); err != nil {
			return nil, fmt.Errorf("bwrap: %w", err)
		}
		bs.BrowserProfile = spec.BrowserProfile
	}
	var argv []string
	cgFD := -1
	if l.cg2 != nil {
		fd, err := l.cg2.setup(spec.ID, spec.Limits)
		if err != nil {
			return nil, unavailable(api.BackendBwrap, "cgroups: %v", err)
		}
		defer unix.Close(fd)
		cgFD = fd
		// rlimits stand in for controllers the subtree does not offer.
		bs.HelperArgs = rlimitArgs(spec.Limits.Pids, spec.Limits.MemoryMiB, !l.cg2.has("pids"), !l.cg2.has("memory"))
		argv = []string{bw}
	} else if l.cg != nil {
		procs, err := l.cg.setup(spec.ID, spec.Limits)
		if err != nil {
			return nil, unavailable(api.BackendBwrap, "cgroups: %v", err)
		}
		// cgroup v1 has no CLONE_INTO_CGROUP: a shell joins the groups, then execs bwrap in place,
		// so bwrap and everything in the jail are born inside them.
		argv = append([]string{"/bin/sh", "-c", cgexecScript, "cgexec"}, procs...)
		argv = append(argv, "--", bw)
	} else {
		bs.HelperArgs = rlimitArgs(spec.Limits.Pids, spec.Limits.MemoryMiB, true, true)
		argv = []string{bw}
	}
	if l.diskFsize && spec.Limits.DiskMiB > 0 {
		// The periodic home check acts after the fact; no single file may outgrow the limit meanwhile.
		bs.HelperArgs = append(bs.HelperArgs, "--rlimit-fsize", strconv.FormatInt(spec.Limits.DiskMiB<<20, 10))
	}
	// The jail's argv goes through an fd (--args): /proc/1/cmdline inside the jail would otherwise
	// show the host paths of the agent's home and the helper.
	// (bwrap reads options from it; the command stays on the real argv.)
	full := bwrapArgs(bs)
	sep := slices.Index(full, "--")
	opts, command := full[:sep], full[sep:]
	argFile, err := memFiles(strings.Join(opts, "\x00") + "\x00")
	if err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	defer argFile[0].Close()
	files = append(files, argFile[0])
	argv = append(argv, "--args", strconv.Itoa(3+len(files)-1))
	argv = append(argv, command...)
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: []string{"PATH=/usr/bin:/bin"}, ExtraFiles: files}
	if l.cg != nil {
		cmd.Args[0] = "porthole-cgexec" // names the wrapper in ps until it becomes bwrap
	}
	// The gateway's death kills bwrap, and --die-with-parent then the jail (its pid namespace).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cgFD >= 0 {
		// clone3(CLONE_INTO_CGROUP): bwrap and the whole jail are born in the agent's group.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgFD
	}
	p, err := startCmd(cmd, "bwrap", nil)
	if err != nil {
		return nil, unavailable(api.BackendBwrap, "start %s: %v", bw, err)
	}
	if jn != nil {
		if err := l.attachNet(ctx, jn, slirp, spec.ID, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (l *bwrapLauncher) Forget(ctx context.Context, agentID string) error {
	if l.cg2 != nil {
		return l.cg2.remove(agentID)
	}
	if l.cg != nil {
		return l.cg.remove(agentID)
	}
	return nil
}

// cgexecScript: "$@" is the cgroup.procs files, "--", then the command.
const cgexecScript = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`

// memFiles returns unlinked read-only files holding each content (passed to bwrap as fds).
func memFiles(contents ...string) ([]*os.File, error) {
	var fs []*os.File
	for _, c := range contents {
		fd, err := memfdCreate("porthole-etc")
		if err != nil {
			for _, f := range fs {
				f.Close()
			}
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "porthole-etc")
		if _, err := f.WriteString(c); err != nil {
			f.Close()
			return nil, fmt.Errorf("write generated file: %w", err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("seek generated file: %w", err)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func memfdCreate(name string) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	return fd, nil
}
