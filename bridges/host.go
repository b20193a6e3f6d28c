package bridges

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/porthole/porthole/api"
)

// hostLauncher runs the helper as a plain subprocess of the gateway: NOT isolated. It exists only
// when the server was started with --allow-host-backend. The helper still gets a scrubbed
// environment and the agent's home as its working directory and HOME.
type hostLauncher struct {
	helper string
}

func (l *hostLauncher) Backend() string { return api.BackendHost }
func (l *hostLauncher) Close() error    { return nil }

func (l *hostLauncher) Probe(ctx context.Context) ProbeResult {
	r := ProbeResult{Backend: api.BackendHost}
	if _, err := os.Stat(l.helper); err != nil {
		r.Detail = unavailable(api.BackendHost, "helper binary: %v", err).Error()
		return r
	}
	r.OK = true
	r.Detail = "allowed; NOT isolated (runs as the gateway's user)"
	return r
}

func (l *hostLauncher) Launch(ctx context.Context, spec AgentSpec) (*Process, error) {
	cmd := &exec.Cmd{
		Path: l.helper,
		Args: []string{l.helper, "helper"},
		Env:  sandboxEnv(spec.Home),
		Dir:  spec.Home,
		// Own process group (killed as a whole), and it dies with the gateway.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	p, err := startCmd(cmd, "host helper", killGroup)
	if err != nil {
		return nil, fmt.Errorf("host backend: start helper: %w", err)
	}
	return p, nil
}

func (l *hostLauncher) Forget(ctx context.Context, agentID string) error { return nil }
