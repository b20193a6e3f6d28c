package bridges

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// cgroup2 places each bwrap jail in a group of its own under a cgroup v2 subtree the gateway
// owns: the unit's cgroup when systemd runs it with Delegate=yes (build/systemd/porthole.service),
// or a directory given by Config.Cgroup2Dir. Groups are <dir>/<instance>-<agent> with memory.max
// (tmpfs pages are charged to it), memory.swap.max=0, pids.max and cpu.max, for the controllers the
// subtree offers. The jail is born inside its group (clone3 CLONE_INTO_CGROUP).
type cgroup2 struct {
	dir      string
	instance string
	ctl      []string // controllers enabled for the agents' groups, of cg2Controllers
}

var cg2Controllers = []string{"memory", "pids", "cpu"}

// cg2GatewayLeaf is where the gateway moves itself when it owns the subtree's root group: cgroup v2
// lets a group with processes in it give no controllers to its children.
const cg2GatewayLeaf = "gateway"

// ownCgroup2 returns the directory of the calling process's cgroup v2 group.
func ownCgroup2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var rel string
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)")
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, rel), nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup on a unified host,
// /sys/fs/cgroup/unified on a hybrid one).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if fs := strings.Fields(pre); len(fs) >= 5 && fs[3] == "/" {
			return unescapeMountPath(fs[4]), nil
		}
	}
	return "", errors.New("cgroup2 is not mounted")
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newCgroup2 prepares dir ("" = the gateway's own group) for the agents' groups. With explicit
// false, it refuses a subtree that offers neither memory nor pids (the hybrid hierarchy's unified
// part has no controllers): cgroup v1 or rlimits are then better. An explicitly configured dir is
// used whatever it offers; Probe then says which limits are missing.
func newCgroup2(dir, instance string, explicit bool) (*cgroup2, error) {
	if dir == "" {
		d, err := ownCgroup2()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := unix.Access(filepath.Join(dir, "cgroup.subtree_control"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup v2 group %s is not writable (not delegated: Delegate=yes, ProtectControlGroups=no): %w", dir, err)
	}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 group %s: %w", dir, err)
	}
	var ctl []string
	for _, c := range cg2Controllers {
		if slices.Contains(strings.Fields(string(avail)), c) {
			ctl = append(ctl, c)
		}
	}
	if !explicit && !slices.Contains(ctl, "memory") && !slices.Contains(ctl, "pids") {
		return nil, fmt.Errorf("cgroup v2 group %s offers no memory or pids controller (controllers: %q)", dir, strings.TrimSpace(string(avail)))
	}
	c := &cgroup2{dir: dir, instance: instance, ctl: ctl}
	if len(ctl) > 0 {
		if err := c.enable(); err != nil {
			return nil, err
		}
	}
	// Must be able to create a group and move a process into it, not merely see the files.
	probe, err := os.MkdirTemp(dir, "probe-")
	if err != nil {
		return nil, fmt.Errorf("create cgroup under %s: %w", dir, err)
	}
	werr := unix.Access(filepath.Join(probe, "cgroup.procs"), unix.W_OK)
	os.Remove(probe)
	if werr != nil {
		return nil, fmt.Errorf("write %s/cgroup.procs: %w", probe, werr)
	}
	return c, nil
}

// enable turns the controllers on for dir's children. If dir holds processes (the gateway's own
// group under systemd), the gateway first moves itself into dir/gateway.
func (c *cgroup2) enable() error {
	var b strings.Builder
	for _, ctl := range c.ctl {
		b.WriteString("+" + ctl + " ")
	}
	sc := filepath.Join(c.dir, "cgroup.subtree_control")
	err := os.WriteFile(sc, []byte(strings.TrimSpace(b.String())), 0)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("enable %v in %s: %w", c.ctl, sc, err)
	}
	procs, rerr := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if rerr != nil || !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(os.Getpid())) {
		return fmt.Errorf("enable %v in %s: %w (the group holds processes other than the gateway)", c.ctl, sc, err)
	}
	leaf := filepath.Join(c.dir, cg2GatewayLeaf)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("move the gateway into %s: %w", leaf, err)
	}
	if err := os.WriteFile(sc, []byte(strings.TrimSpace(b.String())), 0); err != nil {
		return fmt.Errorf("enable %v in %s: %w", c.ctl, sc, err)
	}
	return nil
}

func (c *cgroup2) has(ctl string) bool { return slices.Contains(c.ctl, ctl) }

func (c *cgroup2) groupDir(agentID string) string {
	return filepath.Join(c.dir, c.instance+"-"+agentID)
}

// setup creates (or reuses) the agent's group with lim and returns an O_PATH fd of its directory
// for CLONE_INTO_CGROUP; the caller closes it.
func (c *cgroup2) setup(agentID string, lim api.Limits) (int, error) {
	d := c.groupDir(agentID)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return -1, fmt.Errorf("create %s: %w", d, err)
	}
	var settings [][2]string
	if c.has("memory") {
		settings = append(settings, [2]string{"memory.max", strconv.FormatInt(lim.MemoryMiB<<20, 10)}, [2]string{"memory.swap.max", "0"})
	}
	if c.has("pids") {
		settings = append(settings, [2]string{"pids.max", strconv.Itoa(lim.Pids)})
	}
	if c.has("cpu") {
		settings = append(settings, [2]string{"cpu.max", strconv.Itoa(lim.CPUPct*1000) + " 100000"})
	}
	for _, s := range settings {
		if err := os.WriteFile(filepath.Join(d, s[0]), []byte(s[1]), 0); err != nil {
			if s[0] == "memory.swap.max" && errors.Is(err, os.ErrNotExist) {
				continue // a kernel without swap accounting
			}
			return -1, fmt.Errorf("set %s/%s=%s: %w", d, s[0], s[1], err)
		}
	}
	fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", d, err)
	}
	return fd, nil
}

// remove kills whatever is left in the agent's group and removes it.
func (c *cgroup2) remove(agentID string) error {
	d := c.groupDir(agentID)
	if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// cgroup.kill (Linux 5.14) kills the whole subtree at once, forks in flight included.
	os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil || len(strings.Fields(string(b))) == 0 {
			break
		}
		for _, p := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	for i := 0; i < 50; i++ { // rmdir fails with EBUSY until the last process is reaped
		if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", d, err)
}

// reconcile removes the groups of this instance left by a previous gateway process.
func (c *cgroup2) reconcile() (int, error) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return 0, nil
	}
	var errs []error
	n := 0
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), c.instance+"-"); ok && e.IsDir() {
			n++
			if err := c.remove(id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}
