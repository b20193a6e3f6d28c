//go:build !js

package terminal

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
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

func TestWatchAndDriveEnforcedOnServer(t *testing.T) {
	var mu sync.Mutex
	var attaches []string
	srv := newEnv(t, Config{OnAttach: func(agent api.Agent, v Viewer, id uint32, opened bool) {
		mu.Lock()
		attaches = append(attaches, fmt.Sprintf("%s %s %s %d %v", agent.ID, v.Name, v.Mode, id, opened))
		mu.Unlock()
	}})
	driver := dial(t, srv, "a1", "alice", "drive")
	id := driver.open(80, 24)
	driver.run(id, "cd /tmp")
	const marker = "/tmp/x" // inside the jail

	watcher := dial(t, srv, "a1", "bob", "watch")
	waitMsg(watcher, "Hello(watch)", 5*time.Second, func(h Hello) bool { return h.Mode == ModeWatch })
	watcher.send(Attach{ID: id, Since: 0, Cols: 20, Rows: 5})
	// Everyone sees who is attached.
	for _, c := range []*client{driver, watcher} {
		waitMsg(c, "Viewers with alice and bob", 5*time.Second, func(v Viewers) bool {
			return v.ID == id && len(v.Viewers) == 2 &&
				v.Viewers[0].Name == "alice" && v.Viewers[0].Mode == ModeDrive &&
				v.Viewers[1].Name == "bob" && v.Viewers[1].Mode == ModeWatch
		})
	}
	// The watcher gets the scrollback.
	watcher.waitOutput(id, 0, "cd /tmp", 5*time.Second)

	// The watcher's keystrokes, resize and close are dropped by the server.
	watcher.send(Input{ID: id, Data: []byte("touch " + marker + "\r")})
	watcher.send(Resize{ID: id, Cols: 20, Rows: 5})
	watcher.send(CloseTerminal{ID: id})
	waitMsg(watcher, "Mode(watch) after dropped input", 5*time.Second, func(m ModeMsg) bool { return m.ID == id && m.Mode == ModeWatch })
	// A watcher cannot open terminals either.
	watcher.send(Open{Tag: 1, Cols: 80, Rows: 24})
	e := waitMsg(watcher, "Error(watch only)", 5*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeWatchOnly })
	if !strings.Contains(e.Message, "watching") {
		t.Errorf("watcher Open error = %q, want it to say watching", e.Message)
	}

	// The driver's terminal is still alive, its size unchanged, and the file was never made.
	out := driver.run(id, "stty size; test -e "+marker+" && echo EXISTS || echo ABS''ENT")
	if !strings.Contains(out, "24 80\r\n") || !strings.Contains(out, "ABSENT") {
		t.Fatalf("after the watcher typed, driver's terminal says %q, want 24 80 and ABSENT", out)
	}
	// The watcher sees the driver's output.
	watcher.waitOutput(id, 0, "ABSENT", 5*time.Second)
	// The driver's typing runs.
	driver.run(id, "touch "+marker)
	if out := driver.run(id, "test -e "+marker+" && echo EXI''STS"); !strings.Contains(out, "EXISTS") {
		t.Fatalf("driver's touch did not run: %q", out)
	}
	// Every attach was reported (for the audit log), with its mode.
	mu.Lock()
	defer mu.Unlock()
	want := []string{fmt.Sprintf("a1 alice drive %d true", id), fmt.Sprintf("a1 bob watch %d false", id)}
	if !slices.Equal(attaches, want) {
		t.Errorf("OnAttach calls = %q, want %q", attaches, want)
	}
}

func TestSizeFollowsSmallestDriver(t *testing.T) {
	srv := newEnv(t, Config{})
	a := dial(t, srv, "a1", "alice", "drive")
	id := a.open(100, 40)
	b := dial(t, srv, "a1", "carol", "drive")
	b.send(Attach{ID: id, Cols: 90, Rows: 50})
	waitMsg(a, "Size 90x40", 5*time.Second, func(s Size) bool { return s.ID == id && s.Cols == 90 && s.Rows == 40 })
	if out := a.run(id, "stty size"); !strings.Contains(out, "40 90\r\n") {
		t.Fatalf("stty size with drivers 100x40 and 90x50 = %q, want 40 90", out)
	}
	// A watcher's size does not count.
	w := dial(t, srv, "a1", "bob", "watch")
	w.send(Attach{ID: id, Cols: 10, Rows: 10})
	b.send(Detach{ID: id})
	waitMsg(a, "Size 100x40", 5*time.Second, func(s Size) bool { return s.ID == id && s.Cols == 100 && s.Rows == 40 })
}
