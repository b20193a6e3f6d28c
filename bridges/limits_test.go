package bridges

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// TestBwrapTmpfsSized: every tmpfs a jail can write to has a size, and the two bwrap makes unsized
// (the root, holding /etc and /opt, and /dev) are read-only once set up.
func TestBwrapTmpfsSized(t *testing.T) {
	for _, mem := range []int64{0, 256, 4096} {
		args := bwrapArgs(bwrapSpec{Helper: "/h", Home: "/data/agents/x/home", Network: api.NetworkNone, UsrLinks: hostUsrLinks(), MemoryMiB: mem})
		var total int64
		for i, a := range args {
			if a != "--tmpfs" {
				continue
			}
			j := slices.Index(args[max(0, i-4):i], "--size")
			if j < 0 {
				t.Errorf("memory %d MiB: --tmpfs %s has no --size", mem, args[i+1])
				continue
			}
			n, _ := strconv.ParseInt(args[max(0, i-4)+j+1], 10, 64)
			total += n
		}
		limit := mem
		if limit == 0 {
			limit = DefaultLimits.MemoryMiB
		}
		if total <= 0 || total > (limit<<20)/2 {
			t.Errorf("memory %d MiB: the jail's tmpfs total %d bytes, want within half the limit", mem, total)
		}
		joined := " " + strings.Join(args, " ") + " "
		for _, ro := range []string{" --remount-ro / ", " --remount-ro /dev "} {
			if !strings.Contains(joined, ro) {
				t.Errorf("argv lacks %q", ro)
			}
		}
		// The root goes read-only after the last mount made in it.
		if slices.Index(args, "/") < slices.Index(args, HelperPathInJail) {
			t.Errorf("--remount-ro / comes before the helper's bind")
		}
	}
}

func hostShmem(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Shmem:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no Shmem in /proc/meminfo")
	return 0
}

