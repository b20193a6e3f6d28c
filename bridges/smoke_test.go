package bridges

import (
	"testing"

	"github.com/porthole/porthole/api"
)

func TestSmokeBwrap(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, _ := newTestManager(t, nil)
	a := agent("smoke", api.BackendBwrap, api.NetworkNone, api.Limits{})
	res := sh(t, m, a, "id; echo $HOME; pwd; env; ls /; ps -ef; cat /proc/self/cgroup | head -3")
	t.Logf("%+v", res)
	t.Log(m.Probe(t.Context()))
}
