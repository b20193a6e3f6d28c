package surface

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHub runs until its context ends and records why.
type fakeHub struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ran    chan struct{} // closed when Run returned
}

func newFakeHub() *fakeHub {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &fakeHub{ctx: ctx, cancel: cancel, ran: make(chan struct{})}
}

func (h *fakeHub) Run()            { <-h.ctx.Done(); close(h.ran) }
func (h *fakeHub) End(cause error) { h.cancel(cause) }
func (h *fakeHub) Ending() bool    { return h.ctx.Err() != nil }

var _ Hub = (*fakeHub)(nil)

func waitRan(t *testing.T, h *fakeHub, what string) {
	t.Helper()
	select {
	case <-h.ran:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the hub did not end", what)
	}
}

func TestHubs(t *testing.T) {
	noLeaks(t)
	errIdle, errStop, errShut := errors.New("idle"), errors.New("stopped"), errors.New("shutdown")
	var grace atomic.Int64
	grace.Store(int64(time.Hour))
	hubs := NewHubs[*fakeHub](func() time.Duration { return time.Duration(grace.Load()) }, errIdle)
	starts := 0
	start := func() *fakeHub { starts++; return newFakeHub() }

	// Uses of one agent share its hub; another agent has its own.
	u1, _ := hubs.Acquire("a", start)
	u2, _ := hubs.Acquire("a", start)
	ub, _ := hubs.Acquire("b", start)
	if u1.Hub != u2.Hub || u1.Hub == ub.Hub || starts != 2 {
		t.Fatalf("two uses of a and one of b started %d hubs (shared: %v), want 2 (a's shared)", starts, u1.Hub == u2.Hub)
	}
	// The last use leaving starts the grace; a new use within it keeps the hub.
	u1.Release()
	u2.Release()
	u2.Release() // a second Release does nothing
	u3, _ := hubs.Acquire("a", start)
	if u3.Hub != u1.Hub || starts != 2 {
		t.Fatalf("a use within the grace got a new hub (starts %d)", starts)
	}
	// After the grace without a use, the hub ends idle and is forgotten.
	grace.Store(int64(10 * time.Millisecond))
	u3.Release()
	waitRan(t, u3.Hub, "idle")
	if c := context.Cause(u3.Hub.ctx); c != errIdle {
		t.Errorf("idle hub ended with %v, want %v", c, errIdle)
	}
	if _, ok := hubs.Get("a"); ok {
		t.Error("an idle hub is still listed")
	}
	// A hub that is ending is not handed out: the next use starts a new one.
	u4, _ := hubs.Acquire("a", start)
	u4.Hub.End(errors.New("its stream ended"))
	u5, _ := hubs.Acquire("a", start)
	if u5.Hub == u4.Hub || starts != 4 {
		t.Errorf("a use while the hub was ending got it (starts %d)", starts)
	}
	waitRan(t, u4.Hub, "ended")
	if h, ok := hubs.Get("a"); !ok || h != u5.Hub {
		t.Error("the ended hub's forgetting removed its successor")
	}
	// End stops the agent's hub now, with its cause.
	hubs.End("a", errStop)
	waitRan(t, u5.Hub, "End")
	if c := context.Cause(u5.Hub.ctx); c != errStop {
		t.Errorf("End: hub ended with %v, want %v", c, errStop)
	}
	u4.Release()
	u5.Release()
	// Close ends the rest, waits for them, and refuses new uses.
	hubs.Close(errShut)
	select {
	case <-ub.Hub.ran:
	default:
		t.Error("Close returned before the hub's Run did")
	}
	if c := context.Cause(ub.Hub.ctx); c != errShut {
		t.Errorf("Close: hub ended with %v, want %v", c, errShut)
	}
	if _, ok := hubs.Acquire("c", start); ok {
		t.Error("Acquire after Close succeeded")
	}
	ub.Release()
}
