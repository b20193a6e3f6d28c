//go:build !js

package terminal

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestReconnectGetsExactlyTheMissedBytes(t *testing.T) {
	srv := newEnv(t, Config{})
	a := dial(t, srv, "a1", "alice", "drive")
	id := a.open(80, 24)
	a.run(id, "seq 1 300")
	last := a.seq(id)
	a.ws.Close() // the tab goes away; the terminal lives on

	b := dial(t, srv, "a1", "bob", "drive")
	b.attachFrom(id, 0, 80, 24)
	b.run(id, "seq 1000 1300")

	a2 := dial(t, srv, "a1", "alice", "drive")
	a2.attachFrom(id, last, 80, 24)
	b.run(id, "echo sync")
	a2.waitOutput(id, 0, "sync\r\n", 10*time.Second)
	full := b.output(id)
	got := a2.output(id)
	// Give a2 the same end point as b: both have seen everything up to b's last marker.
	a2.wait("a2 to catch up with b", 5*time.Second, func() bool { return a2.next[id] >= uint64(len(full)) })
	got = a2.output(id)
	if want := full[last:]; got != want {
		t.Fatalf("reconnect from seq %d got %d bytes %q...\nwant exactly the %d missed bytes %q...", last, len(got), tail(got, 80), len(want), tail(want, 80))
	}
	if !strings.Contains(got, "1300\r\n") || strings.Contains(got, "\r\n300\r\n") {
		t.Errorf("replay %q should hold the output made while away and nothing before", tail(got, 200))
	}
	for _, m := range a2.msgs {
		if g, ok := m.(Gap); ok {
			t.Errorf("reconnect within the scrollback got %+v, want no gap", g)
		}
	}
}

func TestReconnectAfterOverwriteGetsGapMarker(t *testing.T) {
	const scrollback = 8 << 10
	srv := newEnv(t, Config{Scrollback: scrollback})
	a := dial(t, srv, "a1", "alice", "drive")
	id := a.open(80, 24)
	a.run(id, "echo start")
	last := a.seq(id)
	a.ws.Close()

	b := dial(t, srv, "a1", "bob", "drive")
	b.attachFrom(id, last, 80, 24)
	b.run(id, "seq 1 20000") // ~110 KB, far over the scrollback
	end := b.quiet(id)

	// Reconnect with an overwritten seq: a Gap to the ring start, then exactly the ring.
	a2 := dial(t, srv, "a1", "alice", "drive")
	a2.attachFrom(id, last, 80, 24)
	g := waitMsg(a2, "Gap", 5*time.Second, func(g Gap) bool { return g.ID == id })
	if g.From != last || g.To != end-scrollback {
		t.Errorf("Gap = [%d, %d), want [%d, %d)", g.From, g.To, last, end-scrollback)
	}
	a2.wait("ring replay", 5*time.Second, func() bool { return a2.next[id] >= end })
	if got, want := a2.output(id), b.output(id)[int(g.To-last):int(end-last)]; got != want {
		t.Fatalf("after the gap got %d bytes, want the %d bytes of the ring", len(got), len(want))
	}

	// A late joiner from 0 gets the scrollback after a gap marker.
	late := dial(t, srv, "a1", "carol", "watch")
	late.attachFrom(id, 0, 0, 0)
	g = waitMsg(late, "Gap", 5*time.Second, func(g Gap) bool { return g.ID == id })
	if g.From != 0 || g.To != end-scrollback {
		t.Errorf("late joiner Gap = [%d, %d), want [0, %d)", g.From, g.To, end-scrollback)
	}
	late.waitOutput(id, 0, "20000\r\n", 5*time.Second)
}

func TestLateJoinerGetsScrollback(t *testing.T) {
	srv := newEnv(t, Config{})
	a := dial(t, srv, "a1", "alice", "drive")
	id := a.open(80, 24)
	a.run(id, "echo first-line; seq 1 50")
	late := dial(t, srv, "a1", "bob", "watch")
	l := waitMsg(late, "List with the terminal", 5*time.Second, func(l List) bool { return len(l.Terminals) == 1 })
	if l.Terminals[0].ID != id || l.Terminals[0].Seq == 0 || len(l.Terminals[0].Viewers) != 1 {
		t.Errorf("late joiner's List = %+v, want terminal %d with output and alice attached", l, id)
	}
	late.attachFrom(id, 0, 0, 0)
	late.wait("the whole scrollback", 5*time.Second, func() bool { return late.next[id] >= a.seq(id) })
	if got, want := late.output(id), a.output(id); !strings.HasPrefix(got, want) {
		t.Fatalf("late joiner got %q, want the scrollback %q", tail(got, 100), tail(want, 100))
	}
}

