package bridges

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/sandboxproc"
)

// Exec limits.
const (
	// MaxExecOutput caps stdout and stderr each; beyond it the output is cut and marked truncated.
	MaxExecOutput = 1 << 20
	// MaxExecStdin caps the stdin a request may carry.
	MaxExecStdin = 4 << 20
	// DefaultExecTimeout applies when a request names none; MaxExecTimeout is the most it may ask.
	DefaultExecTimeout = 30 * time.Second
	MaxExecTimeout     = time.Hour
)

// ErrInvalidExec is a malformed exec request (empty command, stdin too large); the gateway answers 400.
var ErrInvalidExec = errors.New("invalid exec request")

// ValidateExec checks req and returns its effective timeout.
func ValidateExec(req api.ExecRequest) (time.Duration, error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return 0, fmt.Errorf("command is empty: %w", ErrInvalidExec)
	}
	if len(req.Stdin) > MaxExecStdin {
		return 0, fmt.Errorf("stdin is %d bytes, at most %d: %w", len(req.Stdin), MaxExecStdin, ErrInvalidExec)
	}
	if req.TimeoutS < 0 {
		return 0, fmt.Errorf("timeout_s %d is negative: %w", req.TimeoutS, ErrInvalidExec)
	}
	d := DefaultExecTimeout
	if req.TimeoutS > 0 {
		d = time.Duration(req.TimeoutS) * time.Second
	}
	return min(d, MaxExecTimeout), nil
}

// ExecOverStream runs req through an exec stream already opened to a helper (header sent by Conn.Open).
// Closing the stream early (ctx ended) kills the command's process group in the helper.
func ExecOverStream(ctx context.Context, st net.Conn, req api.ExecRequest) (api.ExecResult, error) {
	defer st.Close()
	if _, err := ValidateExec(req); err != nil {
		return api.ExecResult{}, err
	}
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Now()) })
	defer stop()
	if err := WriteFrame(st, req); err != nil {
		return api.ExecResult{}, fmt.Errorf("exec: send request: %w", err)
	}
	var res api.ExecResult
	if err := ReadFrame(st, &res); err != nil {
		if ctx.Err() != nil {
			return api.ExecResult{}, fmt.Errorf("exec: %w", context.Cause(ctx))
		}
		return api.ExecResult{}, fmt.Errorf("exec: read result: %w", err)
	}
	// The helper caps its output, but it shares the jail with the agent: cap it again here.
	if len(res.Stdout) > MaxExecOutput {
		res.Stdout, res.StdoutTruncated = res.Stdout[:MaxExecOutput], true
	}
	if len(res.Stderr) > MaxExecOutput {
		res.Stderr, res.StderrTruncated = res.Stderr[:MaxExecOutput], true
	}
	return res, nil
}

// ServeExecStream is the helper's handler of StreamExec: one request, one result. The command runs
// in its own process group in the helper's cwd (the agent's home) with the helper's environment;
// when it exits, times out, or the gateway closes the stream, the whole group is killed.
func ServeExecStream(ctx context.Context, st net.Conn) {
	defer st.Close()
	var req api.ExecRequest
	st.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := ReadFrame(st, &req); err != nil {
		return
	}
	st.SetReadDeadline(time.Time{})
	res := runExec(ctx, st, req)
	WriteFrame(st, res)
}

func runExec(ctx context.Context, st net.Conn, req api.ExecRequest) api.ExecResult {
	timeout, err := ValidateExec(req)
	if err != nil {
		return api.ExecResult{ExitCode: 126, Stderr: "porthole: " + err.Error() + "\n"}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() { // owner: runExec; exits when the gateway closes its side or the stream is closed
		var b [1]byte
		st.Read(b[:])
		cancel(errors.New("exec: gateway closed the stream"))
	}()

	path, err := exec.LookPath(req.Command[0])
	if err != nil {
		return api.ExecResult{ExitCode: 127, Stderr: fmt.Sprintf("porthole: %s: command not found\n", req.Command[0])}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return api.ExecResult{ExitCode: 126, Stderr: "porthole: pipe: " + err.Error() + "\n"}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return api.ExecResult{ExitCode: 126, Stderr: "porthole: pipe: " + err.Error() + "\n"}
	}
	proc, err := sandboxproc.Start(sandboxproc.Spec{
		Path:      path,
		Args:      req.Command,
		Env:       sandboxproc.Env(),
		Stdin:     strings.NewReader(req.Stdin),
		Stdout:    outW,
		Stderr:    errW,
		WaitDelay: time.Second, // a stdin nobody reads must not hold Wait
	})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return api.ExecResult{ExitCode: 126, Stderr: "porthole: " + err.Error() + "\n"}
	}
	type capture struct {
		data      []byte
		truncated bool
	}
	readCapped := func(f *os.File, ch chan<- capture) { // owner: runExec; exits at EOF or when the read deadline passes
		defer f.Close()
		var c capture
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				room := MaxExecOutput - len(c.data)
				if n > room {
					c.truncated = true
					n = max(room, 0)
				}
				c.data = append(c.data, buf[:n]...)
			}
			if err != nil {
				break
			}
		}
		ch <- c
	}
	outCh, errCh := make(chan capture, 1), make(chan capture, 1)
	go readCapped(outR, outCh)
	go readCapped(errR, errCh)

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	select {
	case <-proc.Done():
	case <-timer.C:
		timedOut = true
		proc.Kill()
	case <-ctx.Done():
		proc.Kill()
	}
	// The reaper kills whatever the command left running (setsid escapes included) before it
	// exits; then the pipes drain.
	code, _ := proc.Wait()
	outR.SetReadDeadline(time.Now().Add(2 * time.Second))
	errR.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, errOut := <-outCh, <-errCh

	res := api.ExecResult{
		Stdout:          string(out.data),
		Stderr:          string(errOut.data),
		StdoutTruncated: out.truncated,
		StderrTruncated: errOut.truncated,
		TimedOut:        timedOut,
	}
	res.ExitCode = code
	return res
}
