package main

import "context"

// runHelper serves the multiplexed connection inside an agent's sandbox. TODO(bridges helper).
func runHelper(ctx context.Context, args []string) error { panic("TODO") }
