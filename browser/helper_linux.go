//go:build linux && !js

package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/porthole/porthole/browser/internal/cdpmux"
	"github.com/porthole/porthole/internal/sandboxproc"
	"github.com/porthole/porthole/surface"
)

// The helper half: the agent's Chromium, inside its sandbox, started on the first browser
// stream of a helper session (surface.Shared) with --remote-debugging-pipe: CDP over the
// process's fds 3 (to Chromium) and 4 (from Chromium), never a TCP port. A browser stream
// carries that pipe's NUL-delimited JSON messages both ways, unchanged (docs/browser-cdp.md):
// the gateway's multiplexer (cdp.go) gives each of its clients an id space and a browser
// session of its own. One stream is attached to the browser at a time: a new stream (the
// gateway reconnecting) takes the browser over and the previous stream is closed.
//
// When Chromium exits (crash, killed), the attached stream gets one last root-level message,
// {"method":"Porthole.browserExited","params":{"message":"…"}}, and is closed; the next
// stream starts Chromium again. Chromium is stopped when the helper session ends (the gateway
// closed it, or the helper's idle timeout), first with Browser.close so it writes its
// profile (cookies) to disk; the profile is kept.

const (
	// LentProfileDir is where a person's lent profile is mounted in the sandbox while it is
	// lent to this agent (the profiles feature binds it there, read-write, owned by the
	// sandbox's user). Contract: if this directory exists when Chromium starts, it is the
	// user data dir; otherwise the agent's own profile, ProfileSubdir of its home, is. Lending
	// or taking a profile back restarts the helper session (and so Chromium).
	LentProfileDir = "/run/porthole/browser-profile"
	// ProfileSubdir is the agent's own profile, under its home (/home/agent/.config/porthole-browser):
	// it persists across helper and sandbox restarts like the rest of the home.
	ProfileSubdir = ".config/porthole-browser"
	// helperMaxMessage bounds one message either way on the helper (larger ones are skipped);
	// the gateway's own bound (cdpmux.DefaultMaxMessage) is the one that protects the gateway.
	helperMaxMessage = 256 << 20
	// stopGrace is how long Browser.close may take before Chromium is signalled; the
	// gateway kills the helper 2 s after closing its session.
	stopGrace = 1200 * time.Millisecond
	// browserLogDir holds Chromium's stderr (the jail's private /tmp).
	browserLogDir = "/tmp/porthole-browser"
)

// The agent desktop's display (desktop.DisplayName, sandboxproc.AgentDisplay) and its socket:
// when the socket exists as Chromium starts, Chromium starts headed on it, so the desktop
// shows it too (a desktop started later shows it from the browser's next start). Vars for
// tests that run the helper on a host, whose display is not the agent's; lentProfileDir too.
var (
	agentDisplay   = sandboxproc.AgentDisplay
	agentX11Socket = "/tmp/.X11-unix/X0"
	lentProfileDir = LentProfileDir
)

// ErrNoBrowser is wrapped when Chromium cannot be started in the sandbox.
var ErrNoBrowser = errors.New("the browser could not start")

// ServeHelperStream serves one browser stream inside the agent's sandbox: it starts the
// session's Chromium on first use (or after it died) and carries its pipe until the stream,
// the browser or the session ends.
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	defer stream.Close()
	log := slog.Default().With("surface", "browser")
	sb, err := surface.Shared(ctx, browserKey{}, func() (*sessionBrowser, func(), error) {
		s := &sessionBrowser{log: log}
		return s, s.close, nil
	})
	if err != nil {
		return
	}
	c, err := sb.get(ctx)
	if err != nil {
		log.Warn("browser: cannot start", "err", err)
		writeExit(stream, err.Error())
		return
	}
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	defer stop()
	c.serve(stream)
}

type browserKey struct{}

// sessionBrowser is the helper session's browser slot.
type sessionBrowser struct {
	log    *slog.Logger
	mu     sync.Mutex
	cur    *chrome
	closed bool
}

func (s *sessionBrowser) get(ctx context.Context) (*chrome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, surface.ErrLifetimeEnded
	}
	if s.cur != nil {
		select {
		case <-s.cur.done:
			s.log.Warn("browser: Chromium had exited; starting it again", "why", s.cur.exitMsg)
			s.cur = nil
		default:
			return s.cur, nil
		}
	}
	c, err := startChrome(ctx, s.log)
	if err != nil {
		return nil, err
	}
	s.cur = c
	return c, nil
}

