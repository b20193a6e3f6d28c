//go:build linux

// Package sandboxproc is the helper's one way to start a process inside an agent's sandbox
// (exec, terminal shells, and later the desktop's X server, window manager and browser).
//
// Every process is started under a per-process reaper: the helper's own binary re-executed
// (/proc/self/exe with ReapArg as argv[1], caught by this package's init) that makes itself a
// child subreaper (PR_SET_CHILD_SUBREAPER), raises oom_score_adj to OOMScoreAdj so that memory
// pressure kills agent processes before the helper, starts the command in its own process
// group with the allowlisted environment, reaps everything that is reparented to it, and when
// the command exits or it gets SIGTERM, SIGKILLs every remaining descendant until none is left.
// Descendants that left the process group or the session (setsid, double fork) are still its
// descendants, so they go too; only a process the agent deliberately reparents by killing the
// reaper escapes, and the agent owns the jail anyway.
//
// Why a reaper process and not the helper as the subreaper: orphans of a subreaper become its
// children, and reaping them needs wait4(-1), which would steal the exit statuses os/exec
// waits for (and the helper runs many commands at once). Why not a pid namespace or cgroup per
// command: inside the jail the helper has no capabilities, so it can create neither. The cost is
// one more exec of the helper's binary per command (measured by BenchmarkExecRoundTrip): in a
// cgo build (the real binary) the reaper is C code that runs before the Go runtime starts
// (reap/reap_cgo.c), in a CGO_ENABLED=0 build it is Go (reap/reap.go); both behave the same
// (sandboxproc_test.go runs every case on both).
//
// The package must not be imported by the WASM app (it is linux-only).
package sandboxproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/porthole/porthole/internal/sandboxproc/reap"
)

// ReapArg is argv[1] of the reaper process (package reap, which takes the process over in its init).
const ReapArg = reap.Arg

// OOMScoreAdj is the oom_score_adj every started process gets (the helper keeps its own, 0).
const OOMScoreAdj = reap.OOMScoreAdj

// killGrace is how long Kill waits for the reaper to kill the tree before it SIGKILLs the
// reaper and both process groups itself.
const killGrace = 2 * time.Second

// Sentinel errors.
var (
	// ErrProcessLimit: the sandbox is at its process or thread limit (fork failed with EAGAIN).
	ErrProcessLimit = errors.New("the agent is at its process limit: no new process can be started now")
	// ErrStart: the command could not be started (not found, not executable, bad directory).
	ErrStart = errors.New("cannot start the command")
)

// envAllow are the variables a started process may inherit from the helper (whose own
// environment the backend already set to the sandbox's, see bridges.sandboxEnv).
var envAllow = []string{"HOME", "USER", "LOGNAME", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "SHELL", "TZ", "DISPLAY"}

// AgentDisplay is the X display of the agent's desktop inside its sandbox (the desktop
// surface starts Xvfb on it on first use). Every started process sees DISPLAY set to it
// unless the helper's environment says otherwise, whether or not the display runs yet: an
// X program started from a terminal appears on the desktop once it is open.
const AgentDisplay = ":0"

