package main

import (
	"context"

	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/terminal"
)

// helperHandlers are the stream kinds the in-sandbox helper serves; surfaces add theirs here.
func helperHandlers() map[string]bridges.Handler {
	return map[string]bridges.Handler{
		bridges.StreamExec:     bridges.ServeExecStream,
		bridges.StreamTerminal: terminal.ServeHelperStream,
	}
}

// runHelper is `porthole helper [cgexec|init] ...`: inside an agent's sandbox it serves the
// gateway's multiplexed session over stdin/stdout (see docs/helper-protocol.md).
func runHelper(ctx context.Context, args []string) error {
	return bridges.RunHelper(ctx, args, helperHandlers())
}
