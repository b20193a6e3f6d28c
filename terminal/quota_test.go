//go:build !js

package terminal

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// tryOpen sends Open and returns the new terminal's id, or the limit error's message.
func (c *client) tryOpen() (uint32, string) {
	c.t.Helper()
	c.mu.Lock()
	n := len(c.msgs)
	tag := uint32(n + 5000)
	c.mu.Unlock()
	c.send(Open{Tag: tag, Cols: 80, Rows: 24})
	var id uint32
	var msg string
	c.wait("Opened or an error", 30*time.Second, func() bool {
		for _, m := range c.msgs[n:] {
			switch m := m.(type) {
			case Opened:
				if m.Tag == tag {
					id = m.ID
					return true
				}
			case ErrorMsg:
				if m.ID == 0 {
					msg = m.Message
					return true
				}
			}
		}
		return false
	})
	return id, msg
}

// TestOneUserCannotTakeAllTerminals (issue 7 row 5): at the default caps (8 per agent, 64 per
// server), one user opening 8 terminals on each of 8 agents gets at most 16 (the per-user cap,
// with a message naming it); another user and an admin can still open terminals.
func TestOneUserCannotTakeAllTerminals(t *testing.T) {
	srv := newEnv(t, Config{})
	opened := 0
	var refusal string
	for a := range 8 {
		c := dial(t, srv, fmt.Sprintf("hog-%d", a), "mallory", "drive")
		for range 8 {
			if _, msg := c.tryOpen(); msg == "" {
				opened++
			} else if refusal == "" {
				refusal = msg
			}
		}
	}
	if opened != DefaultMaxPerUser {
		t.Errorf("one user opened %d terminals over 8 agents, want the per-user cap %d", opened, DefaultMaxPerUser)
	}
	if !strings.Contains(refusal, fmt.Sprintf("max %d per user", DefaultMaxPerUser)) {
		t.Errorf("refusal %q, want it to name the per-user cap", refusal)
	}
	bob := dial(t, srv, "bobs", "bob", "drive")
	if _, msg := bob.tryOpen(); msg != "" {
		t.Errorf("another user's Open after one user filled their quota: %q, want it to open", msg)
	}
	admin := dial(t, srv, "admins", "root", "drive&admin=1")
	if _, msg := admin.tryOpen(); msg != "" {
		t.Errorf("admin's Open: %q, want it to open", msg)
	}
}

// TestTerminalAdminReserve: non-admins together stop AdminReserve short of MaxTotal (the
// refusal names it); an admin opens beyond that, up to MaxTotal, and is not held to
// MaxPerUser; a closed terminal frees its user's slot.
func TestTerminalAdminReserve(t *testing.T) {
	srv := newEnv(t, Config{MaxPerAgent: 4, MaxTotal: 6, MaxPerUser: 2, AdminReserve: 2})
	alice := dial(t, srv, "a1", "alice", "drive")
	id1, _ := alice.tryOpen()
	alice.tryOpen()
	if _, msg := alice.tryOpen(); !strings.Contains(msg, "max 2 per user") {
		t.Errorf("alice's 3rd Open: %q, want the per-user cap 2", msg)
	}
	bob := dial(t, srv, "a2", "bob", "drive")
	if _, msg := bob.tryOpen(); msg != "" {
		t.Errorf("bob's 1st Open: %q", msg)
	}
	carol := dial(t, srv, "a3", "carol", "drive")
	if _, msg := carol.tryOpen(); msg != "" {
		t.Errorf("carol's 1st Open (4 of 6): %q", msg)
	}
	if _, msg := carol.tryOpen(); !strings.Contains(msg, "the last 2 kept for admins") {
		t.Errorf("carol's Open with 4 of 6 open: %q, want the admin reserve named", msg)
	}
	admin := dial(t, srv, "a4", "root", "drive&admin=1")
	for i := range 2 {
		if _, msg := admin.tryOpen(); msg != "" {
			t.Errorf("admin's Open #%d into the reserve: %q", i+1, msg)
		}
	}
	if _, msg := admin.tryOpen(); !strings.Contains(msg, "max 6 per server") {
		t.Errorf("admin's Open at 6 of 6: %q, want the server cap", msg)
	}
	// alice closes one: her slot is free again, but the server is still in its reserve for her.
	alice.send(CloseTerminal{ID: id1})
	waitMsg(alice, "Exit", 10*time.Second, func(x Exit) bool { return x.ID == id1 })
	if _, msg := alice.tryOpen(); !strings.Contains(msg, "kept for admins") {
		t.Errorf("alice's Open with 5 of 6 open: %q, want the admin reserve", msg)
	}
}
