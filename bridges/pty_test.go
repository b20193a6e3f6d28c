package bridges

import (
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
)

// TestPTYInsideSandbox: the terminal surface allocates PTYs inside the sandbox's own devpts; a
// shell there gets a controlling terminal and job control although the helper runs --new-session.
func TestPTYInsideSandbox(t *testing.T) {
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(typ, func(t *testing.T) {
			requireBackend(t, typ)
			m, _ := newTestManager(t, nil)
			res := sh(t, m, agent("pty1", typ, api.NetworkNone, api.Limits{}),
				`script -qec 'tty; bash -ic "sleep 0.1 & jobs; wait" 2>/dev/null' /dev/null; ls /dev/pts`)
			if !strings.Contains(res.Stdout, "/dev/pts/0") || !strings.Contains(res.Stdout, "Running") || !strings.Contains(res.Stdout, "ptmx") {
				t.Errorf("PTY in %s: %+v", typ, res)
			}
		})
	}
}
