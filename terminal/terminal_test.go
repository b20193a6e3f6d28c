package terminal

import (
	"strings"
	"testing"
	"time"
)

// newEnv returns a test server whose terminals run on the test backend.
func newEnv(t *testing.T, cfg Config) *testServer {
	t.Helper()
	return newTestServer(t, cfg, backendOpen(t))
}

func TestEchoHi(t *testing.T) {
	srv := newEnv(t, Config{})
	c := dial(t, srv, "a1", "alice", "drive")
	h := waitMsg[Hello](c, "Hello", 5*time.Second, nil)
	if h.Mode != ModeDrive || h.Version != ProtocolVersion || h.ViewerName != "alice" {
		t.Errorf("Hello = %+v, want drive, version %d, alice", h, ProtocolVersion)
	}
	id := c.open(80, 24)
	from := c.outLen(id)
	c.send(Input{ID: id, Data: []byte("echo h''i\r")})
	c.waitOutput(id, from, "hi\r\n", 10*time.Second)
}

func TestResizeSttySize(t *testing.T) {
	srv := newEnv(t, Config{})
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	if out := c.run(id, "stty size"); !strings.Contains(out, "24 80\r\n") {
		t.Fatalf("stty size after open(80, 24) = %q, want 24 80", out)
	}
	c.send(Resize{ID: id, Cols: 132, Rows: 43})
	waitMsg(c, "Size 132x43", 5*time.Second, func(s Size) bool { return s.ID == id && s.Cols == 132 && s.Rows == 43 })
	if out := c.run(id, "stty size"); !strings.Contains(out, "43 132\r\n") {
		t.Fatalf("stty size after Resize(132, 43) = %q, want 43 132", out)
	}
	// Out-of-range sizes are clamped, not errors.
	c.send(Resize{ID: id, Cols: 60000, Rows: 0})
	if out := c.run(id, "stty size"); !strings.Contains(out, "24 1000\r\n") {
		t.Fatalf("stty size after Resize(60000, 0) = %q, want 24 1000 (clamped)", out)
	}
}
