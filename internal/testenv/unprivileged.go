package testenv

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// UnprivilegedUser is the dedicated user the gateway runs as in deployments (the systemd
// unit); security tests re-run themselves as it.
const UnprivilegedUser = "porthole"

// UnprivilegedChildEnv is set (to "1") in a re-run as UnprivilegedUser.
const UnprivilegedChildEnv = "PORTHOLE_TEST_UNPRIVILEGED_CHILD"

// RerunUnprivileged re-runs this test binary as UnprivilegedUser (created if absent) through
// setpriv, with -test.run run, the way bridges' TestUnprivilegedGateway does. files are
// copied next to the binary, in a directory the user can read, and their new paths set as the
// environment variables that key them; env adds variables. It needs root, fails when the
// re-run fails or skips a case, and returns the re-run's verbose output.
func RerunUnprivileged(t *testing.T, run string, files map[string]string, env ...string) string {
	t.Helper()
	if os.Getuid() != 0 {
		Missing(t, "root, to re-run the tests as the unprivileged user %s", UnprivilegedUser)
	}
	setpriv := LookPath(t, "setpriv")
	if _, err := user.Lookup(UnprivilegedUser); err != nil {
		useradd := LookPath(t, "useradd")
		if out, err := exec.Command(useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", UnprivilegedUser).CombinedOutput(); err != nil {
			t.Fatalf("create user %s: %v\n%s", UnprivilegedUser, err, out)
		}
	}
	dir, err := os.MkdirTemp("", "porthole-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	copyExec(t, os.Args[0], bin)
	cmd := exec.Command(setpriv, "--reuid="+UnprivilegedUser, "--regid="+UnprivilegedUser, "--init-groups", "--",
		bin, "-test.run", run, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=/tmp",
		"CI=" + os.Getenv("CI"), UnprivilegedChildEnv + "=1"}, env...)
	for k, src := range files {
		dst := filepath.Join(dir, filepath.Base(src))
		copyExec(t, src, dst)
		cmd.Env = append(cmd.Env, k+"="+dst)
	}
	out, err := cmd.CombinedOutput()
	text := string(out)
	lines := strings.Split(text, "\n")
	t.Logf("run as %s (last lines):\n%s", UnprivilegedUser, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	if err != nil {
		t.Fatalf("tests as user %s failed: %v", UnprivilegedUser, err)
	}
	for _, line := range lines {
		if strings.Contains(line, "--- SKIP") {
			t.Errorf("the run as %s skipped a case: %s", UnprivilegedUser, line)
		}
	}
	return text
}

func copyExec(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
