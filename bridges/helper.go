package bridges

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/porthole/porthole/surface"
)

// Handler serves one stream of a kind inside the helper; it owns the stream and closes it.
// Its ctx carries the session's surface.Lifetime.
type Handler = surface.Handler

// HelperPathInJail is where every backend mounts the helper binary (read-only) inside the sandbox.
const HelperPathInJail = "/opt/porthole/porthole"

// helperProcs is the helper's GOMAXPROCS. The helper only moves bytes between pipes, PTYs
// and sockets; with more than one P every goroutine hand-off (PTY reader → sender → yamux
// send loop) wakes a second thread that spins through the netpoller and sleeps again. One P
// cut the helper's CPU per MB of terminal output by ~35% (BenchmarkPortholeWS/jail).
const helperProcs = 1

// RunHelper is `porthole helper [mode] [flags]`, dispatched by its first argument:
//
//	(none)       serve one yamux session over stdin/stdout with the given handlers (inside the sandbox)
//	init         a container's pid 1: reap children, exit on SIGTERM
//
// Serving flags: --rlimit-nproc N, --rlimit-data BYTES and --rlimit-fsize BYTES lower the helper's own limits (inherited by
// everything it starts) when the gateway cannot use cgroups; --kill-all-on-exit kills every process of
// the sandbox's pid namespace when the session ends (containers, whose pid 1 outlives the helper);
// --seccomp installs the jail's seccomp filter on the helper itself (containers: the engine's profile is laxer).
func RunHelper(ctx context.Context, args []string, handlers map[string]Handler) error {
	// Not dumpable: the agent runs as the helper's uid, and must neither ptrace it nor read its
	// /proc/<pid>/mem, environ or fds (the session pipe). Children get dumpable back at exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("helper: PR_SET_DUMPABLE: %w", err)
	}
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return containerInit(ctx)
		}
	}
	fs := flag.NewFlagSet("helper", flag.ContinueOnError)
	nproc := fs.Int("rlimit-nproc", 0, "RLIMIT_NPROC for the sandbox (0 = unchanged)")
	data := fs.Int64("rlimit-data", 0, "RLIMIT_DATA bytes per process (0 = unchanged)")
	fsize := fs.Int64("rlimit-fsize", 0, "RLIMIT_FSIZE bytes: the largest file a process may write (0 = unchanged)")
	killAll := fs.Bool("kill-all-on-exit", false, "kill every process of the pid namespace when the session ends")
	filter := fs.Bool("seccomp", false, "install the jail's seccomp filter on the helper itself (backends that cannot pass one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *filter {
		if err := installSeccomp(); err != nil {
			return fmt.Errorf("helper: %w", err)
		}
	}
	runtime.GOMAXPROCS(helperProcs)
	// Threads first, while the sandbox has pids to spare: under a fork bomb the Go runtime could
	// not create one later and would abort the helper (and end every terminal of the agent).
	reserveThreads(helperThreadReserve)
	limits, err := applyRlimits(*nproc, *data, *fsize)
	if err != nil {
		return err
	}
	// Take the session's stdio away from fd 0/1 so that nothing the helper starts, and no stray
	// print, can write into the multiplexed stream.
	in, out, err := detachStdio()
	if err != nil {
		return err
	}
	rw := &stdioConn{r: in, w: out}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("helper_pid", os.Getpid())
	err = ServeHelper(ctx, rw, handlers, limits, logger)
	if *killAll {
		killNamespace()
	}
	return err
}

