package main

import (
	"context"
	"fmt"

	"github.com/porthole/porthole/bridges"
)

// helperHandlers are the stream kinds the in-sandbox helper serves: exec (the gateway's
// POST /exec) and every surface's streams.
func helperHandlers() (map[string]bridges.Handler, error) {
	handlers := map[string]bridges.Handler{bridges.StreamExec: bridges.ServeExecStream}
	for _, d := range surfaces {
		for kind, h := range d.Streams {
			if _, dup := handlers[kind]; dup {
				return nil, fmt.Errorf("helper stream kind %q of the %s surface is taken", kind, d.Name)
			}
			handlers[kind] = h
		}
	}
	return handlers, nil
}

// runHelper is `porthole helper [cgexec|init] ...`: inside an agent's sandbox it serves the
// gateway's multiplexed session over stdin/stdout (see docs/helper-protocol.md).
func runHelper(ctx context.Context, args []string) error {
	handlers, err := helperHandlers()
	if err != nil {
		return err
	}
	return bridges.RunHelper(ctx, args, handlers)
}
