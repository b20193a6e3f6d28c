package bridges

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrDiskLimit: an agent's home is over its size limit (Limits.DiskMiB).
var ErrDiskLimit = errors.New("disk limit")

// Disk modes (Config.DiskMode).
const (
	// DiskImage: each home is an ext4 image file (<data>/agents/<id>/home.img, sparse) loop-mounted
	// nosuid,nodev on the home directory: writes past the limit fail with ENOSPC. Needs root,
	// mkfs.ext4 (e2fsprogs) and loop devices.
	DiskImage = "image"
	// DiskCheck: the home's usage is measured every DiskCheckInterval while the agent runs; an agent
	// whose home grows past its limit is stopped with a message naming the limit (no file is removed).
	// The only mode an unprivileged gateway has.
	DiskCheck = "check"
)

// DefaultDiskCheckInterval is how often DiskCheck measures a running agent's home.
const DefaultDiskCheckInterval = 2 * time.Second

// diskSlackBytes: in DiskCheck mode an agent over its limit may still grow by this much (a shell's
// history, an editor's swap file) while its user deletes files.
const diskSlackBytes = 1 << 20

// homeDisk applies the per-agent home size limit.
type homeDisk struct {
	mode     string
	interval time.Duration
	dataDir  string
	logger   *slog.Logger

	mu      sync.Mutex
	mounted map[string]bool     // agents whose image this Manager mounted (unmounted on Forget/Close)
	stops   map[string]diskStop // DiskCheck: the last stop of each agent for its home's size
}

type diskStop struct {
	err error
	at  time.Time
}

// newHomeDisk picks the mode: DiskImage when it works here (checked with a real image), else
// DiskCheck. want forces a mode ("" = auto).
func newHomeDisk(want, dataDir string, interval time.Duration, logger *slog.Logger) (*homeDisk, error) {
	if interval <= 0 {
		interval = DefaultDiskCheckInterval
	}
	d := &homeDisk{mode: DiskCheck, interval: interval, dataDir: dataDir, logger: logger, mounted: map[string]bool{}, stops: map[string]diskStop{}}
	switch want {
	case DiskCheck:
		return d, nil
	case "", DiskImage:
	default:
		return nil, fmt.Errorf("disk mode %q is not %q or %q", want, DiskImage, DiskCheck)
	}
	if err := probeImage(dataDir); err != nil {
		if want == DiskImage {
			return nil, fmt.Errorf("disk mode image: %w", err)
		}
		logger.Info("home images not usable; homes are measured periodically instead", "cause", err)
		return d, nil
	}
	d.mode = DiskImage
	return d, nil
}

// describe is the disk part of the bwrap Probe detail (/readyz).
func (d *homeDisk) describe() string {
	if d.mode == DiskImage {
		return "disk: an ext4 image per home, mounted nosuid,nodev (writes past the limit fail: no space left)"
	}
	return fmt.Sprintf("disk: home usage checked every %s (an agent past its limit is stopped; not a hard quota) + rlimit fsize (no file over the limit)", d.interval)
}

func imagePath(dataDir, agentID string) string {
	return filepath.Join(dataDir, "agents", agentID, "home.img")
}

// probeImage creates, mounts and removes a small image under dataDir.
func probeImage(dataDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("not root (mounting an image needs CAP_SYS_ADMIN)")
	}
	for _, t := range []string{"mkfs.ext4", "resize2fs", "mount", "losetup", "cp"} {
		if _, err := lookSystemTool(t); err != nil {
			return fmt.Errorf("%w (e2fsprogs, mount and coreutils are needed for home images)", err)
		}
	}
	dir, err := os.MkdirTemp(filepath.Join(dataDir, "agents"), ".diskprobe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, mnt := filepath.Join(dir, "probe.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return err
	}
	if err := makeImage(img, 8); err != nil {
		return err
	}
	if err := mountImage(img, mnt); err != nil {
		return err
	}
	return unmountHome(mnt)
}

// systemToolPath is where the disk tools are looked up, whatever the gateway's own PATH.
const systemToolPath = "/usr/sbin:/usr/bin:/sbin:/bin"

func lookSystemTool(name string) (string, error) {
	for _, d := range filepath.SplitList(systemToolPath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, systemToolPath)
}

// systemTool is a command of the host's own tools (mkfs.ext4, mount, …), never from the gateway's PATH.
func systemTool(name string, args ...string) *exec.Cmd {
	p, err := lookSystemTool(name)
	if err != nil {
		p = name // fails at Run with exec's own error
	}
	cmd := exec.Command(p, args...)
	cmd.Env = []string{"PATH=" + systemToolPath, "LC_ALL=C"}
	return cmd
}

// makeImage creates a sparse ext4 image of sizeMiB at path.
func makeImage(path string, sizeMiB int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create home image: %w", err)
	}
	err = f.Truncate(sizeMiB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("size home image: %w", err)
	}
	// No reserved blocks, root-owned root directory; lazy init keeps creation fast and the file sparse.
	out, err := systemTool("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1", path).CombinedOutput()
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mountImage loop-mounts img on dir, nosuid,nodev (mount(8) sets up an autoclear loop device).
func mountImage(img, dir string) error {
	out, err := systemTool("mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,discard", img, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func unmountHome(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(dir, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a jail's mount namespace still going away
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is the root of a mount (a different device than its parent).
func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// prepare makes the agent's home ready under its limit: in image mode the image exists, is at
// least limitMiB and is mounted on home (an existing plain home is moved into a new image first).
func (d *homeDisk) prepare(agentID, home string, limitMiB int64) error {
	if d.mode != DiskImage {
		return nil
	}
	img := imagePath(d.dataDir, agentID)
	if isMountPoint(home) {
		d.mu.Lock()
		d.mounted[agentID] = true
		d.mu.Unlock()
		return d.grow(img, home, limitMiB)
	}
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		if err := makeImage(img, limitMiB); err != nil {
			return err
		}
		if err := d.migrate(img, home); err != nil {
			os.Remove(img)
			return err
		}
	} else if err != nil {
		return fmt.Errorf("home image: %w", err)
	}
	if err := mountImage(img, home); err != nil {
		return err
	}
	d.mu.Lock()
	d.mounted[agentID] = true
	d.mu.Unlock()
	os.Remove(filepath.Join(home, "lost+found")) // an agent's home starts empty; e2fsck recreates it if needed
	if err := os.Chmod(home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	return d.grow(img, home, limitMiB)
}

// migrate copies a non-empty plain home into the new image (first start after the gateway gained
// image support), then empties the directory the image is mounted on.
func (d *homeDisk) migrate(img, home string) error {
	ents, err := os.ReadDir(home)
	if err != nil || len(ents) == 0 {
		return nil
	}
	tmp := home + ".migrate"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("migrate home: %w", err)
	}
	defer os.Remove(tmp)
	if err := mountImage(img, tmp); err != nil {
		return err
	}
	out, err := systemTool("cp", "-a", home+"/.", tmp+"/").CombinedOutput()
	uerr := unmountHome(tmp)
	if err != nil {
		return fmt.Errorf("%w: copy the home into its %s image: %v: %s", ErrDiskLimit, filepath.Base(img), err, strings.TrimSpace(string(out)))
	}
	if uerr != nil {
		return uerr
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(home, e.Name())); err != nil {
			return fmt.Errorf("migrate home: %w", err)
		}
	}
	d.logger.Info("home moved into a sized image", "home", home)
	return nil
}

// grow enlarges the image (online) when the limit was raised; a lowered limit keeps the larger
// image (shrinking could lose data).
func (d *homeDisk) grow(img, home string, limitMiB int64) error {
	fi, err := os.Stat(img)
	if err != nil {
		return fmt.Errorf("home image: %w", err)
	}
	if fi.Size() >= limitMiB<<20 {
		if fi.Size() > limitMiB<<20 {
			d.logger.Warn("home image larger than the agent's disk limit (images are not shrunk)", "image", img, "size_mib", fi.Size()>>20, "limit_mib", limitMiB)
		}
		return nil
	}
	if err := os.Truncate(img, limitMiB<<20); err != nil {
		return fmt.Errorf("grow home image: %w", err)
	}
	out, err := systemTool("resize2fs", loopDevice(home), fmt.Sprintf("%dM", limitMiB)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("resize2fs %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// loopDevice returns the device mounted on dir (from /proc/self/mountinfo) after making it see its
// file's new size (losetup -c), so that resize2fs can grow the filesystem online.
func loopDevice(dir string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	dev := ""
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fs := strings.Fields(pre)
		if !ok || len(fs) < 5 || unescapeMountPath(fs[4]) != dir {
			continue
		}
		if pf := strings.Fields(post); len(pf) >= 2 {
			dev = pf[1]
		}
	}
	if dev != "" {
		systemTool("losetup", "-c", dev).Run()
	}
	return dev
}

// release unmounts the agent's image (helper stopped). purge is handled by the caller removing
// the agent's directory afterwards.
func (d *homeDisk) release(agentID, home string) error {
	d.mu.Lock()
	m := d.mounted[agentID]
	delete(d.mounted, agentID)
	d.mu.Unlock()
	if !m && !(d.mode == DiskImage && isMountPoint(home)) {
		return nil
	}
	return unmountHome(home)
}

// reconcile unmounts the images left mounted by a previous gateway process (its jails died with it).
func (d *homeDisk) reconcile() int {
	ents, err := os.ReadDir(filepath.Join(d.dataDir, "agents"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		home := filepath.Join(d.dataDir, "agents", e.Name(), "home")
		if e.IsDir() && isMountPoint(home) {
			if _, err := os.Stat(imagePath(d.dataDir, e.Name())); err == nil && unmountHome(home) == nil {
				n++
			}
		}
	}
	return n
}

// homeUsage is the space the files under dir take (allocated blocks, hard links counted once).
func homeUsage(dir string) (int64, error) {
	var total int64
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil // removed meanwhile; a 0000 dir the agent made is still counted below by its size
			}
			return err
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			k := [2]uint64{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// overLimitError is the message an agent stopped for its home's size gets.
func overLimitError(limitMiB, used int64) error {
	return fmt.Errorf("%w: home is over its %d MiB limit (uses %d MiB); the agent's processes were stopped, delete files in the home to get below the limit",
		ErrDiskLimit, limitMiB, (used+(1<<20)-1)>>20)
}

// watch measures the home of a running agent every interval (DiskCheck mode) and calls stop with
// ErrDiskLimit when it grows past its limit. An agent that starts over its limit (it was stopped
// for it, or the limit was lowered) may run so that its user can delete files, but must not grow:
// its allowance ratchets down to max(limit, smallest usage seen). Returns when done is closed.
func (d *homeDisk) watch(done <-chan struct{}, home string, limitMiB int64, stop func(error)) {
	limit := limitMiB << 20
	allowed := limit
	if u, err := homeUsage(home); err == nil && u > allowed {
		allowed = u
	}
	t := time.NewTimer(d.interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		start := time.Now()
		u, err := homeUsage(home)
		// A large home takes long to walk: at most a tenth of the time is spent measuring it.
		t.Reset(max(d.interval, 10*time.Since(start)))
		if err != nil {
			d.logger.Warn("measure home", "home", home, "err", err)
			continue
		}
		if u > allowed+diskSlackBytes {
			stop(overLimitError(limitMiB, u))
			return
		}
		allowed = max(limit, min(allowed, u))
	}
}

// noteStop records that the agent was stopped for its home's size (before the stop cuts its streams).
func (d *homeDisk) noteStop(agentID string, err error) {
	d.mu.Lock()
	d.stops[agentID] = diskStop{err, time.Now()}
	d.mu.Unlock()
}

// explain returns err with the disk-limit cause when the agent was stopped for it just now: an exec
// cut by that stop then says why instead of "session closed".
func (d *homeDisk) explain(agentID string, err error) error {
	if err == nil {
		return nil
	}
	d.mu.Lock()
	st, ok := d.stops[agentID]
	d.mu.Unlock()
	if !ok || time.Since(st.at) > 30*time.Second {
		return err
	}
	return fmt.Errorf("%w (%v)", st.err, err)
}
