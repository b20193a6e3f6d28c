package bridges

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// People's browser profiles (docs/api.md, "Browser profiles"): a person keeps a profile of
// their own in the gateway's data dir and lends it to one of their agents at a time. While it
// is lent, the agent's sandbox has the profile's directory bound read-write at
// ProfileMountPath, owned by the sandbox's uid; the helper's Chromium uses that directory as
// its user data dir when it exists (browser.LentProfileDir), else the agent's own profile in
// its home.
//
// A sandbox gets its mounts when it starts, never later: which profile is lent is asked
// (Config.BrowserProfile) each time an agent's helper starts, so lending or taking a profile
// back restarts the agent's helper (the gateway stops it; the next use starts it on the new
// profile). The Manager also keeps a profile in at most one running sandbox: a helper that
// starts with a profile first stops any other agent's helper that still has it mounted.

// ProfileMountPath is where a lent profile is mounted inside the sandbox.
const ProfileMountPath = "/run/porthole/browser-profile"

// profileIDRe is what a profile id may look like where it becomes a path.
var profileIDRe = regexp.MustCompile(`^[a-z0-9]{1,64}$`)

// ErrBadProfileID is a profile id that cannot safely name a directory.
var ErrBadProfileID = errors.New("profile id must be 1-64 of [a-z0-9]")

func checkProfileID(id string) error {
	if !profileIDRe.MatchString(id) {
		return fmt.Errorf("profile id %q: %w", id, ErrBadProfileID)
	}
	return nil
}

// ProfilesDir holds every profile's directory.
func ProfilesDir(dataDir string) string { return filepath.Join(dataDir, "profiles") }

// ProfileDir is where a profile lives on the gateway's host.
func ProfileDir(dataDir, profileID string) string {
	return filepath.Join(ProfilesDir(dataDir), profileID)
}

// CreateProfileDir creates a profile's empty directory (0700, in ProfilesDir, also 0700).
func CreateProfileDir(dataDir, profileID string) error {
	if err := checkProfileID(profileID); err != nil {
		return err
	}
	if err := ensurePrivateDir(ProfilesDir(dataDir)); err != nil {
		return fmt.Errorf("create profiles dir: %w", err)
	}
	if err := os.Mkdir(ProfileDir(dataDir, profileID), 0o700); err != nil {
		return fmt.Errorf("create profile dir: %w", err)
	}
	return nil
}

// ensurePrivateDir creates dir 0700 if missing, and makes sure it is a directory (not a
// symlink) of mode 0700.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// RemoveProfileDir deletes a profile's directory and everything in it. The agents that used it
// could put anything there, symlinks out of it included: nothing is followed (each directory is
// opened relative to its parent with O_NOFOLLOW; a symlink is removed itself, never its
// target). However deep the tree, the walk holds at most maxProfileDepth descriptors: a
// subtree below that depth is first moved up to the profile's top and removed from there. A
// missing directory is not an error.
func RemoveProfileDir(dataDir, profileID string) error {
	if err := checkProfileID(profileID); err != nil {
		return err
	}
	parent, err := unix.Open(ProfilesDir(dataDir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("remove profile %s: open profiles dir: %w", profileID, err)
	}
	defer unix.Close(parent)
	root, err := unix.Openat(parent, profileID, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		// Not a directory (a symlink): the entry itself goes.
		if err := unix.Unlinkat(parent, profileID, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove profile %s: %w", profileID, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("remove profile %s: %w", profileID, err)
	}
	err = emptyDir(root)
	unix.Close(root)
	if err != nil {
		return fmt.Errorf("remove profile %s: %w", profileID, err)
	}
	if err := unix.Unlinkat(parent, profileID, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove profile %s: %w", profileID, err)
	}
	return nil
}

// maxProfileDepth bounds how deep the gateway walks a profile's tree at once (an agent could
// make an arbitrarily deep one to exhaust the gateway's descriptors). Chromium's own profiles
// are under 10 levels deep.
const maxProfileDepth = 64

// emptyDir removes everything in the directory root, in rounds: each round removes what it can
// reach within maxProfileDepth levels and moves deeper subtrees up into root for the next.
func emptyDir(root int) error {
	for round := 0; ; round++ {
		names, err := readNames(root)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		if round > 1_000_000 {
			return errors.New("the profile keeps growing while it is removed")
		}
		for _, n := range names {
			if err := removeAt(root, root, n, 1); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
	}
}

// readNames lists the directory fd (from its start).
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), "dir") // owns dup
	defer d.Close()
	if _, err := unix.Seek(dup, 0, 0); err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return names, nil
}