// ServeHelper serves one yamux session on rw until it closes or ctx ends: the version handshake,
// then one goroutine per stream, dispatched by its header to handlers. Handlers share one
// surface.Lifetime (in their ctx), closed once the session has ended and every handler has
// returned. It returns nil when the gateway closed the session.
func ServeHelper(ctx context.Context, rw io.ReadWriteCloser, handlers map[string]Handler, limits string, logger *slog.Logger) error {
	sess, err := yamux.Server(rw, yamuxConfig())
	if err != nil {
		return fmt.Errorf("helper: yamux: %w", err)
	}
	life := surface.NewLifetime()
	defer life.Close() // after the handlers (wg.Wait below runs first)
	ctx, cancel := context.WithCancelCause(surface.WithLifetime(ctx, life))
	defer cancel(errors.New("helper: session ended"))
	go func() { // owner: ServeHelper; exits when the session closes or ctx ends
		select {
		case <-sess.CloseChan():
		case <-ctx.Done():
		}
		cancel(errors.New("helper: session closed"))
		sess.Close()
	}()

	// The first stream must be the handshake.
	hs, err := sess.AcceptStream()
	if err != nil {
		return fmt.Errorf("helper: accept hello: %w", err)
	}
	hs.SetDeadline(time.Now().Add(30 * time.Second))
	var hdr StreamHeader
	var hello Hello
	if err := ReadFrame(hs, &hdr); err != nil || hdr.Kind != streamHello {
		hs.Close()
		return fmt.Errorf("helper: first stream is %q, want %q (%v)", hdr.Kind, streamHello, err)
	}
	if err := ReadFrame(hs, &hello); err != nil {
		hs.Close()
		return fmt.Errorf("helper: hello: %w", err)
	}
	reply := Hello{Proto: ProtoVersion, PID: os.Getpid(), UID: os.Getuid(), Limits: limits}
	if hello.Proto != ProtoVersion {
		reply.Error = fmt.Sprintf("helper speaks protocol %d, gateway %d", ProtoVersion, hello.Proto)
	}
	if err := WriteFrame(hs, reply); err != nil {
		return fmt.Errorf("helper: hello reply: %w", err)
	}
	hs.Close()
	if reply.Error != "" {
		sess.Close()
		return fmt.Errorf("%s: %w", reply.Error, ErrHelperVersion)
	}

	var wg sync.WaitGroup
	defer func() { // the session is over: handlers end with ctx, then the Lifetime closes
		cancel(errors.New("helper: session ended"))
		wg.Wait()
	}()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			if sess.IsClosed() || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("helper: accept: %w", err)
		}
		wg.Add(1)
		go func() { // owner: ServeHelper (wg); exits when the handler returns
			defer wg.Done()
			st.SetReadDeadline(time.Now().Add(30 * time.Second))
			var h StreamHeader
			if err := ReadFrame(st, &h); err != nil {
				logger.Warn("stream header", "err", err)
				st.Close()
				return
			}
			st.SetReadDeadline(time.Time{})
			fn := handlers[h.Kind]
			if fn == nil {
				logger.Warn("unknown stream kind", "kind", h.Kind)
				st.Close()
				return
			}
			defer func() {
				if r := recover(); r != nil {
					logger.Error("stream handler panicked", "kind", h.Kind, "panic", r)
					st.Close()
				}
			}()
			fn(ctx, st)
		}()
	}
}

// helperThreadReserve is how many OS threads the helper creates at start and keeps idle. Each
// running command holds one in its wait, each start one in fork; the runtime reuses idle
// threads before it asks the kernel for a new one, which fails once the agent's processes
// took every pid of its limit. Threads count against the agent's pid limit too: 16 is the
// gateway's default cap of concurrent execs per agent, and a small part of a 64-pid agent.
const helperThreadReserve = 16

