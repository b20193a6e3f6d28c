package bridges

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/porthole/porthole/internal/testenv"
)

// unprivilegedRun is the -test.run pattern re-run as the unprivileged user: the isolation map,
// exec, lifecycle, fail-closed and surface tests, container cases included: the child reaches the
// test engine through the group that owns its socket (build/scripts/services.sh), as a
// deployment's gateway user would.
const unprivilegedRun = `^(TestIsolationMap|TestExec|TestLifecycle|TestFailClosed|TestSurfacesRunInside|TestRlimitsInForce|TestForgetPurge|TestPTYInsideSandbox|TestJailAccounts|TestIdleStopRacesNoCaller|TestJailTmpfsBounded|TestHomeDiskLimit|TestHomeNosuid|TestNetworkHostSocketsUnreachable|TestNetworkFullOutbound|TestNetworkAgentsIsolated|TestNetworkContainerOwnNetwork|TestNetworkContainerNetworksNotLeaked|TestNetworkStackLifecycle|TestNetworkStackFailsClosed|TestNetworkCrossBackendIsolated|TestJailHardening|TestHelperSurvivesForkBomb|TestBrowserProfileMount|TestBrowserProfileEscape)$`

// unprivilegedChildEnv marks the re-run as the unprivileged user.
const unprivilegedChildEnv = "PORTHOLE_TEST_UNPRIVILEGED_CHILD"

// TestUnprivilegedGateway re-runs the isolation tests as the dedicated unprivileged user
// `porthole` (created if absent), the way the systemd unit runs the gateway: bwrap jails then
// get rlimits instead of cgroups, and must be exactly as contained; container agents run as the
// gateway's uid (its homes are 0700) against the rootful test engine.
func TestUnprivilegedGateway(t *testing.T) {
	if os.Getuid() != 0 {
		// This whole run is the unprivileged one; the root-gateway half needs root (CI runs as root).
		testenv.Missing(t, "root, to test the gateway both as root and as the unprivileged user")
	}
	setpriv := testenv.LookPath(t, "setpriv")
	testenv.LookPath(t, "bwrap")
	if _, err := user.Lookup("porthole"); err != nil {
		useradd := testenv.LookPath(t, "useradd")
		if out, err := exec.Command(useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "porthole").CombinedOutput(); err != nil {
			t.Fatalf("create user porthole: %v\n%s", err, out)
		}
	}
	dir, err := os.MkdirTemp("", "porthole-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "bridges.test")
	copyFile(t, os.Args[0], bin, 0o755)
	helper := filepath.Join(dir, "porthole")
	copyFile(t, helperBin, helper, 0o755)

	// --init-groups: the user's supplementary groups, the engine socket's group among them.
	cmd := exec.Command(setpriv, "--reuid=porthole", "--regid=porthole", "--init-groups", "--",
		bin, "-test.run", unprivilegedRun, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"TMPDIR=/tmp",
		"CI=" + os.Getenv("CI"),
		"PORTHOLE_TEST_HELPER=" + helper,
		unprivilegedChildEnv + "=1",
	}
	for _, k := range []string{"PORTHOLE_TEST_ENGINE", "PORTHOLE_TEST_IMAGE"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	text := string(out)
	lines := strings.Split(text, "\n")
	var proof []string // the container cases and the agents' uids, wherever they are in the output
	for _, line := range lines {
		if strings.Contains(line, "/container ") || strings.Contains(line, "/image_missing ") || strings.Contains(line, "id -u = ") {
			proof = append(proof, line)
		}
	}
	t.Logf("unprivileged run, container cases:\n%s", strings.Join(proof, "\n"))
	t.Logf("unprivileged run (last lines):\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
	if err != nil {
		t.Fatalf("isolation tests as user porthole failed: %v", err)
	}
	for _, want := range []string{"--- PASS: TestIsolationMap/bwrap ", "--- PASS: TestIsolationMap/host ", "--- PASS: TestRlimitsInForce ", "--- PASS: TestJailHardening ", "--- PASS: TestHelperSurvivesForkBomb ",
		"--- PASS: TestExec ", "--- PASS: TestLifecycle/bwrap ", "--- PASS: TestSurfacesRunInside/bwrap ", "--- PASS: TestFailClosed/user_namespaces_blocked ",
		"--- PASS: TestIsolationMap/container ", "--- PASS: TestIsolationMap/container/agent_is_not_root ", "--- PASS: TestLifecycle/container ",
		"--- PASS: TestSurfacesRunInside/container ", "--- PASS: TestFailClosed/image_missing ",
		"--- PASS: TestJailTmpfsBounded ", "--- PASS: TestHomeDiskLimit/check ", "--- PASS: TestHomeNosuid ",
		"--- PASS: TestNetworkHostSocketsUnreachable/bwrap/full ", "--- PASS: TestNetworkHostSocketsUnreachable/container/full ",
		"--- PASS: TestNetworkFullOutbound ", "--- PASS: TestNetworkAgentsIsolated/bwrap ", "--- PASS: TestNetworkAgentsIsolated/container ",
		"--- PASS: TestNetworkContainerOwnNetwork ", "--- PASS: TestNetworkContainerNetworksNotLeaked ", "--- PASS: TestNetworkStackLifecycle ",
		"--- PASS: TestNetworkStackFailsClosed ", "--- PASS: TestNetworkCrossBackendIsolated "} {
		if !strings.Contains(text, want) {
			t.Errorf("unprivileged run lacks %q", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "--- SKIP") {
			t.Errorf("unprivileged run skipped a case: %s", line)
		}
	}
}

// TestRlimitsInForce: which limits a bwrap jail gets — cgroups as root, rlimits unprivileged —
// is what Probe reports (and /readyz shows), and the helper really applied it.
func TestRlimitsInForce(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	m, _ := newTestManager(t, nil)
	var detail string
	for _, r := range m.Probe(t.Context()) {
		if r.Backend == "bwrap" {
			if !r.OK {
				t.Fatalf("bwrap probe: %+v", r)
			}
			detail = r.Detail
		}
	}
	a := agent("lim1", "bwrap", "none", apiLimits(100, 300))
	res := sh(t, m, a, "bash -c 'ulimit -u; ulimit -d'")
	t.Logf("probe: %s; in the jail: ulimit -u -d = %q", detail, res.Stdout)
	if os.Getuid() == 0 {
		if !strings.Contains(detail, "cgroup") {
			t.Errorf("as root, probe detail = %q, want cgroup limits", detail)
		}
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/porthole", m.Instance()+"-lim1", "pids.max"))
		if err != nil || strings.TrimSpace(string(b)) != "100" {
			t.Errorf("pids.max of the agent's cgroup = %q, %v; want 100", b, err)
		}
		return
	}
	if !strings.Contains(detail, "rlimit") {
		t.Errorf("unprivileged, probe detail = %q, want rlimits", detail)
	}
	if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != "100" || got[1] != "307200" {
		t.Errorf("ulimit -u -d in the jail = %q, want 100 and 307200 (KiB)", res.Stdout)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