// removeAt removes name in the directory dirfd: anything but a directory (symlinks included) by
// unlinking the entry itself; a directory with its contents, or, at maxProfileDepth, by moving
// it up into root (emptyDir's next round removes it).
func removeAt(root, dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return err
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("unlink %s: %w", name, err)
	}
	if depth >= maxProfileDepth {
		up := "porthole-removing-" + randomHex(8)
		if err := unix.Renameat(dirfd, name, root, up); err != nil {
			return fmt.Errorf("move %s up: %w", name, err)
		}
		return nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	names, err := readNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAt(root, fd, n, depth+1); err != nil && !errors.Is(err, unix.ENOENT) {
				err = fmt.Errorf("%s/%w", name, err)
				break
			}
			err = nil
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("rmdir %s: %w", name, err)
	}
	return nil // not empty: a subtree was moved up, or something appeared; the next round sees it
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// prepareProfile readies a lent profile's directory for a sandbox whose processes run as
// uid:gid on the host: it must be a directory (a symlink is refused), becomes 0700, and
// belongs to uid:gid with everything in it (only when its owner differs: a profile moves from a
// container agent, uid 1000, to a root gateway's jail, uid 0, and back). The walk follows no
// symlink (lchown semantics, each directory opened relative to its parent with O_NOFOLLOW), so
// a profile cannot be used to give the sandbox a file outside it. A missing directory (data
// restored without it) is created empty.
func prepareProfile(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("browser profile: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("browser profile %s: not a directory: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("browser profile: %w", err)
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("browser profile: chmod: %w", err)
		}
	}
	if int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	if err := chownTreeAt(fd, uid, gid, 0); err != nil {
		return fmt.Errorf("browser profile: give it to uid %d: %w", uid, err)
	}
	return nil
}

// chownTreeAt gives the directory fd and everything under it to uid:gid, following no symlink.
func chownTreeAt(fd, uid, gid, depth int) error {
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	if depth >= maxProfileDepth {
		return fmt.Errorf("deeper than %d levels", maxProfileDepth)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), "profile") // owns dup (the listing's own offset)
	defer d.Close()
	unix.Seek(dup, 0, 0)
	for {
		ents, rerr := d.ReadDir(256)
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() {
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err == nil {
					err = chownTreeAt(sub, uid, gid, depth+1)
					unix.Close(sub)
					if err != nil {
						return fmt.Errorf("%s/%w", name, err)
					}
					continue
				}
				if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
					if errors.Is(err, unix.ENOENT) {
						continue
					}
					return fmt.Errorf("open %s: %w", name, err)
				}
				// Replaced by a symlink or a file meanwhile: chowned as an entry below.
			}
			if err := unix.Fchownat(fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("chown %s: %w", name, err)
			}
		}
		if rerr != nil || len(ents) == 0 {
			return nil
		}
	}
}

// parseUser parses a container's "uid:gid".
func parseUser(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	if uid, err = strconv.Atoi(u); err != nil || !ok {
		return 0, 0, fmt.Errorf("container user %q is not uid:gid", user)
	}
	if gid, err = strconv.Atoi(g); err != nil {
		return 0, 0, fmt.Errorf("container user %q is not uid:gid", user)
	}
	return uid, gid, nil
}

// profileHold is one profile in (or about to be in) one agent's running sandbox.
type profileHold struct {
	id, agentID, dir string
	conn             *Conn         // the helper that has it mounted, once started; guarded by Manager.mu
	released         chan struct{} // closed when that sandbox is gone (or never started)
	once             sync.Once
}

// claimProfile asks which profile is lent to the agent (Config.BrowserProfile) and reserves it
// for the helper about to start: another agent's helper that still has it (lent to it before,
// taken back since) is stopped first and waited for. nil: the agent's browser uses its own
// profile (nothing lent, no callback, or a host agent, which has no sandbox to mount it in).
func (m *Manager) claimProfile(ctx context.Context, agentID, backendType string) (*profileHold, error) {
	if m.cfg.BrowserProfile == nil || backendType == api.BackendHost {
		return nil, nil
	}
	pid, err := m.cfg.BrowserProfile(ctx, agentID)
	if err != nil {
		return nil, fmt.Errorf("agent %s: which browser profile is lent to it: %w", agentID, err)
	}
	if pid == "" {
		return nil, nil
	}
	if err := checkProfileID(pid); err != nil {
		return nil, fmt.Errorf("agent %s: %w", agentID, err)
	}
	for {
		m.mu.Lock()
		h := m.profiles[pid]
		if h == nil || h.agentID == agentID {
			nh := &profileHold{id: pid, agentID: agentID, dir: ProfileDir(m.cfg.DataDir, pid), released: make(chan struct{})}
			m.profiles[pid] = nh
			m.mu.Unlock()
			return nh, nil
		}
		c := h.conn
		m.mu.Unlock()
		if c != nil {
			m.logger.Warn("browser profile still mounted in another agent's sandbox: stopping it", "profile", pid, "agent", h.agentID, "for", agentID)
			c.stop(fmt.Errorf("its lent browser profile now belongs to agent %s", agentID))
		}
		select {
		case <-h.released:
		case <-ctx.Done():
			return nil, fmt.Errorf("agent %s: waiting for browser profile %s to leave agent %s's sandbox: %w", agentID, pid, h.agentID, context.Cause(ctx))
		}
	}
}

// holdProfile records the helper that has h mounted; before its watch starts (which releases
// it).
func (m *Manager) holdProfile(h *profileHold, c *Conn) {
	if h == nil {
		return
	}
	m.mu.Lock()
	h.conn = c
	m.mu.Unlock()
	c.profile = h
}

// releaseProfile ends h: the sandbox that had it is gone.
func (m *Manager) releaseProfile(h *profileHold) {
	if h == nil {
		return
	}
	m.mu.Lock()
	if m.profiles[h.id] == h {
		delete(m.profiles, h.id)
	}
	m.mu.Unlock()
	h.once.Do(func() { close(h.released) })
}
