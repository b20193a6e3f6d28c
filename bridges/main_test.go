package bridges

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// Test fixtures shared by every test of the package.
var (
	// helperBin is the helper binary every backend mounts (built once by TestMain).
	helperBin string
	// gatewaySecret is set in the test process's environment: no sandbox may see it.
	gatewaySecret string
	// repoRoot is the module root (for go build and build/agent-image/build.sh).
	repoRoot string
)

const secretEnv = "PORTHOLE_TEST_GATEWAY_SECRET"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	gatewaySecret = "gwsecret-" + randHex(8)
	os.Setenv(secretEnv, gatewaySecret)
	helperBin = os.Getenv("PORTHOLE_TEST_HELPER")
	if helperBin == "" {
		dir, err := os.MkdirTemp("", "porthole-helper-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o755) // readable by an unprivileged re-run of the tests
		helperBin = filepath.Join(dir, "porthole")
		cmd := exec.Command("go", "build", "-o", helperBin, "./bridges/internal/testhelper")
		cmd.Dir = repoRoot
		// With cgo, as the real binary is built (Makefile), when there is a C compiler: the
		// processes it starts then run under the C reaper (internal/sandboxproc/reap).
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgoEnabled())
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build test helper: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

// cgoEnabled is "1" when go env CC names a C compiler that is installed, else "0".
func cgoEnabled() string {
	out, _ := exec.Command("go", "env", "CGO_ENABLED", "CC").Output()
	f := strings.Fields(string(out))
	if len(f) == 2 && f[0] == "1" {
		if _, err := exec.LookPath(f[1]); err == nil {
			return "1"
		}
	}
	return "0"
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// engine returns the podman/Docker API socket for container tests (PORTHOLE_TEST_ENGINE).
func engine(t testing.TB) string {
	t.Helper()
	return testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
}

var imageOnce struct {
	sync.Once
	err error
}

// testImage returns the agent image tag (PORTHOLE_TEST_IMAGE, default porthole-agent:latest) on
// the test engine, building it with build/agent-image/build.sh when the engine lacks it or has an
// outdated one (testenv.AgentImage; one build at a time across test processes).
func testImage(t testing.TB) string {
	t.Helper()
	eng := engine(t)
	imageOnce.Do(func() {
		l := &containerLauncher{engine: eng, helper: helperBin, logger: slog.Default()}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, imageOnce.err = l.ping(ctx)
	})
	if imageOnce.err != nil {
		testenv.Missing(t, "agent image: %v", imageOnce.err)
	}
	return testenv.AgentImage(t, eng, repoRoot)
}

// requireBackend makes sure the backend's real dependencies are there (fails under CI=true).
func requireBackend(t testing.TB, typ string) {
	t.Helper()
	switch typ {
	case api.BackendBwrap:
		testenv.LookPath(t, "bwrap")
	case api.BackendContainer:
		// The unprivileged re-run reaches the engine as a deployment's gateway user does, through
		// the socket's group (build/scripts/services.sh): an engine it cannot use is missing too.
		testImage(t)
	}
}

// newTestManager returns a Manager over a fresh data dir; it is closed at cleanup.
func newTestManager(t testing.TB, mod func(*Config)) (*Manager, Config) {
	t.Helper()
	cfg := Config{
		DataDir:     t.TempDir(),
		HelperPath:  helperBin,
		IdleTimeout: time.Minute,
		Logger:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if e := os.Getenv("PORTHOLE_TEST_ENGINE"); e != "" {
		cfg.ContainerEngine = e
		cfg.DefaultImage = os.Getenv("PORTHOLE_TEST_IMAGE")
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return m, cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agent returns an api.Agent of the given backend.
func agent(id, typ, network string, lim api.Limits) api.Agent {
	return api.Agent{ID: id, Name: id, Backend: api.Backend{Type: typ, Network: network, Limits: lim}}
}

// sh runs a shell script in the agent through Exec and fails the test on a transport error.
func sh(t testing.TB, m *Manager, a api.Agent, script string) api.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", script}, TimeoutS: 60})
	if err != nil {
		t.Fatalf("exec %q in %s (%s): %v", script, a.ID, a.Backend.Type, err)
	}
	return res
}
