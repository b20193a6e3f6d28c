//go:build !js

package terminal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"github.com/porthole/porthole/internal/sandboxproc"
	"golang.org/x/sys/unix"
)

// hangupGrace is how long a hung-up shell gets before its process group is killed.
const hangupGrace = 2 * time.Second

// drainAfterExit is how long the helper keeps reading the PTY after the shell exited
// (background jobs may still hold it open).
const drainAfterExit = 200 * time.Millisecond

// ServeHelperStream is the helper's (in-sandbox) handler of one terminal stream.
//
// It runs one login shell on a new PTY and returns when the shell has exited and its
// last output and exit status were sent, or when the stream or ctx ended (the shell is
// then hung up and killed). It owns four goroutines, all ended before it returns:
// the PTY reader, the stream sender, the stream reader (input) and the process waiter.
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	defer stream.Close()
	log := slog.Default().With("surface", "terminal", "side", "helper")
	fw := &frameWriter{w: stream}
	rd := newHReader(stream)

	typ, p, err := rd.next()
	if err != nil {
		log.Debug("terminal stream ended before start", "err", err)
		return
	}
	if typ != hStart {
		fw.errorf("terminal stream: first frame is type %d, want start", typ)
		return
	}
	cols, rows, err := parseSize(p)
	if err != nil {
		fw.errorf("terminal start: %v", err)
		return
	}
	sh, err := startShell(cols, rows)
	if err != nil {
		log.Warn("start shell", "err", err)
		fw.errorf("%v", err)
		return
	}
	log = log.With("pid", sh.proc.Pid)
	fw.write(appendHFrame(nil, hStarted, binary.BigEndian.AppendUint32(nil, uint32(sh.proc.Pid))))

	out := newOutBuf(hOutputChunk)
	var wg sync.WaitGroup
	defer wg.Wait()

	// PTY reader: PTY → out. Exits when the PTY is closed or returns an error (EIO once
	// every holder of the tty side is gone).
	readerDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(readerDone)
		defer out.close()
		buf := make([]byte, hOutputChunk)
		for {
			n, err := sh.read(buf)
			if n > 0 && !out.put(buf[:n]) {
				return
			}
			if err != nil {
				return
			}
		}
	}()

	// Sender: out → stream, coalescing whatever accumulated while the last write was
	// in flight. Blocks when the gateway stops reading; then out fills and the PTY reader
	// stops. Exits when out is closed and drained, or the stream fails.
	senderDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(senderDone)
		for {
			frame, ok := out.take()
			if !ok {
				return
			}
			if err := fw.write(frame); err != nil {
				out.fail()
				sh.hangup()
				return
			}
		}
	}()

	// Input: stream → PTY. Exits when the stream ends (gateway closed it, or Hangup).
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer sh.hangup()
		for {
			typ, p, err := rd.next()
			if err != nil {
				return
			}
			switch typ {
			case hInput:
				if _, err := sh.ptmx.Write(p); err != nil {
					return
				}
			case hResize:
				if c, r, err := parseSize(p); err == nil {
					if err := sh.resize(c, r); err != nil {
						log.Debug("resize", "err", err)
					}
				}
			case hHangup:
				return
			default:
				log.Debug("unknown terminal stream frame", "type", typ)
			}
		}
	}()

	// The helper shutting down ends the shell and the stream (unblocking the sender).
	stop := context.AfterFunc(ctx, func() {
		sh.hangup()
		stream.Close()
	})
	defer stop()

	code := sh.wait()
	// Let the reader drain what the shell printed last, then close the PTY.
	select {
	case <-readerDone:
	case <-time.After(drainAfterExit):
	}
	sh.ptmx.Close()
	<-readerDone
	<-senderDone
	log.Debug("shell exited", "code", code)
	fw.write(appendHFrame(nil, hExit, binary.BigEndian.AppendUint32(nil, uint32(code))))
	// Closing the stream (deferred) ends the input goroutine.
	stream.Close()
}

// frameWriter serializes whole frames onto the stream.
type frameWriter struct {
	mu sync.Mutex
	w  net.Conn
}

func (f *frameWriter) write(frame []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.w.Write(frame)
	return err
}

func (f *frameWriter) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 0xffff {
		msg = msg[:0xffff]
	}
	p := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	f.write(appendHFrame(nil, hError, append(p, msg...)))
}

// outBuf is the bounded buffer between the PTY reader and the stream sender. Its
// buffers keep hHeaderLen bytes in front for the Output frame header.
type outBuf struct {
	mu      sync.Mutex
	cond    sync.Cond
	cur     []byte // header space + pending bytes
	spare   []byte
	max     int
	closed  bool
	failed  bool
	sending []byte
}

func newOutBuf(max int) *outBuf {
	o := &outBuf{max: max}
	o.cond.L = &o.mu
	o.cur = make([]byte, hHeaderLen, hHeaderLen+max+32<<10)
	o.spare = make([]byte, hHeaderLen, hHeaderLen+max+32<<10)
	return o
}

// put appends p, waiting while the buffer is full; false when the sender failed.
func (o *outBuf) put(p []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.cur)-hHeaderLen >= o.max && !o.failed {
		o.cond.Wait()
	}
	if o.failed {
		return false
	}
	o.cur = append(o.cur, p...)
	o.cond.Broadcast()
	return true
}

