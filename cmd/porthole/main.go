// Command porthole is the Porthole gateway, its admin verbs, and the in-sandbox helper.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server"
)

const usage = `porthole — watch and drive your AI agents' terminals, desktops and browsers.

Usage:
  porthole serve [--addr 127.0.0.1:8080] [--data ./data] [--db URL] [--allow-host-backend] [--config FILE]
  porthole user add NAME [--admin] --password-stdin
  porthole user list | passwd NAME --password-stdin | rm NAME
  porthole helper          (run by a backend inside an agent's sandbox; not for people)
  porthole version
`

func main() {
	// Nothing inherited: an fd the caller left open must not reach an agent's sandbox (every
	// subcommand may start children: serve the helpers, helper the agents' commands).
	if err := bridges.CloseInheritedFDs(); err != nil {
		fmt.Fprintf(os.Stderr, "porthole: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = server.Serve(ctx, os.Args[2:], surfaces)
	case "user":
		err = server.UserCommand(ctx, os.Args[2:], os.Stdin, os.Stdout)
	case "helper":
		err = runHelper(ctx, os.Args[2:])
	case "version":
		fmt.Println(server.Version)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "porthole: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "porthole %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
