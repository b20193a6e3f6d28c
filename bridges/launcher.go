package bridges

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/sys/unix"
)

// Launcher starts an agent's helper inside one kind of isolation backend. It is the only way a
// process of an agent is started: the helper is the one thing a backend runs, and every shell,
// X server, browser and exec'd command is started by the helper inside.
type Launcher interface {
	// Backend is the api.Backend* type this launcher serves.
	Backend() string
	// Probe checks that the backend can start a sandbox now; Detail names the cause or what is in force.
	Probe(ctx context.Context) ProbeResult
	// Launch starts the agent's helper; errors that mean the backend cannot run wrap ErrBackendUnavailable.
	Launch(ctx context.Context, spec AgentSpec) (*Process, error)
	// Forget releases the agent's per-backend state (its container, its cgroups).
	Forget(ctx context.Context, agentID string) error
	// Close releases the launcher's own resources (engine client).
	Close() error
}

// Compile-time guards: each backend is a Launcher.
var (
	_ Launcher = (*bwrapLauncher)(nil)
	_ Launcher = (*containerLauncher)(nil)
	_ Launcher = (*hostLauncher)(nil)
)

// AgentSpec is what a launcher needs to know about an agent.
type AgentSpec struct {
	ID      string
	Home    string // host path of the agent's home (created 0700 by the Manager)
	Backend api.Backend
	Limits  api.Limits // resolved: zero fields replaced by the server's defaults
	// BrowserProfile is the host directory of a person's browser profile lent to the agent,
	// bound read-write at ProfileMountPath ("" = none; profile.go).
	BrowserProfile string
}

// Process is one launched helper: the pipe carrying its session and how to end it.
type Process struct {
	Pipe io.ReadWriteCloser
	// Desc says what runs, for logs and errors (e.g. "bwrap pid 123", "container porthole-x exec").
	Desc   string
	stderr *tailBuffer
	done   chan struct{}
	err    error
	kill   func()
}

// Done is closed when the helper process has exited (or its stream to the engine ended).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is why the process ended; valid after Done.
func (p *Process) Err() error { return p.err }

// Kill ends the helper and everything it started.
func (p *Process) Kill() { p.kill() }

// Stderr returns the last few KiB the helper (or the launcher, e.g. bwrap) wrote to stderr.
func (p *Process) Stderr() string { return p.stderr.String() }

// startCmd starts cmd with its stdin/stdout as the session pipe and its stderr captured.
// kill is how to end it (e.g. the process group); nil = SIGKILL the process.
func startCmd(cmd *exec.Cmd, desc string, kill func(pid int)) (*Process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	growPipe(inW)
	growPipe(outR)
	p := &Process{stderr: newTailBuffer(8 << 10), done: make(chan struct{})}
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	inR.Close()
	outW.Close()
	pid := cmd.Process.Pid
	p.Desc = fmt.Sprintf("%s pid %d", desc, pid)
	p.Pipe = &stdioConn{r: outR, w: inW}
	var once sync.Once
	p.kill = func() {
		once.Do(func() {
			if kill != nil {
				kill(pid)
			} else {
				cmd.Process.Kill()
			}
		})
	}
	go func() { // owner: the Process; exits when the helper exits
		err := cmd.Wait()
		if err == nil {
			err = errors.New("helper exited")
		} else {
			err = fmt.Errorf("helper: %w", err)
		}
		if s := strings.TrimSpace(p.stderr.String()); s != "" {
			err = fmt.Errorf("%w; stderr: %s", err, lastLines(s, 5))
		}
		p.err = err
		p.Pipe.Close()
		close(p.done)
	}()
	return p, nil
}

// sessionPipeSize is the capacity asked for the session's pipes (the default is 64 KiB, less
// than one full terminal Output frame plus its yamux header).
const sessionPipeSize = 1 << 20

// growPipe raises a pipe's capacity to sessionPipeSize, best effort: the kernel caps it at
// /proc/sys/fs/pipe-max-size and at the user's pipe quota, and the default still works.
func growPipe(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, sessionPipeSize) })
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// agentIDRe is what an agent id may look like wherever it becomes a path or a container name.
var agentIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ErrBadAgentID is an agent id that cannot safely name a directory, cgroup or container.
var ErrBadAgentID = errors.New("agent id must be 1-64 of [A-Za-z0-9_-]")

func checkAgentID(id string) error {
	if !agentIDRe.MatchString(id) {
		return fmt.Errorf("agent id %q: %w", id, ErrBadAgentID)
	}
	return nil
}

// sandboxEnv is the whole environment a sandboxed helper gets (nothing of the gateway's).
func sandboxEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"USER=agent",
		"LOGNAME=agent",
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
		"LANG=C.UTF-8",
		"TERM=xterm-256color",
		"TMPDIR=/tmp",
		"SHELL=/bin/bash",
	}
}

// unavailable wraps cause as ErrBackendUnavailable for backend b.
func unavailable(b string, format string, args ...any) error {
	return fmt.Errorf("%s backend: %s: %w", b, fmt.Sprintf(format, args...), ErrBackendUnavailable)
}

// killGroup SIGKILLs a process group.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }
