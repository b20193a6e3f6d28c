package bridges

import (
	"fmt"
	"strconv"
	"strings"
)

// Sizes of a bwrap jail's tmpfs mounts, as fractions of the agent's memory limit. Their pages are
// memory (host Shmem; charged to the agent's memory cgroup where there is one), so together they
// stay well within the limit and leave the rest to processes: /tmp ¼, /dev/shm ⅛, /var/tmp 1/16,
// /run 1/64 — 29/64 (45 %) of the limit in all. The jail's root and /dev are tmpfs too (bwrap makes
// them); both are remounted read-only once the jail is set up, so they cannot grow.
const (
	tmpDiv    = 4
	shmDiv    = 8
	varTmpDiv = 16
	runDiv    = 64
	minTmpfs  = 1 << 20
)

// jailTmpfs is the size in bytes of each writable tmpfs of a jail with memory limit memMiB (0 = the default).
type jailTmpfs struct{ Tmp, Shm, VarTmp, Run int64 }

func tmpfsSizes(memMiB int64) jailTmpfs {
	if memMiB <= 0 {
		memMiB = DefaultLimits.MemoryMiB
	}
	b := memMiB << 20
	f := func(div int64) int64 { return max(b/div, minTmpfs) }
	return jailTmpfs{Tmp: f(tmpDiv), Shm: f(shmDiv), VarTmp: f(varTmpDiv), Run: f(runDiv)}
}

func (s jailTmpfs) total() int64 { return s.Tmp + s.Shm + s.VarTmp + s.Run }

// tmpfsArgs are the bwrap options creating the jail's writable tmpfs mounts, each sized.
func tmpfsArgs(memMiB int64) []string {
	s := tmpfsSizes(memMiB)
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{
		"--perms", "1777", "--size", n(s.Shm), "--tmpfs", "/dev/shm",
		"--perms", "1777", "--size", n(s.Tmp), "--tmpfs", "/tmp",
		"--perms", "1777", "--size", n(s.VarTmp), "--tmpfs", "/var/tmp",
		"--perms", "0755", "--size", n(s.Run), "--tmpfs", "/run",
		// /dev is bwrap's own unsized tmpfs: read-only once its nodes and /dev/shm are in place.
		"--remount-ro", "/dev",
	}
}

// limitsDetail says which resource limits bind a bwrap jail, and which do not (/readyz).
func (l *bwrapLauncher) limitsDetail() string {
	var in, missing []string
	switch {
	case l.cg2 != nil:
		var have []string
		for _, c := range cg2Controllers {
			if l.cg2.has(c) {
				have = append(have, c)
			}
		}
		if len(have) > 0 {
			in = append(in, fmt.Sprintf("cgroup v2 (%s) under %s", strings.Join(have, ", "), l.cg2.dir))
		} else {
			in = append(in, "cgroup v2 group per agent under "+l.cg2.dir+" (no controllers delegated)")
		}
		if !l.cg2.has("pids") {
			in = append(in, "rlimit nproc")
		}
		if !l.cg2.has("memory") {
			in = append(in, "rlimit data per process")
			missing = append(missing, "total memory")
		}
		if !l.cg2.has("cpu") {
			missing = append(missing, "cpu")
		}
		if len(missing) > 0 {
			missing[len(missing)-1] += " (controller not delegated to " + l.cg2.dir + ")"
		}
	case l.cg != nil:
		in = append(in, "cgroup v1 (pids, memory incl. tmpfs pages, cpu) under "+l.cg.describe())
	default:
		in = append(in, "rlimit nproc", "rlimit data per process")
		missing = append(missing, "total memory", "cpu (no delegated cgroup)")
	}
	in = append(in, "tmpfs sized (/tmp ¼, /dev/shm ⅛, /var/tmp 1/16, /run 1/64 of memory; / and /dev read-only)")
	d := "limits: " + strings.Join(in, " + ")
	if len(missing) > 0 {
		d += "; NOT limited: " + strings.Join(missing, ", ")
	}
	if l.diskDetail != "" {
		d += "; " + l.diskDetail
	}
	return d
}

// rlimitArgs are the helper flags that stand in for cgroup controllers the jail does not get.
func rlimitArgs(pids int, memMiB int64, nproc, data bool) []string {
	var a []string
	if nproc {
		a = append(a, "--rlimit-nproc", strconv.Itoa(pids))
	}
	if data {
		a = append(a, "--rlimit-data", strconv.FormatInt(memMiB<<20, 10))
	}
	return a
}