func (s *sessionBrowser) close() {
	s.mu.Lock()
	s.closed = true
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.stop()
	}
}

// chrome is one running Chromium and its pipe.
type chrome struct {
	log  *slog.Logger
	proc *sandboxproc.Process
	toB  *os.File // Chromium's fd 3
	wmu  sync.Mutex
	done chan struct{} // closed once Chromium exited and its output was drained
	// exitMsg says why it exited (set before done closes).
	exitMsg string

	smu    sync.Mutex
	stream net.Conn // the attached stream (nil = none)
}

// profileDir is the user data dir: the lent profile when one is mounted, else the agent's own.
func profileDir() string {
	if fi, err := os.Stat(lentProfileDir); err == nil && fi.IsDir() {
		return lentProfileDir
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/home/agent"
	}
	return filepath.Join(home, ProfileSubdir)
}

// chromiumPath finds the browser in the sandbox.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: Chromium is not installed in the sandbox (Debian package chromium)", ErrNoBrowser)
}

var noSandbox struct {
	once sync.Once
	need bool
}

// needNoSandbox reports whether Chromium's own sandbox cannot work here: as root, or where
// no user namespace can be created (a bwrap jail is started with --disable-userns and the
// jail's seccomp filter refuses new namespaces; containers usually refuse them too). The
// agent's sandbox is then the browser's sandbox.
func needNoSandbox() bool {
	noSandbox.once.Do(func() {
		if os.Geteuid() == 0 {
			noSandbox.need = true
			return
		}
		// A probe: can this process start a child in a new user namespace?
		probe, err := exec.LookPath("true")
		if err != nil {
			noSandbox.need = true
			return
		}
		cmd := exec.Command(probe)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		if err := cmd.Start(); err != nil {
			noSandbox.need = true
			return
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return noSandbox.need
}

// chromeArgs are Chromium's arguments for a profile.
func chromeArgs(profile string, headed bool) []string {
	args := []string{
		"--remote-debugging-pipe",
		"--user-data-dir=" + profile,
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-dev-shm-usage", // a container's /dev/shm is 64 MB by default
		"--password-store=basic",  // no keyring in the sandbox
		"--disable-breakpad",
		"--disable-background-networking",
		"--disable-features=Translate,MediaRouter,DialMediaRouteProvider",
	}
	if !headed {
		args = append(args, "--headless=new")
	}
	if needNoSandbox() {
		args = append(args, "--no-sandbox")
	}
	return append(args, "about:blank")
}

// startChrome starts Chromium with its pipe on fds 3 and 4. sandboxproc passes a command
// only fds 0–2, so a shell moves the pipe's ends from stdin/stdout to 3/4 and execs Chromium.
func startChrome(ctx context.Context, log *slog.Logger) (*chrome, error) {
	path, err := chromiumPath()
	if err != nil {
		return nil, err
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("%w: no sh in the sandbox: %v", ErrNoBrowser, err)
	}
	profile := profileDir()
	if err := os.MkdirAll(profile, 0o700); err != nil {
		return nil, fmt.Errorf("%w: profile %s: %v", ErrNoBrowser, profile, err)
	}
	// A Chromium killed with the helper leaves its singleton lock naming a pid of a pid
	// namespace that is gone (and may be reused): it would refuse the profile as in use.
	for _, f := range []string{"SingletonLock", "SingletonSocket", "SingletonCookie"} {
		os.Remove(filepath.Join(profile, f))
	}
	headed := false
	env := sandboxproc.Env()
	if fi, err := os.Stat(agentX11Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		headed = true
		env = sandboxproc.Env("DISPLAY=" + agentDisplay)
	}
	toR, toW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", ErrNoBrowser, err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		toR.Close()
		toW.Close()
		return nil, fmt.Errorf("%w: pipe: %v", ErrNoBrowser, err)
	}
	os.MkdirAll(browserLogDir, 0o700)
	logf, err := os.OpenFile(filepath.Join(browserLogDir, "chromium.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		logf, _ = os.Open(os.DevNull)
	}
	defer logf.Close()
	home := os.Getenv("HOME")
	args := append([]string{"sh", "-c", `exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2`, path}, chromeArgs(profile, headed)...)
	proc, err := sandboxproc.Start(sandboxproc.Spec{
		Path: sh, Args: args, Dir: home, Env: env,
		Stdin: toR, Stdout: fromW, Stderr: logf,
	})
	toR.Close()
	fromW.Close()
	if err != nil {
		toW.Close()
		fromR.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoBrowser, err)
	}
	c := &chrome{log: log, proc: proc, toB: toW, done: make(chan struct{})}
	go c.readLoop(fromR) // owner: the chrome; exits when Chromium's end of the pipe closes
	log.Info("browser: Chromium started", "pid", proc.Pid, "profile", profile, "headed", headed)
	return c, nil
}

// exitDrain is how long readLoop may go on reading after Chromium exited: its last messages
// are read, but another process of the sandbox holding the pipe's write end open (the agent
// can open /proc/<chromium>/fd/4) cannot keep a dead browser's pipe, and so the browser, alive.
const exitDrain = 2 * time.Second

// readLoop relays Chromium's messages to the attached stream until Chromium closes its end
// (or exited exitDrain ago).
func (c *chrome) readLoop(from *os.File) {
	defer from.Close()
	read := make(chan struct{})
	defer close(read)
	go func() { // owner: readLoop; exits when readLoop ends
		select {
		case <-c.proc.Done():
		case <-read:
			return
		}
		select {
		case <-time.After(exitDrain):
			from.Close() // unblocks the read below
		case <-read:
		}
	}()
	br := bufio.NewReaderSize(from, 64<<10)
	for {
		b, err := cdpmux.ReadMessage(br, helperMaxMessage)
		if errors.Is(err, cdpmux.ErrTooLarge) {
			c.log.Warn("browser: skipped a message from Chromium over the limit", "limit", helperMaxMessage)
			continue
		}
		if err != nil {
			break
		}
		c.smu.Lock()
		if c.stream != nil {
			c.stream.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := cdpmux.WriteMessage(c.stream, b); err != nil {
				c.stream.Close()
				c.stream = nil
			}
		}
		c.smu.Unlock()
	}
	// Chromium closed the pipe: it exited (or is exiting).
	select {
	case <-c.proc.Done():
	case <-time.After(3 * time.Second):
		c.proc.Kill()
		<-c.proc.Done()
	}
	code, _ := c.proc.Wait()
	c.exitMsg = fmt.Sprintf("Chromium exited with code %d (its log: %s/chromium.log in the sandbox); it starts again on next use", code, browserLogDir)
	c.toB.Close()
	close(c.done)
	c.smu.Lock()
	if c.stream != nil {
		writeExit(c.stream, c.exitMsg)
		c.stream.Close()
		c.stream = nil
	}
	c.smu.Unlock()
}

// writeExit writes the helper's last message on a stream.
func writeExit(stream net.Conn, why string) {
	b, _ := json.Marshal(map[string]any{"method": ExitMethod, "params": map[string]string{"message": why}})
	stream.SetWriteDeadline(time.Now().Add(2 * time.Second))
	cdpmux.WriteMessage(stream, b)
}

// serve attaches stream to the browser (closing a previously attached one) and writes the
// stream's messages to Chromium until the stream or the browser ends.
func (c *chrome) serve(stream net.Conn) {
	c.smu.Lock()
	select {
	case <-c.done:
		c.smu.Unlock()
		writeExit(stream, c.exitMsg)
		return
	default:
	}
	if c.stream != nil {
		c.log.Info("browser: a new stream takes the browser over")
		c.stream.Close()
	}
	c.stream = stream
	c.smu.Unlock()
	defer func() {
		c.smu.Lock()
		if c.stream == stream {
			c.stream = nil
		}
		c.smu.Unlock()
	}()
	br := bufio.NewReaderSize(stream, 64<<10)
	for {
		b, err := cdpmux.ReadMessage(br, helperMaxMessage)
		if errors.Is(err, cdpmux.ErrTooLarge) {
			continue
		}
		if err != nil {
			return
		}
		if err := c.write(b); err != nil {
			return
		}
	}
}

// write writes one message to Chromium.
func (c *chrome) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.toB.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return cdpmux.WriteMessage(c.toB, b)
}

// stop closes the browser gracefully (Browser.close writes the profile, cookies included,
// to disk), then signals it, and waits.
func (c *chrome) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	start := time.Now()
	defer func() { c.log.Info("browser: Chromium stopped", "after", time.Since(start).Round(time.Millisecond)) }()
	c.wmu.Lock()
	c.toB.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	cdpmux.WriteMessage(c.toB, []byte(`{"id":2147483647,"method":"Browser.close"}`))
	c.wmu.Unlock()
	select {
	case <-c.done:
		return
	case <-time.After(stopGrace):
	}
	c.proc.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(300 * time.Millisecond):
	}
	c.proc.Kill()
	<-c.done
}
