package bridges

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// lentProfiles is a test's Config.BrowserProfile: which profile is lent to which agent.
type lentProfiles struct {
	mu sync.Mutex
	m  map[string]string // agent id → profile id
}

func (l *lentProfiles) set(agentID, profileID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if profileID == "" {
		delete(l.m, agentID)
	} else {
		l.m[agentID] = profileID
	}
}

func (l *lentProfiles) lookup(ctx context.Context, agentID string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[agentID], nil
}

func ownerOf(t *testing.T, path string) (uid int, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), fi.Mode()
}

// TestBrowserProfileMount: a profile lent to bwrap agent A1 is bound read-write at
// ProfileMountPath (owned by the jail's uid, 0700, nosuid,nodev) and what A1 writes there is in
// the profile's directory on the host; A2 has no such mount; when the profile moves to A2, A1's
// running helper is stopped before A2's starts (never in two sandboxes at once), and A1's next
// helper has its own profile again. Then a container agent gets it, as its uid, and a jail
// again.
func TestBrowserProfileMount(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	lent := &lentProfiles{m: map[string]string{}}
	m, cfg := newTestManager(t, func(c *Config) { c.BrowserProfile = lent.lookup })
	const pid = "p1profile"
	if err := CreateProfileDir(cfg.DataDir, pid); err != nil {
		t.Fatal(err)
	}
	dir := ProfileDir(cfg.DataDir, pid)
	if _, mode := ownerOf(t, dir); mode.Perm() != 0o700 {
		t.Errorf("new profile dir mode %v, want 0700", mode.Perm())
	}
	if _, mode := ownerOf(t, ProfilesDir(cfg.DataDir)); mode.Perm() != 0o700 {
		t.Errorf("profiles dir mode %v, want 0700", mode.Perm())
	}
	a1 := agent("pa1", api.BackendBwrap, api.NetworkNone, api.Limits{})
	a2 := agent("pa2", api.BackendBwrap, api.NetworkNone, api.Limits{})
	lent.set(a1.ID, pid)

	probe := `p=` + ProfileMountPath + `; if [ -e $p ]; then stat -c 'mounted %u %a' $p; grep " $p " /proc/self/mountinfo | grep -o 'nosuid,nodev' | head -1; else echo absent; fi`
	res := sh(t, m, a1, probe+`; echo cookie-a1 > $p/Cookies && echo wrote`)
	if !strings.Contains(res.Stdout, "mounted 1000 700") || !strings.Contains(res.Stdout, "nosuid,nodev") || !strings.Contains(res.Stdout, "wrote") {
		t.Fatalf("A1 with the lent profile: %q %q, want it mounted (uid 1000, 0700, nosuid,nodev) and writable", res.Stdout, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "Cookies")); err != nil || string(b) != "cookie-a1\n" {
		t.Errorf("profile dir on the host after A1 wrote: %q, %v", b, err)
	}
	if res := sh(t, m, a2, probe); strings.TrimSpace(res.Stdout) != "absent" {
		t.Errorf("A2 (nothing lent) sees %q at %s, want absent", res.Stdout, ProfileMountPath)
	}

	// The profile moves to A2 while A1's helper runs: A1's goes first.
	c1, err := m.Conn(context.Background(), a1)
	if err != nil {
		t.Fatal(err)
	}
	lent.set(a1.ID, "")
	lent.set(a2.ID, pid)
	m.Stop(context.Background(), a2.ID) // A2's running helper has no profile: it restarts on it
	res = sh(t, m, a2, probe+`; cat $p/Cookies`)
	select {
	case <-c1.Done():
	default:
		t.Errorf("A2 started with the profile while A1's helper still ran with it")
	}
	if !strings.Contains(res.Stdout, "mounted 1000 700") || !strings.Contains(res.Stdout, "cookie-a1") {
		t.Errorf("A2 after the profile moved: %q %q, want it mounted with A1's cookie", res.Stdout, res.Stderr)
	}
	if res := sh(t, m, a1, probe); strings.TrimSpace(res.Stdout) != "absent" {
		t.Errorf("A1 after the profile moved sees %q, want absent", res.Stdout)
	}
	// Taken back from A2 (the gateway stops its helper): A2 no longer has it.
	lent.set(a2.ID, "")
	m.Stop(context.Background(), a2.ID)
	if res := sh(t, m, a2, probe); strings.TrimSpace(res.Stdout) != "absent" {
		t.Errorf("A2 after the take-back sees %q, want absent", res.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "Cookies")); err != nil || string(b) != "cookie-a1\n" {
		t.Errorf("profile after the take-back: %q, %v, want the cookie kept", b, err)
	}
	m.mu.Lock()
	if n := len(m.profiles); n != 0 {
		t.Errorf("%d profile holds left with no helper running with a profile", n)
	}
	m.mu.Unlock()

	t.Run("container", func(t *testing.T) {
		requireBackend(t, api.BackendContainer)
		c := agent("pc1", api.BackendContainer, api.NetworkNone, api.Limits{})
		lent.set(c.ID, pid)
		res := sh(t, m, c, probe+`; id -u; cat $p/Cookies; echo from-container >> $p/Cookies && echo wrote`)
		uid := "1000"
		if os.Geteuid() != 0 {
			uid = strings.TrimSpace(sh(t, m, c, "id -u").Stdout)
		}
		if !strings.Contains(res.Stdout, "mounted "+uid+" 700") || !strings.Contains(res.Stdout, "cookie-a1") || !strings.Contains(res.Stdout, "wrote") {
			t.Fatalf("container agent with the lent profile: %q %q, want it mounted (uid %s, 0700) with the cookie, writable", res.Stdout, res.Stderr, uid)
		}
		// Back to a jail: the profile is the gateway's uid's again, and writable there.
		lent.set(c.ID, "")
		if err := m.Forget(context.Background(), c.ID, true); err != nil {
			t.Fatal(err)
		}
		lent.set(a1.ID, pid)
		m.Stop(context.Background(), a1.ID)
		res = sh(t, m, a1, probe+`; cat $p/Cookies; echo back >> $p/Cookies && echo wrote`)
		if !strings.Contains(res.Stdout, "mounted 1000 700") || !strings.Contains(res.Stdout, "from-container") || !strings.Contains(res.Stdout, "wrote") {
			t.Errorf("A1 after the container had the profile: %q %q", res.Stdout, res.Stderr)
		}
		if u, _ := ownerOf(t, filepath.Join(dir, "Cookies")); u != os.Geteuid() {
			t.Errorf("Cookies owned by uid %d on the host after a jail's use, want the gateway's %d", u, os.Geteuid())
		}
		lent.set(a1.ID, "")
		m.Stop(context.Background(), a1.ID)
	})
}

