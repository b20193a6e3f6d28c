//go:build linux

// Package reap is the reaper process of package sandboxproc. It is a package of its own, with
// only standard-library imports, so that Go initializes it (and it takes over a process started
// as the reaper) before the heavy packages of the binary it is linked into: a reaper's start
// then costs about a Go runtime start, not the gateway's whole initialization. A cgo build does
// not even start the Go runtime: reap_cgo.c is the same reaper in C, run by a constructor before
// it, so reapMain runs only in CGO_ENABLED=0 (or non-glibc) builds. Change both together.
package reap

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Arg is argv[1] of the reaper process.
const Arg = "__porthole_reap"

// OOMScoreAdj is the oom_score_adj every started process gets (the helper keeps its own, 0):
// the kernel's OOM killer then picks an agent's process before its helper.
const OOMScoreAdj = 1000

const (
	prSetChildSubreaper = 36
	sysCloseRange       = 436
	closeRangeCloexec   = 1 << 2
)

// A binary that imports this package becomes the reaper when run with ReapArg as argv[1]
// (Start runs /proc/self/exe so): this runs before main and before any TestMain.
func init() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		os.Exit(reapMain(os.Args[2:]))
	}
}

// reapMain is the reaper: argv is "ctty"|"-", the program's path, then its argv.
// fd 3 is the status pipe to the helper.
func reapMain(argv []string) int {
	runtime.GOMAXPROCS(1)
	status := os.NewFile(3, "status")
	fail := func(code int, msg string) int {
		status.WriteString("err " + strconv.Itoa(code) + " " + msg + "\n")
		return code
	}
	if len(argv) < 3 {
		return fail(126, "reaper: bad arguments")
	}
	ctty, path, args := argv[0] == "ctty", argv[1], argv[2:]
	// Nothing inherited: only 0, 1, 2 reach the command (the status pipe is close-on-exec too).
	syscall.RawSyscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec)
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fail(126, "reaper: PR_SET_CHILD_SUBREAPER: "+e.Error())
	}
	// The command inherits the raised score; the reaper then goes back to the lowest score it
	// may set unprivileged (0), so that memory pressure picks the command, not its reaper.
	setOOMScoreAdj(OOMScoreAdj)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	sys := &syscall.SysProcAttr{Setpgid: true}
	if ctty {
		sys.Foreground, sys.Ctty = true, 0
	}
	// syscall.ForkExec, not os.StartProcess: the latter's first use forks a probe child (pidfd
	// support check), a fork per reaper for nothing.
	cmdPid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   sys,
	})
	if err != nil {
		code := 126
		if err == syscall.ENOENT {
			code = 127
		}
		return fail(code, err.Error())
	}
	setOOMScoreAdj(0)
	status.WriteString("pid " + strconv.Itoa(cmdPid) + "\n")
	status.Close()

	var killing atomic.Bool
	go func() { // owner: the reaper; lives until it exits
		for s := range sigs {
			if s == syscall.SIGTERM {
				killing.Store(true)
				syscall.Kill(-cmdPid, syscall.SIGKILL)
				killChildren()
				continue
			}
			sig := s.(syscall.Signal)
			syscall.Kill(-cmdPid, sig)
			if sig == syscall.SIGHUP {
				syscall.Kill(-cmdPid, syscall.SIGCONT)
			}
		}
	}()
	code := -1
	for {
		if killing.Load() {
			killChildren()
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing left
			break
		}
		if pid == cmdPid {
			code = waitCode(ws)
			killing.Store(true)
		}
	}
	if code < 0 {
		return 137
	}
	return code
}

func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func setOOMScoreAdj(v int) {
	os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}

// killChildren SIGKILLs every child of the reaper (its descendants reparent to it as their
// parents die, and the wait loop calls this again).
func killChildren() {
	for _, pid := range children() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// children lists the reaper's children from /proc/self/task/*/children, or, where the kernel
// lacks it, by scanning /proc for processes whose parent is the reaper.
func children() []int {
	var pids []int
	tasks, _ := os.ReadDir("/proc/self/task")
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err == nil {
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
			for _, s := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(s); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		return pids
	}
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 1 && f[1] == strconv.Itoa(self) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