// reserveThreads makes the runtime create n OS threads now and park them in its idle pool:
// n goroutines each lock a thread of their own, wait until all are locked, then unlock and
// end, which returns their threads to the pool (the runtime never frees idle threads).
func reserveThreads(n int) {
	var locked, ended sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	ended.Add(n)
	for range n {
		go func() { // owner: reserveThreads, which waits for it
			defer ended.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	ended.Wait()
}

// stdioConn is the session's pipe pair as one ReadWriteCloser.
type stdioConn struct {
	r *os.File
	w *os.File
}

func (c *stdioConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *stdioConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *stdioConn) Close() error {
	err1 := c.r.Close()
	err2 := c.w.Close()
	return errors.Join(err1, err2)
}

// detachStdio moves the session off fd 0 and 1 (to close-on-exec fds) and points 0 and 1 at /dev/null.
func detachStdio() (in, out *os.File, err error) {
	inFD, err := syscall.Dup(0)
	if err != nil {
		return nil, nil, fmt.Errorf("helper: dup stdin: %w", err)
	}
	outFD, err := syscall.Dup(1)
	if err != nil {
		return nil, nil, fmt.Errorf("helper: dup stdout: %w", err)
	}
	syscall.CloseOnExec(inFD)
	syscall.CloseOnExec(outFD)
	// Non-blocking, so that os.NewFile puts them in Go's netpoller: the yamux receive loop
	// then waits there instead of in a blocking read(2) whose thread the scheduler keeps
	// retaking and handing back (which also kept sysmon polling every 20 µs).
	if err := syscall.SetNonblock(inFD, true); err != nil {
		return nil, nil, fmt.Errorf("helper: stdin non-blocking: %w", err)
	}
	if err := syscall.SetNonblock(outFD, true); err != nil {
		return nil, nil, fmt.Errorf("helper: stdout non-blocking: %w", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("helper: open %s: %w", os.DevNull, err)
	}
	defer null.Close()
	if err := syscall.Dup3(int(null.Fd()), 0, 0); err != nil {
		return nil, nil, fmt.Errorf("helper: redirect stdin: %w", err)
	}
	if err := syscall.Dup3(int(null.Fd()), 1, 0); err != nil {
		return nil, nil, fmt.Errorf("helper: redirect stdout: %w", err)
	}
	return os.NewFile(uintptr(inFD), "session-in"), os.NewFile(uintptr(outFD), "session-out"), nil
}

// applyRlimits lowers the helper's own limits (soft and hard) so everything it starts inherits them.
// RLIMIT_NPROC is counted per user namespace, so it bounds this sandbox only.
func applyRlimits(nproc int, data, fsize int64) (string, error) {
	var done []string
	if nproc > 0 {
		l := syscall.Rlimit{Cur: uint64(nproc), Max: uint64(nproc)}
		if err := syscall.Setrlimit(unix.RLIMIT_NPROC, &l); err != nil {
			return "", fmt.Errorf("helper: setrlimit nproc=%d: %w", nproc, err)
		}
		done = append(done, fmt.Sprintf("nproc=%d", nproc))
	}
	if data > 0 {
		l := syscall.Rlimit{Cur: uint64(data), Max: uint64(data)}
		if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &l); err != nil {
			return "", fmt.Errorf("helper: setrlimit data=%d: %w", data, err)
		}
		done = append(done, fmt.Sprintf("data=%dMiB", data>>20))
	}
	if fsize > 0 {
		l := syscall.Rlimit{Cur: uint64(fsize), Max: uint64(fsize)}
		if err := syscall.Setrlimit(unix.RLIMIT_FSIZE, &l); err != nil {
			return "", fmt.Errorf("helper: setrlimit fsize=%d: %w", fsize, err)
		}
		done = append(done, fmt.Sprintf("fsize=%dMiB", fsize>>20))
	}
	return strings.Join(done, " "), nil
}

// killNamespace kills every other process of the helper's pid namespace, but only inside a
// container started by the container backend (pid 1 is `porthole helper init`): kill(-1) on the
// host would hit every process of the user.
func killNamespace() {
	b, err := os.ReadFile("/proc/1/cmdline")
	if err != nil || !strings.HasPrefix(string(b), HelperPathInJail+"\x00helper\x00init") {
		return
	}
	syscall.Kill(-1, syscall.SIGKILL)
}

// containerInit is a container's pid 1: it reaps orphans and exits on SIGTERM/SIGINT.
func containerInit(ctx context.Context) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sigs:
			if s != syscall.SIGCHLD {
				syscall.Kill(-1, syscall.SIGKILL)
				return nil
			}
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