// take waits for pending bytes and returns them as a whole Output frame, valid until
// the next take; false once closed and drained.
func (o *outBuf) take() ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sending != nil {
		o.spare, o.sending = o.sending[:hHeaderLen], nil
	}
	for len(o.cur) == hHeaderLen && !o.closed {
		o.cond.Wait()
	}
	if len(o.cur) == hHeaderLen {
		return nil, false
	}
	frame := o.cur
	o.cur, o.sending = o.spare, frame
	o.spare = nil
	putHHeader(frame, hOutput, len(frame)-hHeaderLen)
	o.cond.Broadcast()
	return frame, true
}

func (o *outBuf) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

func (o *outBuf) fail() {
	o.mu.Lock()
	o.failed, o.closed = true, true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// shell is a login shell on a PTY.
type shell struct {
	proc   *sandboxproc.Process
	ptmx   *os.File // non-blocking, in Go's poller: Close unblocks Read
	once   sync.Once
	exited chan struct{}
}

// ErrNoShell: neither $SHELL, bash nor sh exists in the sandbox.
var ErrNoShell = errors.New("no shell found (tried $SHELL, bash, sh)")

func findShell() (string, error) {
	isExec := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	}
	if s := os.Getenv("SHELL"); filepath.IsAbs(s) && isExec(s) {
		return s, nil
	}
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range []string{"/bin", "/usr/bin"} {
			if p := filepath.Join(dir, name); isExec(p) {
				return p, nil
			}
		}
	}
	return "", ErrNoShell
}

func shellDir() string {
	isDir := func(p string) bool {
		st, err := os.Stat(p)
		return p != "" && err == nil && st.IsDir()
	}
	if h := os.Getenv("HOME"); isDir(h) {
		return h
	}
	if isDir("/home/agent") {
		return "/home/agent"
	}
	return "/"
}

// startShell starts the login shell on a new PTY of the given size, in a new session
// with the PTY as its controlling terminal (job control works).
func startShell(cols, rows uint16) (*shell, error) {
	path, err := findShell()
	if err != nil {
		return nil, fmt.Errorf("start shell: %w", err)
	}
	ptmx0, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close()
	// creack/pty's ioctls put the master in blocking mode; take a non-blocking copy
	// so that it lives in Go's poller (reads cost no thread, Close unblocks them).
	fd, err := syscall.Dup(int(ptmx0.Fd()))
	ptmx0.Close()
	if err != nil {
		return nil, fmt.Errorf("open pty: dup: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("open pty: %w", err)
	}
	ptmx := os.NewFile(uintptr(fd), "/dev/ptmx")
	sh := &shell{ptmx: ptmx, exited: make(chan struct{})}
	if err := sh.resize(cols, rows); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("set pty size: %w", err)
	}

	dir := shellDir()
	set := []string{"TERM=xterm-256color"}
	if os.Getenv("HOME") == "" {
		set = append(set, "HOME="+dir)
	}
	// The reaper leads a new session with the PTY as its controlling terminal; the shell is
	// its foreground process group (job control works), and the whole tree goes at the end.
	proc, err := sandboxproc.Start(sandboxproc.Spec{
		Path:   path,
		Args:   []string{"-" + filepath.Base(path)}, // login shell
		Dir:    dir,
		Env:    sandboxproc.Env(set...),
		Stdin:  tty,
		Stdout: tty,
		Stderr: tty,
		Ctty:   true,
	})
	if err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("start shell %s: %w", path, err)
	}
	sh.proc = proc
	return sh, nil
}

// read reads what the PTY has, batching: one read() returns at most about 4 KiB, so it
// keeps reading while more is ready (up to len(buf)) and only then hands the batch on.
// A lone keystroke echo still goes out at once (the next read() would block).
func (s *shell) read(buf []byte) (int, error) {
	rc, err := s.ptmx.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for n < len(buf) {
			m, e := rawRead(fd, buf[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return n > 0 // wait for readiness only when nothing was read yet
			case e != nil:
				rerr = e
				return true
			case m == 0:
				rerr = io.EOF
				return true
			}
			n += m
		}
		return true
	})
	if rerr != nil {
		err = rerr
	}
	return n, err
}

// rawRead is read(2) on the non-blocking PTY master without the scheduler's syscall
// bookkeeping (entersyscall/exitsyscall): it never sleeps for input (O_NONBLOCK), only
// briefly for the tty layer's flush worker, and a flood makes ~25k such reads per 100 MB.
// Marking each as a syscall let sysmon retake the helper's only P mid-read and hand it to
// another thread; raw reads cut the helper's futex/epoll wake-ups by about half.
func rawRead(fd uintptr, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func (s *shell) resize(cols, rows uint16) error {
	rc, err := s.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
	if err != nil {
		return err
	}
	return ierr
}

// wait waits for the shell (and everything it left running) and returns its exit status
// (128+signal when killed).
func (s *shell) wait() int {
	code, _ := s.proc.Wait()
	close(s.exited)
	return code
}

// hangup sends SIGHUP to the shell's process group, and kills its whole tree after hangupGrace
// if the shell has not exited. Safe to call more than once and after exit.
func (s *shell) hangup() {
	s.once.Do(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		s.proc.Signal(syscall.SIGHUP)
		s.proc.Signal(syscall.SIGCONT)
		// Owner: this timer; ends at the shell's exit or after the grace.
		go func() {
			select {
			case <-s.exited:
			case <-time.After(hangupGrace):
				s.proc.Kill() // the shell's whole tree
			}
		}()
	})
}