func TestUTF8SplitAcrossReadsArrivesIntact(t *testing.T) {
	srv := newEnv(t, Config{})
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	const line = "€😀漢字𝄞" // 3-, 4-, 3-, 3-, 4-byte runes
	from := c.outLen(id)
	// A rune split on purpose across two writes (so two PTY reads, two frames), then volume.
	c.run(id, `printf '<\360\237'; sleep 0.2; printf '\230\200>\n'; yes '`+line+`' | head -n 20000`)
	out := c.output(id)[from:]
	if !strings.Contains(out, "<😀>\r\n") {
		t.Errorf("a rune split across writes did not arrive intact: %q", tail(out[:min(len(out), 300)], 300))
	}
	if !utf8.ValidString(out) {
		t.Fatalf("output is not valid UTF-8")
	}
	if n := strings.Count(out, line+"\r\n"); n != 20000 {
		t.Fatalf("got %d intact lines of %q, want 20000", n, line)
	}
	// The case under test happened: frames (PTY reads) ended inside characters.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.midRune == 0 {
		t.Errorf("no Output frame ended inside a UTF-8 character; the test did not exercise splits")
	}
	t.Logf("%d Output frames ended inside a UTF-8 character", c.midRune)
}

func TestCapsGiveClearError(t *testing.T) {
	srv := newEnv(t, Config{MaxPerAgent: 2, MaxTotal: 3})
	a := dial(t, srv, "a1", "alice", "drive")
	id1 := a.open(80, 24)
	a.open(80, 24)
	a.send(Open{Tag: 99, Cols: 80, Rows: 24})
	e := waitMsg(a, "limit error", 10*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeLimit })
	if !strings.Contains(e.Message, "max 2 per agent") {
		t.Errorf("third Open on one agent: error %q, want it to name the per-agent max 2", e.Message)
	}
	b := dial(t, srv, "a2", "alice", "drive")
	b.open(80, 24)
	b.send(Open{Tag: 99, Cols: 80, Rows: 24})
	e = waitMsg(b, "limit error", 10*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeLimit })
	if !strings.Contains(e.Message, "max 3 per server") {
		t.Errorf("fourth Open on the server: error %q, want it to name the server max 3", e.Message)
	}
	// Closing one frees a slot.
	a.send(CloseTerminal{ID: id1})
	x := waitMsg(a, "Exit", 10*time.Second, func(x Exit) bool { return x.ID == id1 })
	if x.Reason != "closed by alice" {
		t.Errorf("Exit reason = %q, want %q", x.Reason, "closed by alice")
	}
	b.open(80, 24)
	// Terminals are per agent: b cannot attach to a1's terminal.
	b.send(Attach{ID: id1 + 1})
	e = waitMsg(b, "not found", 5*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeNotFound })
	if !strings.Contains(e.Message, fmt.Sprint(id1+1)) {
		t.Errorf("attach to another agent's terminal: %q", e.Message)
	}
}

func TestShellExitAndTitle(t *testing.T) {
	srv := newEnv(t, Config{})
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	c.send(Input{ID: id, Data: []byte("printf '\\033]0;my <b>title</b>\\007'\r")})
	ti := waitMsg(c, "Title", 5*time.Second, func(ti Title) bool { return ti.ID == id })
	if ti.Title != "my <b>title</b>" {
		t.Errorf("Title = %q, want %q", ti.Title, "my <b>title</b>")
	}
	c.send(Input{ID: id, Data: []byte("echo bye; exit 3\r")})
	x := waitMsg(c, "Exit", 10*time.Second, func(x Exit) bool { return x.ID == id })
	if x.Code != 3 || x.Reason != "shell exited" {
		t.Errorf("Exit = %+v, want code 3, shell exited", x)
	}
	// The last output came before the Exit.
	if out := c.output(id); !strings.Contains(out, "bye\r\n") {
		t.Errorf("output before Exit = %q, want bye", tail(out, 100))
	}
	// Everyone's List drops it.
	c.wait("List without the terminal", 5*time.Second, func() bool {
		seen := false
		for _, m := range c.msgs {
			if l, ok := m.(List); ok {
				if len(l.Terminals) == 1 {
					seen = true
				} else if seen && len(l.Terminals) == 0 {
					return true
				}
			}
		}
		return false
	})
}

