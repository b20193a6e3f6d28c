//go:build !js

package terminal

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// helperBin returns a porthole binary, built once per test binary run (on first use, so
// that unit tests and fuzz workers do not pay for it): the helper the bwrap jails run.
func helperBin(t testing.TB) string {
	helper.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		dir, err := os.MkdirTemp("", "porthole-terminal-test-")
		if err != nil {
			helper.err = err
			return
		}
		os.Chmod(dir, 0o755)
		helper.dir = dir
		helper.path = filepath.Join(dir, "porthole")
		cmd := exec.Command("go", "build", "-o", helper.path, "./cmd/porthole")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helper.err = fmt.Errorf("build porthole: %v\n%s", err, out)
		}
	})
	if helper.err != nil {
		t.Fatal(helper.err)
	}
	return helper.path
}

var helper struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	code := m.Run()
	if helper.dir != "" {
		os.RemoveAll(helper.dir)
	}
	if benchFilePath != "" {
		os.RemoveAll(filepath.Dir(benchFilePath))
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			return 1
		}
	}
	return code
}
