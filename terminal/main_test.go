package terminal

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// helperBin is a porthole binary built once by TestMain: the helper the bwrap jails run.
var helperBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	dir, err := os.MkdirTemp("", "porthole-terminal-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	helperBin = filepath.Join(dir, "porthole")
	cmd := exec.Command("go", "build", "-o", helperBin, "./cmd/porthole")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build porthole: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
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
