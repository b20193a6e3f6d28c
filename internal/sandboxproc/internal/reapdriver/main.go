//go:build linux

// Command reapdriver runs one command through sandboxproc.Start for the package's tests, which
// build it with and without cgo (the C reaper and the Go one) and run the same cases on both.
//
//	reapdriver fds                                  print the open fds >= 3 (but the Go runtime's)
//	reapdriver run [-ctty] [-killfile F] PATH ARGV...
//
// run leaves a non-close-on-exec fd open (as a careless helper would), gives the command a pipe
// as stdin that gets "go\n" once Start has returned (or, with -ctty, a new PTY as its
// controlling terminal, whose output is copied to stdout), Kills it once file F is not empty,
// and prints "pid=N code=C err=E" on stderr.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/porthole/porthole/internal/sandboxproc"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "fds" {
		for fd := 3; fd < 1024; fd++ { // fcntl, not reading /proc/self/fd: no fd of our own
			if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); e == 0 {
				target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
				if !strings.HasPrefix(target, "/sys/fs/cgroup/") { // the Go runtime's CPU limit files
					fmt.Println(fd, target)
				}
			}
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "run" {
		fmt.Fprintln(os.Stderr, "usage: reapdriver fds | run [-ctty] [-killfile F] PATH ARGV...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	ctty := fs.Bool("ctty", false, "run on a new PTY as the controlling terminal")
	killFile := fs.String("killfile", "", "Kill once this file is not empty")
	fs.Parse(os.Args[2:])
	if fs.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "run: PATH ARGV... needed")
		os.Exit(2)
	}
	// Not close-on-exec: the reaper inherits it, the command must not.
	if _, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0); err != nil {
		fail(err)
	}
	spec := sandboxproc.Spec{Path: fs.Arg(0), Args: fs.Args()[1:], Env: sandboxproc.Env(), Stdout: os.Stdout, Stderr: os.Stdout}
	var master, tty *os.File
	var stdinW *os.File
	if *ctty {
		var err error
		master, tty, err = openPTY()
		if err != nil {
			fail(err)
		}
		spec.Stdin, spec.Stdout, spec.Stderr, spec.Ctty = tty, tty, tty, true
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			fail(err)
		}
		spec.Stdin, stdinW = r, w
		defer r.Close()
	}
	p, err := sandboxproc.Start(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pid=0 code=-1 err=%v\n", err)
		return
	}
	copied := make(chan struct{})
	if master != nil {
		tty.Close()
		go func() { io.Copy(os.Stdout, master); close(copied) }() // ends with EIO once the tty is gone
	} else {
		close(copied)
		stdinW.WriteString("go\n")
		stdinW.Close()
	}
	if *killFile != "" {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, _ := os.ReadFile(*killFile); len(b) > 0 {
				break
			}
		}
		p.Kill()
	}
	code, err := p.Wait()
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	fmt.Fprintf(os.Stderr, "pid=%d code=%d err=%v\n", p.Pid, code, err)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reapdriver:", err)
	os.Exit(2)
}

// openPTY opens a new PTY pair (no library: /dev/ptmx and two ioctls).
func openPTY() (master, tty *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		return nil, nil, fmt.Errorf("open pty: unlock: %w", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		return nil, nil, fmt.Errorf("open pty: number: %w", e)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	return master, tty, nil
}