// TestBrowserProfileEscape: an agent with a lent profile plants symlinks in it pointing at
// files and directories outside (on the host), and a deep tree. Giving the profile to another
// uid (as for a container agent under a root gateway) and deleting it touch none of the
// targets; a profile directory that is itself a symlink is refused.
func TestBrowserProfileEscape(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	lent := &lentProfiles{m: map[string]string{}}
	m, cfg := newTestManager(t, func(c *Config) { c.BrowserProfile = lent.lookup })
	outside := t.TempDir()
	os.Chmod(outside, 0o755)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "dir", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretUID, _ := ownerOf(t, secret)
	const pid = "p2escape"
	if err := CreateProfileDir(cfg.DataDir, pid); err != nil {
		t.Fatal(err)
	}
	dir := ProfileDir(cfg.DataDir, pid)
	a := agent("pesc", api.BackendBwrap, api.NetworkNone, api.Limits{})
	lent.set(a.ID, pid)
	// The attack, from inside the sandbox: symlinks to host paths (they dangle in the jail, and
	// would resolve on the host), one named like a directory Chromium makes, and a deep tree.
	res := sh(t, m, a, `cd `+ProfileMountPath+` && ln -s `+secret+` Cookies && ln -s `+outside+` Default && ln -s `+outside+`/dir sub &&
mkdir -p deep && cd deep && i=0; while [ $i -lt 100 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done; echo planted`)
	if !strings.Contains(res.Stdout, "planted") {
		t.Fatalf("plant: %q %q", res.Stdout, res.Stderr)
	}
	lent.set(a.ID, "")
	m.Stop(context.Background(), a.ID)

	// Giving it to another uid follows none of the links (root: uid 1000, as for a container).
	if os.Geteuid() == 0 {
		err := prepareProfile(dir, 1000, 1000)
		if err == nil || !strings.Contains(err.Error(), "deeper than") {
			t.Errorf("prepareProfile of a 100-deep tree = %v, want refused (deeper than %d)", err, maxProfileDepth)
		}
		for _, p := range []string{secret, outside, filepath.Join(outside, "dir"), filepath.Join(outside, "dir", "f")} {
			if u, _ := ownerOf(t, p); u != secretUID {
				t.Errorf("%s now belongs to uid %d: the chown followed a symlink out of the profile", p, u)
			}
		}
		if u, _ := ownerOf(t, filepath.Join(dir, "Cookies")); u != 1000 {
			t.Errorf("the symlink itself belongs to uid %d, want 1000", u)
		}
	}
	// Deleting it removes the links, not their targets, and the deep tree.
	if err := RemoveProfileDir(cfg.DataDir, pid); err != nil {
		t.Errorf("RemoveProfileDir of a profile with links out and a 100-deep tree: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile dir after RemoveProfileDir: %v, want gone", err)
	}
	for _, p := range []string{secret, filepath.Join(outside, "dir", "f")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s after deleting the profile: %v: the delete followed a symlink out of it", p, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("secret after all this: %q", b)
	}

	// A profile directory that is a symlink is refused, never followed.
	const pid2 = "p3link"
	if err := os.Symlink(outside, ProfileDir(cfg.DataDir, pid2)); err != nil {
		t.Fatal(err)
	}
	if err := prepareProfile(ProfileDir(cfg.DataDir, pid2), os.Geteuid(), os.Getegid()); err == nil {
		t.Error("prepareProfile of a symlink to a host directory succeeded")
	}
	lent.set(a.ID, pid2)
	if _, err := m.Exec(context.Background(), a, api.ExecRequest{Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("an agent whose lent profile dir is a symlink started: %v, want refused", err)
	}
	if err := RemoveProfileDir(cfg.DataDir, pid2); err != nil {
		t.Errorf("RemoveProfileDir(symlink): %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "dir", "f")); err != nil {
		t.Errorf("a file of the symlink's target after deleting the profile: %v", err)
	}
}

// TestRemoveProfileDir: a profile with nested directories, files, links and a dangling link is
// removed whole; removing a missing one is not an error; bad ids are refused.
func TestRemoveProfileDir(t *testing.T) {
	data := t.TempDir()
	if err := CreateProfileDir(data, "abc"); err != nil {
		t.Fatal(err)
	}
	if err := CreateProfileDir(data, "abc"); err == nil {
		t.Error("creating a profile dir twice succeeded")
	}
	dir := ProfileDir(data, "abc")
	for _, d := range []string{"Default/Cache/x", "Default/Local Storage"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "Default/Cookies"), []byte("c"), 0o600)
	os.Symlink("porthole-agent-123", filepath.Join(dir, "SingletonLock"))
	os.Chmod(filepath.Join(dir, "Default/Cache/x"), 0o500)
	// 300 levels, each made relative to the previous one (the whole path would pass
	// PATH_MAX): more than the walk descends at once (maxProfileDepth).
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	if err := RemoveProfileDir(data, "abc"); err != nil {
		t.Fatalf("RemoveProfileDir: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile dir after removal: %v", err)
	}
	if err := RemoveProfileDir(data, "abc"); err != nil {
		t.Errorf("removing a missing profile: %v", err)
	}
	for _, bad := range []string{"", "..", "../agents", "a/b", "A"} {
		if err := RemoveProfileDir(data, bad); !errors.Is(err, ErrBadProfileID) {
			t.Errorf("RemoveProfileDir(%q) = %v, want ErrBadProfileID", bad, err)
		}
		if err := CreateProfileDir(data, bad); !errors.Is(err, ErrBadProfileID) {
			t.Errorf("CreateProfileDir(%q) = %v, want ErrBadProfileID", bad, err)
		}
	}
}

// TestBwrapArgsProfileBind: with a lent profile the jail has exactly two writable binds, the
// home and the profile at ProfileMountPath (after the /run tmpfs it lives in); without one, the
// mount point is not mentioned at all.
func TestBwrapArgsProfileBind(t *testing.T) {
	base := bwrapSpec{Helper: "/h", Home: "/data/agents/x/home", Network: api.NetworkNone, UsrLinks: hostUsrLinks()}
	if j := strings.Join(bwrapArgs(base), " "); strings.Contains(j, ProfileMountPath) || strings.Contains(j, "/profiles/") {
		t.Errorf("argv without a lent profile mentions it: %s", j)
	}
	s := base
	s.BrowserProfile = "/data/profiles/p1"
	args := bwrapArgs(s)
	var binds []string
	run := -1
	for i, a := range args {
		if a == "--bind" || a == "--dev-bind" || a == "--bind-try" {
			binds = append(binds, args[i+1]+"→"+args[i+2])
			if args[i+2] == ProfileMountPath && run < 0 {
				t.Errorf("profile bound before the jail's /run tmpfs (it would be hidden)")
			}
		}
		if a == "--tmpfs" && args[i+1] == "/run" {
			run = i
		}
	}
	want := []string{"/data/agents/x/home→" + jailHome, "/data/profiles/p1→" + ProfileMountPath}
	if strings.Join(binds, " ") != strings.Join(want, " ") {
		t.Errorf("writable binds %v, want %v", binds, want)
	}
}