func TestIdleTimeoutEndsDetachedTerminal(t *testing.T) {
	srv := newEnv(t, Config{IdleTimeout: 300 * time.Millisecond})
	a := dial(t, srv, "a1", "alice", "drive")
	id := a.open(80, 24)
	keep := a.open(80, 24)
	a.send(Detach{ID: id})
	w := dial(t, srv, "a1", "bob", "watch")
	waitMsg(w, "List without the idle terminal", 5*time.Second, func(l List) bool {
		return len(l.Terminals) == 1 && l.Terminals[0].ID == keep
	})
	// An attached terminal stays.
	time.Sleep(500 * time.Millisecond)
	a.run(keep, "echo still-here")
}

func TestHelperDeathIsReported(t *testing.T) {
	j := newJail(t)
	srv := newTestServer(t, Config{}, j.Open)
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	c.run(id, "echo up")
	// The agent's helper dies (stopped, crashed or idle-stopped): viewers are told.
	if err := j.mgr.Stop(context.Background(), "a1"); err != nil {
		t.Fatal(err)
	}
	x := waitMsg(c, "Exit", 10*time.Second, func(x Exit) bool { return x.ID == id })
	if x.Reason != "agent helper exited" || x.Code != -1 {
		t.Errorf("Exit after helper death = %+v, want code -1, agent helper exited", x)
	}
	// It is recoverable: the next Open starts a new helper.
	id2 := c.open(80, 24)
	if out := c.run(id2, "echo back"); !strings.Contains(out, "back\r\n") {
		t.Errorf("terminal after the helper restarted: %q", out)
	}
}

func TestHelperUnavailableIsAClearError(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	h := newInProcessHelper(t)
	srv := newTestServer(t, Config{}, h.Open)
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	h.Kill()
	x := waitMsg(c, "Exit", 10*time.Second, func(x Exit) bool { return x.ID == id })
	if x.Reason != "agent helper exited" {
		t.Errorf("Exit after helper death = %+v, want agent helper exited", x)
	}
	c.send(Open{Tag: 5, Cols: 80, Rows: 24})
	e := waitMsg(c, "helper error", 10*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeHelper })
	if !strings.Contains(e.Message, "agent helper unavailable") {
		t.Errorf("Open with a dead helper: %q", e.Message)
	}
}

func TestBadFramesGetClearErrors(t *testing.T) {
	srv := newEnv(t, Config{})
	c := dial(t, srv, "a1", "alice", "drive")
	c.sendRaw(2, []byte{0x42, 1, 2})
	e := waitMsg(c, "bad message", 5*time.Second, func(e ErrorMsg) bool { return e.Code == ErrCodeBadMessage })
	if !strings.Contains(e.Message, "unknown opcode 0x42") {
		t.Errorf("error = %q", e.Message)
	}
	c.sendRaw(1, []byte("hello"))
	waitMsg(c, "text error", 5*time.Second, func(e ErrorMsg) bool { return strings.Contains(e.Message, "text messages") })
	// The connection still works.
	id := c.open(80, 24)
	c.run(id, "echo ok")
}

func TestOSCTitleParserAcrossSplits(t *testing.T) {
	stream := []byte("a\x1b]0;one\x07b\x1b]2;t\xc3\xa9\x1b\\c\x1b]1;icon\x07\x1b]7;file://x\x07")
	for split := 1; split <= len(stream); split++ {
		var p oscParser
		var titles []string
		for b := stream; len(b) > 0; {
			n := min(split, len(b))
			if ti, ok := p.feed(b[:n]); ok {
				titles = append(titles, ti)
			}
			b = b[n:]
		}
		if got := strings.Join(titles, ","); split == 1 && got != "one,té" {
			t.Errorf("feed in %d-byte pieces: titles %q, want one,té", split, got)
		} else if !bytes.HasSuffix([]byte(got), []byte("té")) {
			t.Errorf("feed in %d-byte pieces: titles %q, want the last to be té", split, got)
		}
	}
}
