//go:build !js

package terminal

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/internal/testenv"
)

// backendOpen returns the OpenFunc the integration tests run against: a real bwrap
// jail through bridges.Manager (TERMINAL_TEST_BACKEND=pty: an in-process helper, for
// quick iterations only).
func backendOpen(t *testing.T) OpenFunc {
	if os.Getenv("TERMINAL_TEST_BACKEND") == "pty" {
		// The in-process helper's shells run as this process: give them an empty home so
		// that they neither read the developer's profile nor write its history.
		t.Setenv("HOME", t.TempDir())
		return newInProcessHelper(t).Open
	}
	return newJail(t).Open
}

// jail runs agents' helpers in bubblewrap jails through a real bridges.Manager.
type jail struct {
	mgr     *bridges.Manager
	dataDir string
}

func newJail(t testing.TB) *jail {
	bwrap := testenv.LookPath(t, "bwrap")
	dataDir := t.TempDir()
	mgr, err := bridges.NewManager(bridges.Config{
		DataDir:    dataDir,
		HelperPath: helperBin(t),
		BwrapPath:  bwrap,
		Logger:     testLogger(t),
	})
	if err != nil {
		t.Fatalf("bridges.NewManager: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })
	return &jail{mgr: mgr, dataDir: dataDir}
}

func (j *jail) Open(ctx context.Context, agent api.Agent) (net.Conn, error) {
	if agent.Backend.Type == "" {
		agent.Backend = api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}
	}
	c, err := j.mgr.Conn(ctx, agent)
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, bridges.StreamTerminal)
}
