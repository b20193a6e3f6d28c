package bridges

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// cgroups places each bwrap jail in its own cgroup v1 groups (pids, memory, cpu) under
// <root>/<controller>/porthole/<instance>-<agent>. It is used when the gateway can create
// them (root, or a delegated hierarchy); otherwise the jail falls back to rlimits.
type cgroups struct {
	root     string // e.g. /sys/fs/cgroup
	instance string
}

var cgControllers = []string{"pids", "memory", "cpu"}

// newCgroups returns a usable cgroups, or nil and the reason when the gateway cannot create them.
func newCgroups(root, instance string) (*cgroups, error) {
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	c := &cgroups{root: root, instance: instance}
	for _, ctl := range cgControllers {
		base := filepath.Join(root, ctl)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s controller not mounted at %s", ctl, base)
		}
		dir := filepath.Join(base, "porthole")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		// Must be able to set limits in a group of its own, not merely mkdir.
		probe, err := os.MkdirTemp(dir, "probe-")
		if err != nil {
			return nil, fmt.Errorf("create cgroup under %s: %w", dir, err)
		}
		werr := syscall.Access(filepath.Join(probe, "cgroup.procs"), unix.W_OK)
		os.Remove(probe)
		if werr != nil {
			return nil, fmt.Errorf("write %s/cgroup.procs: %w", probe, werr)
		}
	}
	return c, nil
}

func (c *cgroups) describe() string { return filepath.Join(c.root, "{pids,memory,cpu}", "porthole") }

func (c *cgroups) dir(ctl, agentID string) string {
	return filepath.Join(c.root, ctl, "porthole", c.instance+"-"+agentID)
}

// setup creates (or reuses) the agent's groups with lim and returns their cgroup.procs files.
func (c *cgroups) setup(agentID string, lim api.Limits) ([]string, error) {
	var procs []string
	for _, ctl := range cgControllers {
		d := c.dir(ctl, agentID)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
		var settings [][2]string
		switch ctl {
		case "pids":
			settings = [][2]string{{"pids.max", strconv.Itoa(lim.Pids)}}
		case "memory":
			settings = [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(lim.MemoryMiB<<20, 10)}}
		case "cpu":
			settings = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", strconv.Itoa(lim.CPUPct * 1000)}}
		}
		for _, s := range settings {
			if err := os.WriteFile(filepath.Join(d, s[0]), []byte(s[1]), 0); err != nil {
				return nil, fmt.Errorf("set %s/%s=%s: %w", d, s[0], s[1], err)
			}
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, nil
}

// remove kills whatever is left in the agent's groups and removes them.
func (c *cgroups) remove(agentID string) error {
	var errs []error
	for _, ctl := range cgControllers {
		d := c.dir(ctl, agentID)
		for i := 0; i < 50; i++ {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				break
			}
			pids := strings.Fields(string(b))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// reconcile removes the groups of this instance left by a previous gateway process (killed: its
// jails died with it, their empty groups stayed), killing anything still inside.
func (c *cgroups) reconcile() (int, error) {
	seen := map[string]bool{}
	for _, ctl := range cgControllers {
		ents, err := os.ReadDir(filepath.Join(c.root, ctl, "porthole"))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if id, ok := strings.CutPrefix(e.Name(), c.instance+"-"); ok && e.IsDir() {
				seen[id] = true
			}
		}
	}
	var errs []error
	for id := range seen {
		if err := c.remove(id); err != nil {
			errs = append(errs, err)
		}
	}
	return len(seen), errors.Join(errs...)
}
