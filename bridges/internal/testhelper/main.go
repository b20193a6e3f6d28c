// Command testhelper is a small `porthole helper` for the bridges tests: the same RunHelper with the exec
// stream only, so the tests do not depend on the gateway's packages building.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"github.com/porthole/porthole/bridges"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "ptrace" {
		// `testhelper ptrace PID`: try PTRACE_ATTACH on PID from inside a jail (hardening tests).
		fmt.Println(tryPtrace(os.Args[2]))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "nettest" {
		os.Exit(nettest(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != "helper" {
		fmt.Fprintln(os.Stderr, "usage: testhelper helper [args]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	handlers := map[string]bridges.Handler{bridges.StreamExec: bridges.ServeExecStream}
	if err := bridges.RunHelper(ctx, os.Args[2:], handlers); err != nil {
		fmt.Fprintf(os.Stderr, "porthole helper: %v\n", err)
		os.Exit(1)
	}
}

// tryPtrace attaches to pid and detaches again; it returns "attached" or the error.
func tryPtrace(arg string) string {
	pid, err := strconv.Atoi(arg)
	if err != nil {
		return "bad pid: " + err.Error()
	}
	runtime.LockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		return "ptrace: " + err.Error()
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WALL, nil)
	syscall.PtraceDetach(pid)
	return "attached"
}