// Env returns the allowlisted part of the helper's environment with set (KEY=VALUE) applied
// on top (replacing any variable of the same name), and DISPLAY=AgentDisplay by default.
func Env(set ...string) []string {
	override := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		override[k] = true
	}
	var env []string
	for _, k := range envAllow {
		if v, ok := os.LookupEnv(k); ok && !override[k] {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("DISPLAY"); !ok && !override["DISPLAY"] {
		env = append(env, "DISPLAY="+AgentDisplay)
	}
	return append(env, set...)
}

// Spec is one process to start.
type Spec struct {
	Path string   // absolute path of the program (resolved by the caller)
	Args []string // argv, Args[0] included
	Dir  string   // working directory ("" = the helper's)
	Env  []string // whole environment (see Env)
	// Stdin may be any reader (copied through a pipe) or an *os.File (passed as it is).
	Stdin          io.Reader
	Stdout, Stderr *os.File
	// Ctty: Stdin is a terminal; the reaper leads a new session with it as the controlling
	// terminal and the command is the terminal's foreground process group.
	Ctty bool
	// WaitDelay bounds how long Wait waits for the stdin copy after the process exited.
	WaitDelay time.Duration
}

// Process is a started command and its reaper.
type Process struct {
	// Pid is the command's pid (and its process group id).
	Pid    int
	reaper *exec.Cmd
	done   chan struct{}
	code   int
	err    error
	once   sync.Once
}

// Start starts s under a reaper. A command that cannot start returns an error wrapping
// ErrStart or ErrProcessLimit, with the reason.
func Start(s Spec) (*Process, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	defer statusR.Close()
	ctty := "-"
	if s.Ctty {
		ctty = "ctty"
	}
	args := append([]string{"porthole-reap", ReapArg, ctty, s.Path}, s.Args...)
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       args,
		Dir:        s.Dir,
		Env:        s.Env,
		Stdin:      s.Stdin,
		Stdout:     s.Stdout,
		Stderr:     s.Stderr,
		ExtraFiles: []*os.File{statusW},
		WaitDelay:  s.WaitDelay,
	}
	if s.Ctty {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		return nil, startError(s.Args[0], err)
	}
	p := &Process{reaper: cmd, done: make(chan struct{})}
	// The reaper writes one line: "pid N" once the command runs, or "err CODE MESSAGE".
	line, _ := bufio.NewReader(statusR).ReadString('\n')
	line = strings.TrimSpace(line)
	if pid, ok := strings.CutPrefix(line, "pid "); ok {
		p.Pid, _ = strconv.Atoi(pid) // before wait, which reads it
	}
	go p.wait() // owner: the Process; exits when the reaper exits
	switch {
	case strings.HasPrefix(line, "pid "):
		return p, nil
	case strings.HasPrefix(line, "err "):
		<-p.done
		_, msg, _ := strings.Cut(line[4:], " ")
		if strings.Contains(msg, syscall.EAGAIN.Error()) {
			return nil, fmt.Errorf("%s: %s: %w", s.Args[0], msg, ErrProcessLimit)
		}
		return nil, fmt.Errorf("%s: %s: %w", s.Args[0], msg, ErrStart)
	default:
		// The reaper died before it could start anything: most likely the Go runtime could
		// not create its threads (the sandbox is at its pid limit).
		<-p.done
		return nil, fmt.Errorf("%s: the process reaper exited early (%v): %w", s.Args[0], p.err, ErrProcessLimit)
	}
}

func startError(name string, err error) error {
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("%s: %v: %w", name, err, ErrProcessLimit)
	}
	return fmt.Errorf("%s: %v: %w", name, err, ErrStart)
}

func (p *Process) wait() {
	err := p.reaper.Wait()
	p.code = ExitCode(p.reaper.ProcessState, err)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			p.err = err
		}
	}
	if ps := p.reaper.ProcessState; ps != nil && p.Pid > 0 && ps.Sys().(syscall.WaitStatus).Signaled() {
		// The reaper was killed before it could kill the tree: at least the command's group goes.
		syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	close(p.done)
}

// Done is closed when the reaper (and so the command's whole tree) has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the command and its whole tree, and returns the command's exit code: its
// exit status, or 128+signal when a signal killed it. err is set only when waiting itself
// failed (e.g. the stdin copy did not finish within WaitDelay).
func (p *Process) Wait() (code int, err error) {
	<-p.done
	return p.code, p.err
}

// Signal sends sig to the command's process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}

// Kill ends the command and every process it started (its whole tree, setsid escapes
// included); it does not wait. Safe to call more than once and after exit.
func (p *Process) Kill() {
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		p.reaper.Process.Signal(syscall.SIGTERM)
		go func() { // owner: the Process; ends at the reaper's exit or after the grace
			t := time.NewTimer(killGrace)
			defer t.Stop()
			select {
			case <-p.done:
			case <-t.C:
				pid := p.reaper.Process.Pid
				syscall.Kill(-pid, syscall.SIGKILL)
				syscall.Kill(pid, syscall.SIGKILL)
				syscall.Kill(-p.Pid, syscall.SIGKILL)
			}
		}()
	})
}

// ExitCode follows the shell's convention: the exit status, or 128+signal.
func ExitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 126
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
