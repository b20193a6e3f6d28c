package bridges

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// unmountHomes unmounts the home images left mounted under a test's data dir (a gateway killed
// before a new one reconciled them), so that the test's TempDir can be removed.
func unmountHomes(data string) {
	(&homeDisk{mode: DiskImage, dataDir: data, mounted: map[string]bool{}}).reconcile()
}

// diskModes are the home size limits this run can test: the sized image as root, the periodic
// check always (it is what an unprivileged gateway gets).
func diskModes(t *testing.T) []string {
	if os.Getuid() == 0 {
		testenv.LookPath(t, "mkfs.ext4")
		return []string{DiskImage, DiskCheck}
	}
	return []string{DiskCheck}
}

// TestHomeDiskLimit (issue 7, row 8): writing 3 GiB into a home limited to 64 MiB fails (image:
// "No space left on device"; check: one file cannot outgrow the limit, and many files stop the
// agent with a message naming the limit); the home stays near its limit, nothing of it is
// removed, and the agent can start again to delete files.
func TestHomeDiskLimit(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	for _, mode := range diskModes(t) {
		t.Run(mode, func(t *testing.T) {
			m, cfg := newTestManager(t, func(c *Config) { c.DiskMode = mode; c.DiskCheckInterval = 100 * time.Millisecond })
			a := agent("disk1", api.BackendBwrap, api.NetworkNone, api.Limits{DiskMiB: 64})
			home := AgentHome(cfg.DataDir, a.ID)
			sh(t, m, a, "echo keep > $HOME/keep.txt")
			// One file of 3 GiB: no space (image), or no file over the limit (check: RLIMIT_FSIZE).
			res := sh(t, m, a, "dd if=/dev/zero of=$HOME/big bs=1M count=3072 2>&1; echo rc=$?; stat -c %s $HOME/big")
			t.Logf("3 GiB file into a 64 MiB home: %q", lastLines(res.Stdout, 3))
			if mode == DiskImage && !strings.Contains(res.Stdout, "No space left on device") {
				t.Errorf("image: dd = %q, want No space left on device", res.Stdout)
			}
			if strings.Contains(res.Stdout, "rc=0") || strings.Contains(res.Stdout, "3221225472") {
				t.Errorf("a 3 GiB file was written into a 64 MiB home: %q", res.Stdout)
			}
			// Many files of 60 MiB each: the image fills up; the check stops the agent.
			sh(t, m, a, "rm -f $HOME/big")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", `i=0; while [ $i -lt 48 ]; do i=$((i+1)); dd if=/dev/zero of=$HOME/f$i bs=1M count=60 2>&1 || break; done`}, TimeoutS: 100})
			used, uerr := homeUsage(home)
			if uerr != nil {
				t.Fatal(uerr)
			}
			t.Logf("48 files of 60 MiB into a 64 MiB home: exec err %v; stdout %q; home uses %d MiB", err, lastLines(res.Stdout, 2), used>>20)
			switch mode {
			case DiskImage:
				if err != nil || !strings.Contains(res.Stdout, "No space left on device") {
					t.Errorf("image: dd = %+v, %v; want No space left on device", res, err)
				}
				if used > 64<<20 {
					t.Errorf("image: home uses %d MiB, over its 64 MiB", used>>20)
				}
			case DiskCheck:
				if err == nil {
					t.Errorf("check: 2.8 GiB of files were written to the end: %+v", res)
				} else if !errors.Is(err, ErrDiskLimit) || !strings.Contains(err.Error(), "over its 64 MiB limit") {
					t.Errorf("check: exec error %q does not say the home is over its 64 MiB limit", err)
				}
				// Stopped within a few intervals: far below the 2.8 GiB asked for.
				if used > 1<<30 {
					t.Errorf("check: home uses %d MiB; the writer was not stopped", used>>20)
				}
			}
			// No data lost; the agent runs again and its user can delete the big file.
			r := sh(t, m, a, "cat $HOME/keep.txt; rm -f $HOME/f*; echo removed")
			if !strings.Contains(r.Stdout, "keep") || !strings.Contains(r.Stdout, "removed") {
				t.Errorf("after the limit: %+v", r)
			}
			if r := sh(t, m, a, "head -c 1000000 /dev/zero > $HOME/small && echo ok"); !strings.Contains(r.Stdout, "ok") {
				t.Errorf("a small write below the limit: %+v", r)
			}
		})
	}
}

// TestHomeNosuid (issue 7, row 9, host side): the home is mounted nosuid,nodev inside the jail,
// and as root on the host too (its image): a setuid-root file in it does not run setuid for a
// host user. (The jail's own chmod u+s is refused by the seccomp filter; the file is made here.)
func TestHomeNosuid(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	m, cfg := newTestManager(t, nil)
	a := agent("suid1", api.BackendBwrap, api.NetworkNone, api.Limits{DiskMiB: 64})
	res := sh(t, m, a, "grep ' /home/agent ' /proc/self/mountinfo")
	opts := strings.Fields(res.Stdout)
	if len(opts) < 6 || !strings.Contains(opts[5], "nosuid") || !strings.Contains(opts[5], "nodev") {
		t.Errorf("/home/agent in the jail's mountinfo: %q, want nosuid,nodev", res.Stdout)
	}
	if os.Getuid() != 0 {
		return // an unprivileged gateway cannot make a setuid-root file
	}
	home := AgentHome(cfg.DataDir, a.ID)
	// The attack of row 9 itself: chmod 4755 in the jail leaves no setuid file on the host.
	r := sh(t, m, a, "cp /bin/true $HOME/y; chmod 4755 $HOME/y; chmod u+s $HOME/y; stat -c %a $HOME/y")
	if fi, err := os.Stat(filepath.Join(home, "y")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("after chmod 4755 in the jail (%q), the host sees %v, %v; want no setuid bit", r.Stdout+r.Stderr, fi.Mode(), err)
	}
	// Row 10: with its image, the home's host path does not show in the jail's mountinfo.
	if strings.Contains(res.Stdout, cfg.DataDir) {
		t.Errorf("the jail's mountinfo shows the data dir: %q", res.Stdout)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(home, &st); err != nil {
		t.Fatal(err)
	}
	const stNosuid, stNodev = 0x2, 0x4
	if st.Flags&stNosuid == 0 || st.Flags&stNodev == 0 {
		t.Errorf("the home on the host: statfs flags %#x, want nosuid and nodev", st.Flags)
	}
	setpriv := testenv.LookPath(t, "setpriv")
	idBin := testenv.LookPath(t, "id")
	suid := filepath.Join(home, "x")
	copyFile(t, idBin, suid, 0o755)
	if err := os.Chown(suid, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(suid); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("%s is not setuid: %v %v", suid, fi.Mode(), err)
	}
	// A host user runs it through an fd (the 0700 home would stop it at the path): with a setuid
	// bit in force `id -u` would print 0.
	f, err := os.Open(suid)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/proc/self/fd/3", "-u")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	t.Logf("setuid-root file in the home run by uid 65534: id -u = %q (%v)", out, err)
	if strings.TrimSpace(string(out)) != "65534" {
		t.Errorf("setuid-root file in the home ran as %q for uid 65534, want 65534 (nosuid)", out)
	}
}

// BenchmarkHomeImageCreate: what an agent's first start costs as root for its home image (a sparse
// 10 GiB ext4 made and loop-mounted); later starts find it mounted.
func BenchmarkHomeImageCreate(b *testing.B) {
	if os.Getuid() != 0 {
		testenv.Missing(b, "root, to mount home images")
	}
	testenv.LookPath(b, "mkfs.ext4")
	dir := b.TempDir()
	var ds []time.Duration
	for b.Loop() {
		img, mnt := filepath.Join(dir, "h.img"), filepath.Join(dir, "home")
		os.Mkdir(mnt, 0o700)
		start := time.Now()
		if err := makeImage(img, DefaultLimits.DiskMiB); err != nil {
			b.Fatal(err)
		}
		if err := mountImage(img, mnt); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := unmountHome(mnt); err != nil {
			b.Fatal(err)
		}
		os.Remove(img)
		b.StartTimer()
	}
	reportMs(b, "create", ds)
}

// TestHomeImageMigrates: a home made before home images (a plain directory of the data dir) is
// copied into its new image at the next start as root: nothing is lost, and the limit then binds.
func TestHomeImageMigrates(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	if os.Getuid() != 0 {
		testenv.Missing(t, "root, to mount home images")
	}
	testenv.LookPath(t, "mkfs.ext4")
	data := t.TempDir()
	a := agent("mig1", api.BackendBwrap, api.NetworkNone, api.Limits{DiskMiB: 64})
	m1, _ := newTestManager(t, func(c *Config) { c.DataDir = data; c.DiskMode = DiskCheck })
	sh(t, m1, a, "mkdir -p $HOME/d && echo kept > $HOME/d/f && ln -s d/f $HOME/link")
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	m2, _ := newTestManager(t, func(c *Config) { c.DataDir = data; c.DiskMode = DiskImage })
	res := sh(t, m2, a, "cat $HOME/d/f $HOME/link; ls -A $HOME")
	if res.Stdout != "kept\nkept\nd\nlink\n" {
		t.Errorf("after the move into the image: %q, want the files and nothing else", res.Stdout)
	}
	home := AgentHome(data, a.ID)
	if !isMountPoint(home) {
		t.Errorf("%s is not a mount point after the move", home)
	}
	if r := sh(t, m2, a, "dd if=/dev/zero of=$HOME/big bs=1M count=200 2>&1"); !strings.Contains(r.Stdout, "No space left on device") {
		t.Errorf("200 MiB into the migrated 64 MiB home: %q", r.Stdout)
	}
}
