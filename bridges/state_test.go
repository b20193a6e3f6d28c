package bridges

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// stateLog records Config.OnState calls.
type stateLog struct {
	mu  sync.Mutex
	log []string
	err []error
}

func (l *stateLog) on(agentID string, st HelperState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := agentID + " " + st.State
	if st.State == HelperRunning {
		s += fmt.Sprint(" ", st.Streams)
	}
	if st.Err != nil {
		s += " (error)"
	}
	l.log = append(l.log, s)
	l.err = append(l.err, st.Err)
}

func (l *stateLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.log, ", ")
}

func (l *stateLog) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.HasSuffix(l.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("states %q, want them to end with %q", l.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHelperStates: OnState follows a helper through start, a stream, idle stop, a crash
// (with its error) and a backend that cannot start.
func TestHelperStates(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	var l stateLog
	m, _ := newTestManager(t, func(c *Config) { c.OnState = l.on; c.IdleTimeout = 500 * time.Millisecond })
	a := agent("st1", api.BackendBwrap, api.NetworkNone, api.Limits{})

	sh(t, m, a, "true")
	l.waitFor(t, "st1 starting, st1 idle, st1 running 1, st1 idle")
	l.waitFor(t, "st1 idle, st1 stopped") // idle stop: no error
	if err := l.err[len(l.err)-1]; err != nil {
		t.Errorf("idle stop reported error %v", err)
	}

	// A crash: the helper is killed from outside.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := m.Conn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "st1 starting, st1 idle")
	syscall.Kill(hostPid(t, c), syscall.SIGKILL)
	l.waitFor(t, "st1 stopped (error)")
	if err := l.err[len(l.err)-1]; !errors.Is(err, ErrHelperGone) {
		t.Errorf("crash reported %v, want ErrHelperGone", err)
	}

	// A backend that cannot start: the error says so.
	m2, _ := newTestManager(t, func(c *Config) { c.OnState = l.on; c.BwrapPath = "/nonexistent/bwrap" })
	if _, err := m2.Conn(ctx, agent("st2", api.BackendBwrap, api.NetworkNone, api.Limits{})); err == nil {
		t.Fatal("Conn with a missing bwrap succeeded")
	}
	l.waitFor(t, "st2 starting, st2 stopped (error)")
	if err := l.err[len(l.err)-1]; !errors.Is(err, ErrBackendUnavailable) {
		t.Errorf("failed start reported %v, want ErrBackendUnavailable", err)
	}
}