// TestJailTmpfsBounded (issue 7, row 4): writing 3 GiB into the jail's /tmp stops at the size its
// memory limit gives it ("No space left on device"), as do /var/tmp, /run and /dev/shm; /, /etc,
// /opt and /dev are read-only; the host's Shmem grows by no more than those caps; and, with a
// memory cgroup (root), the helper survives it all and still runs commands.
func TestJailTmpfsBounded(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	m, _ := newTestManager(t, nil)
	const memMiB = 256 // caps: /tmp 64 MiB, /dev/shm 32, /var/tmp 16, /run 4
	caps := map[string]int64{"/tmp": 64 << 20, "/dev/shm": 32 << 20, "/var/tmp": 16 << 20, "/run": 4 << 20}
	a := agent("tmpfs1", api.BackendBwrap, api.NetworkNone, api.Limits{Pids: 128, MemoryMiB: memMiB})
	// /readyz says which limits bind and which do not.
	for _, r := range m.Probe(t.Context()) {
		if r.Backend != api.BackendBwrap {
			continue
		}
		want := []string{"tmpfs sized", "disk: "}
		if os.Getuid() != 0 {
			want = append(want, "rlimit nproc", "NOT limited: total memory, cpu")
		}
		for _, w := range want {
			if !strings.Contains(r.Detail, w) {
				t.Errorf("bwrap probe detail %q lacks %q", r.Detail, w)
			}
		}
	}
	c, err := m.Conn(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	before := hostShmem(t)
	var sum int64
	for _, d := range []string{"/tmp", "/var/tmp", "/run", "/dev/shm"} {
		res := sh(t, m, a, fmt.Sprintf("dd if=/dev/zero of=%s/fill bs=1M count=3072 2>&1; stat -c %%s %s/fill", d, d))
		out := strings.TrimSpace(res.Stdout)
		if !strings.Contains(out, "No space left on device") {
			t.Errorf("3 GiB into %s: %q, want No space left on device", d, out)
		}
		lines := strings.Split(out, "\n")
		size, _ := strconv.ParseInt(lines[len(lines)-1], 10, 64)
		if size > caps[d] || size < caps[d]-(2<<20) {
			t.Errorf("%s/fill is %d bytes, want the cap %d", d, size, caps[d])
		}
		sum += size
	}
	grew := hostShmem(t) - before
	t.Logf("tmpfs filled: %d MiB in the jail; host Shmem grew by %d MiB", sum>>20, grew>>20)
	// Other processes on the host move Shmem too: allow 64 MiB of noise.
	if grew > sum+(64<<20) {
		t.Errorf("host Shmem grew by %d MiB, more than the jail's tmpfs caps (%d MiB)", grew>>20, sum>>20)
	}
	res := sh(t, m, a, `for f in /fill /etc/fill /opt/fill /dev/fill; do echo x > $f && echo "wrote $f"; done 2>&1; true`)
	if strings.Contains(res.Stdout, "wrote") || strings.Count(res.Stdout, "Read-only file system") != 4 {
		t.Errorf("writes to /, /etc, /opt, /dev: %q, want Read-only file system for each", res.Stdout)
	}
	// Memory pressure (tmpfs full, then an anonymous-memory hog): the hog fails or is killed; the
	// helper is the same process and still serves.
	hog := sh(t, m, a, `v=$(head -c 600000000 /dev/zero | tr '\0' x); echo "hog survived ${#v}"`)
	t.Logf("hog: exit %d, stdout %q, stderr %q", hog.ExitCode, hog.Stdout, lastLines(hog.Stderr, 2))
	if hog.ExitCode == 0 || strings.Contains(hog.Stdout, "hog survived") {
		t.Errorf("a 600 MB hog in a %d MiB agent completed: %+v", memMiB, hog)
	}
	c2, err := m.Conn(t.Context(), a)
	if err != nil || c2 != c || c.Err() != nil {
		t.Fatalf("after memory pressure the helper changed or died: %v, %v (same %v)", err, c.Err(), c2 == c)
	}
	if res := sh(t, m, a, "echo alive"); strings.TrimSpace(res.Stdout) != "alive" {
		t.Errorf("exec after the hog: %+v", res)
	}
	if os.Getuid() == 0 {
		// The kernel's own account: the cgroup hit its limit, and what died was not the helper.
		b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory/porthole", m.Instance()+"-tmpfs1", "memory.failcnt"))
		t.Logf("memory.failcnt of the agent's group: %s", strings.TrimSpace(string(b)))
	}
}

// TestCgroup2Delegated: given a writable cgroup v2 group (as systemd's Delegate=yes gives the
// unit), the gateway starts each jail inside a group of its own there (CLONE_INTO_CGROUP), sets
// the limits of the controllers it offers, stands in with rlimits for the others, says so in its
// probe, and removes the group on Forget. On a hybrid host the unified hierarchy has no
// controllers: only the placement, cleanup and the reporting are then exercised.
func TestCgroup2Delegated(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	if os.Getuid() != 0 {
		testenv.Missing(t, "root, to create a cgroup v2 group to delegate")
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		testenv.Missing(t, "a cgroup2 mount: %v", err)
	}
	parent := filepath.Join(mnt, "porthole-test-"+randHex(4))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() {
				os.Remove(filepath.Join(parent, e.Name()))
			}
		}
		if err := os.Remove(parent); err != nil {
			t.Errorf("remove %s: %v", parent, err)
		}
	})
	// What the parent of the test group offers is what a delegated group would get.
	avail, _ := os.ReadFile(filepath.Join(mnt, "cgroup.subtree_control"))
	t.Logf("cgroup2 at %s; controllers offered to children: %q", mnt, strings.TrimSpace(string(avail)))
	m, _ := newTestManager(t, func(c *Config) { c.Cgroup2Dir = parent })
	var detail string
	for _, r := range m.Probe(t.Context()) {
		if r.Backend == api.BackendBwrap {
			detail = r.Detail
		}
	}
	t.Logf("probe: %s", detail)
	if !strings.Contains(detail, "cgroup v2") || !strings.Contains(detail, parent) {
		t.Errorf("probe detail %q does not name the cgroup v2 subtree", detail)
	}
	a := agent("cg2a", api.BackendBwrap, api.NetworkNone, api.Limits{Pids: 77, MemoryMiB: 300, CPUPct: 50})
	c, err := m.Conn(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	group := filepath.Join(parent, m.Instance()+"-cg2a")
	procs, err := os.ReadFile(filepath.Join(group, "cgroup.procs"))
	if err != nil {
		t.Fatalf("agent's group: %v", err)
	}
	_, pid, _ := strings.Cut(c.Process().Desc, " pid ") // "bwrap pid N"
	if !slices.Contains(strings.Fields(string(procs)), pid) {
		t.Errorf("bwrap (pid %s) is not in %s (cgroup.procs: %q)", pid, group, procs)
	}
	// The jail's processes are born there too: a command's pid shows up in the group.
	res := sh(t, m, a, "sleep 30 & echo started")
	if !strings.Contains(res.Stdout, "started") {
		t.Fatalf("exec: %+v", res)
	}
	if n := countProcs(t, group); n < 2 {
		t.Errorf("%s holds %d processes, want bwrap and the jail's", group, n)
	}
	has := func(ctl string) bool { return slices.Contains(strings.Fields(string(avail)), ctl) }
	check := func(file, want string) {
		b, err := os.ReadFile(filepath.Join(group, file))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	ul := sh(t, m, a, "bash -c 'ulimit -u; ulimit -d'")
	if has("pids") {
		check("pids.max", "77")
	} else if !strings.HasPrefix(ul.Stdout, "77\n") {
		t.Errorf("no pids controller and ulimit -u = %q, want the rlimit 77", ul.Stdout)
	}
	if has("memory") {
		check("memory.max", strconv.Itoa(300<<20))
	} else {
		if !strings.HasSuffix(ul.Stdout, "307200\n") {
			t.Errorf("no memory controller and ulimit -d = %q, want the rlimit 307200", ul.Stdout)
		}
		if !strings.Contains(detail, "NOT limited: total memory") {
			t.Errorf("probe detail %q does not say total memory is not limited", detail)
		}
	}
	if has("cpu") {
		check("cpu.max", "50000 100000")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Forget(ctx, a.ID, true); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := os.Stat(group); !os.IsNotExist(err) {
		t.Errorf("after Forget, %s: %v; want it removed", group, err)
	}
}

func countProcs(t *testing.T, group string) int {
	b, err := os.ReadFile(filepath.Join(group, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(string(b)))
}
