// Command testhelper is a small `porthole helper` for the browser tests: RunHelper with the
// exec stream and the browser's streams only, so the tests do not depend on every package of
// the gateway building.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/browser"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "helper" {
		fmt.Fprintln(os.Stderr, "usage: testhelper helper [args]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	handlers := map[string]bridges.Handler{bridges.StreamExec: bridges.ServeExecStream}
	for kind, h := range browser.Surface.Streams {
		handlers[kind] = bridges.Handler(h)
	}
	if err := bridges.RunHelper(ctx, os.Args[2:], handlers); err != nil {
		fmt.Fprintf(os.Stderr, "porthole helper: %v\n", err)
		os.Exit(1)
	}
}
