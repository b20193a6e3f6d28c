// Package server is the Porthole gateway: HTTP API, sessions, permissions, audit and WebSocket fan-out.
package server

import (
	"context"
	"io"
)

// Version is the gateway's version string.
var Version = "dev"

// Serve parses serve's flags and runs the gateway until ctx ends. TODO(gateway helper).
func Serve(ctx context.Context, args []string) error { panic("TODO") }

// UserCommand runs `porthole user ...`. TODO(gateway helper).
func UserCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	panic("TODO")
}
