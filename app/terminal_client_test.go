package app

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/terminal"
)

// recSink records what the client asks of the WebSocket and the screens.
type recSink struct {
	sent     []terminal.Message
	screens  map[uint32]bool
	notices  map[uint32][]string
	readOnly map[uint32]bool
	fixed    map[uint32][2]uint16
	cols     uint16
	rows     uint16
}

func newRecSink() *recSink {
	return &recSink{screens: map[uint32]bool{}, notices: map[uint32][]string{}, readOnly: map[uint32]bool{},
		fixed: map[uint32][2]uint16{}, cols: 100, rows: 30}
}

func (s *recSink) send(m terminal.Message) {
	// Round-trip through the wire format, as the server would see it.
	got, err := terminal.Decode(terminal.Encode(m))
	if err != nil {
		panic(fmt.Sprintf("client sent an undecodable %T: %v", m, err))
	}
	s.sent = append(s.sent, got)
}
func (s *recSink) create(id uint32)                    { s.screens[id] = true }
func (s *recSink) remove(id uint32)                    { delete(s.screens, id) }
func (s *recSink) notice(id uint32, text string)       { s.notices[id] = append(s.notices[id], text) }
func (s *recSink) size(uint32) (uint16, uint16)        { return s.cols, s.rows }
func (s *recSink) setReadOnly(id uint32, ro bool)      { s.readOnly[id] = ro }
func (s *recSink) setFixedSize(id uint32, c, r uint16) { s.fixed[id] = [2]uint16{c, r} }

// take returns and forgets what was sent.
func (s *recSink) take() []terminal.Message {
	m := s.sent
	s.sent = nil
	return m
}

func wantSent(t *testing.T, step string, s *recSink, want ...terminal.Message) {
	t.Helper()
	got := s.take()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: sent %#v, want %#v", step, got, want)
	}
}

func TestTermClientOpensFirstTerminalAndResumesAfterReconnect(t *testing.T) {
	s := newRecSink()
	c := newTermClient(s, terminal.ModeDrive)

	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeDrive, Window: 256 << 10, ViewerID: "u1", ViewerName: "alice"})
	wantSent(t, "hello", s, terminal.ListRequest{})

	c.handle(terminal.List{})
	wantSent(t, "empty list (a driver gets a terminal)", s, terminal.Open{Tag: 1})

	// The server announces the new terminal in a List before answering Open:
	// it must not be attached twice.
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 7, Cols: 80, Rows: 24}}})
	wantSent(t, "list while Open is pending", s)
	c.handle(terminal.Opened{Tag: 1, ID: 7})
	wantSent(t, "opened", s)
	c.resized(7, 100, 30) // the new screen was fitted
	c.resized(7, 100, 30) // again: nothing new to say
	wantSent(t, "fitted", s, terminal.Resize{ID: 7, Cols: 100, Rows: 30})
	if !s.screens[7] || c.active != 7 {
		t.Fatalf("after Opened: screens %v, active %d, want screen 7 active", s.screens, c.active)
	}

	// 100 bytes of output, then the connection drops.
	if skip, write := c.output(7, 0, 100); skip != 0 || !write {
		t.Fatalf("output(7, 0, 100) = %d, %v, want 0, true", skip, write)
	}
	c.disconnected()
	c.input(7, []byte("ls\r"))
	wantSent(t, "input while disconnected", s)

	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeDrive, Window: 256 << 10, ViewerID: "u1"})
	wantSent(t, "hello again", s, terminal.ListRequest{})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 7, Cols: 100, Rows: 30, Seq: 150}}})
	wantSent(t, "reconnect list", s, terminal.Attach{ID: 7, Since: 100, Cols: 100, Rows: 30})

	// The server resends from 90: the 10 bytes already shown are skipped and acknowledged.
	if skip, write := c.output(7, 90, 20); skip != 10 || !write {
		t.Fatalf("output(7, 90, 20) = %d, %v, want 10, true", skip, write)
	}
	wantSent(t, "overlapping output", s, terminal.Ack{ID: 7, N: 10})
	if skip, write := c.output(7, 100, 10); skip != 10 || write {
		t.Fatalf("output(7, 100, 10) = %d, %v, want 10, false", skip, write)
	}
	wantSent(t, "duplicate output", s, terminal.Ack{ID: 7, N: 10})

	c.input(7, []byte("ls\r"))
	c.ack(7, 4096)
	wantSent(t, "input and ack", s, terminal.Input{ID: 7, Data: []byte("ls\r")}, terminal.Ack{ID: 7, N: 4096})
}

func TestTermClientGapAndExit(t *testing.T) {
	s := newRecSink()
	c := newTermClient(s, terminal.ModeDrive)
	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeDrive, Window: 1 << 18})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 3, Seq: 5000, Title: "vim \x1b[31mx"}}})
	wantSent(t, "late join", s, terminal.ListRequest{}, terminal.Attach{ID: 3, Since: 0, Cols: 100, Rows: 30})
	if got := c.view().Tabs[0].Label; got != "vim [31mx" {
		t.Errorf("tab label = %q, want the sanitized title %q", got, "vim [31mx")
	}

	c.handle(terminal.Gap{ID: 3, From: 0, To: 2048})
	if skip, write := c.output(3, 2048, 10); skip != 0 || !write {
		t.Fatalf("output after gap = %d, %v, want 0, true", skip, write)
	}
	if n := s.notices[3]; len(n) != 1 || !strings.Contains(n[0], "2.0 KiB of output skipped") {
		t.Errorf("notices after a gap = %q, want one saying 2.0 KiB were skipped", n)
	}

	c.closeTab(3)
	wantSent(t, "close a running terminal", s, terminal.CloseTerminal{ID: 3})
	c.handle(terminal.Exit{ID: 3, Code: 0, Reason: "closed by alice"})
	v := c.view()
	if !v.Tabs[0].Exited || v.Ended != "closed by alice (status 0)" || !s.readOnly[3] {
		t.Errorf("after Exit: view %+v, read-only %v; want the tab ended and read-only", v, s.readOnly[3])
	}
	c.input(3, []byte("x"))
	c.output(3, 2058, 5)
	wantSent(t, "input to an ended terminal is dropped, late output acked", s, terminal.Ack{ID: 3, N: 5})
	c.closeTab(3)
	if len(c.view().Tabs) != 0 || s.screens[3] {
		t.Errorf("closing an ended tab left tabs %v, screens %v", c.view().Tabs, s.screens)
	}
}

func TestTermClientListBeforeExit(t *testing.T) {
	s := newRecSink()
	c := newTermClient(s, terminal.ModeDrive)
	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeDrive})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 1}, {ID: 2}}})
	c.closeTab(2)
	// The List without terminal 2 overtakes its Exit.
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 1}}})
	c.handle(terminal.Exit{ID: 2, Code: 129, Reason: "closed by alice"})
	c.active = 2
	if v := c.view(); v.Ended != "closed by alice (status 129)" || !v.Tabs[1].Exited {
		t.Errorf("view = %+v, want terminal 2 ended with the Exit's reason", v)
	}
	if n := s.notices[2]; len(n) != 1 || n[0] != "terminal ended: closed by alice. Open a new terminal to go on." {
		t.Errorf("notices = %q, want one with the Exit's reason", n)
	}
	c.handle(terminal.Exit{ID: 2, Code: 0, Reason: "again"})
	if n := s.notices[2]; len(n) != 1 {
		t.Errorf("a second Exit added notices: %q", n)
	}
}

func TestTermClientWatcher(t *testing.T) {
	s := newRecSink()
	c := newTermClient(s, terminal.ModeWatch)
	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeWatch, Window: 1 << 18, ViewerID: "u2"})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 4, Cols: 120, Rows: 40,
		Viewers: []terminal.ViewerInfo{{ID: "u1", Name: "alice", Mode: terminal.ModeDrive}, {ID: "u2", Name: "<b>bob</b>", Mode: terminal.ModeWatch}}}}})
	wantSent(t, "watcher joins", s, terminal.ListRequest{}, terminal.Attach{ID: 4})
	if !s.readOnly[4] || s.fixed[4] != [2]uint16{120, 40} {
		t.Errorf("watcher screen: read-only %v, fixed size %v; want read-only at 120x40", s.readOnly[4], s.fixed[4])
	}
	v := c.view()
	if !v.Watching || v.CanOpen {
		t.Errorf("view = %+v, want watching and no new-terminal button", v)
	}
	if want := "alice (driving), <b>bob</b> (you, watching)"; v.Viewers != want {
		t.Errorf("viewers = %q, want %q", v.Viewers, want)
	}
	c.input(4, []byte("rm -rf /\r"))
	c.resized(4, 80, 24)
	c.open()
	c.closeTab(4)
	wantSent(t, "watcher input, resize, open, close", s)

	c.handle(terminal.Size{ID: 4, Cols: 90, Rows: 20})
	if s.fixed[4] != [2]uint16{90, 20} {
		t.Errorf("after Size: fixed %v, want 90x20", s.fixed[4])
	}
	// Promoted to driver: the screen fits its container again and takes input.
	c.handle(terminal.ModeMsg{ID: 0, Mode: terminal.ModeDrive})
	if s.readOnly[4] || s.fixed[4] != [2]uint16{0, 0} {
		t.Errorf("after Mode drive: read-only %v, fixed %v; want writable and fitting", s.readOnly[4], s.fixed[4])
	}
}

func TestTermClientOpenRefused(t *testing.T) {
	s := newRecSink()
	c := newTermClient(s, terminal.ModeDrive)
	c.handle(terminal.Hello{Version: 1, Mode: terminal.ModeDrive})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 1}}})
	s.take()
	c.open()
	wantSent(t, "open", s, terminal.Open{Tag: 1, Cols: 100, Rows: 30})
	c.handle(terminal.List{Terminals: []terminal.TermInfo{{ID: 1}, {ID: 2}}}) // someone else's new terminal
	wantSent(t, "list while pending", s)
	c.handle(terminal.ErrorMsg{Code: terminal.ErrCodeLimit, Message: "this agent has 8 terminals, the limit"})
	wantSent(t, "after the refusal the other terminal is attached", s, terminal.Attach{ID: 2, Cols: 100, Rows: 30})
	if got := c.view().Err; got != "this agent has 8 terminals, the limit" {
		t.Errorf("error shown = %q", got)
	}
}

func TestTermViewersText(t *testing.T) {
	alice := terminal.ViewerInfo{ID: "u1", Name: "alice", Mode: terminal.ModeDrive}
	bob := terminal.ViewerInfo{ID: "u2", Name: "bob", Mode: terminal.ModeWatch}
	tests := []struct {
		vs   []terminal.ViewerInfo
		me   string
		want string
	}{
		{nil, "u1", ""},
		{[]terminal.ViewerInfo{alice}, "u1", "alice (you, driving)"},
		{[]terminal.ViewerInfo{alice, bob}, "u2", "alice (driving), bob (you, watching)"},
		{[]terminal.ViewerInfo{alice, bob, alice}, "", "alice (driving, 2 connections), bob (watching)"},
		{[]terminal.ViewerInfo{{ID: "token:t1", Mode: terminal.ModeDrive}}, "u1", "token:t1 (driving)"},
	}
	for _, tt := range tests {
		if got := termViewersText(tt.vs, tt.me); got != tt.want {
			t.Errorf("termViewersText(%v, %q) = %q, want %q", tt.vs, tt.me, got, tt.want)
		}
	}
}

func TestTermBackoff(t *testing.T) {
	tests := []struct {
		n        int
		min, max time.Duration
	}{
		{0, 400 * time.Millisecond, 600 * time.Millisecond},
		{1, 800 * time.Millisecond, 1200 * time.Millisecond},
		{4, 6400 * time.Millisecond, 9600 * time.Millisecond},
		{5, 12 * time.Second, 18 * time.Second},
		{60, 12 * time.Second, 18 * time.Second},
	}
	for _, tt := range tests {
		for range 50 {
			if d := termBackoff(tt.n); d < tt.min || d > tt.max {
				t.Fatalf("termBackoff(%d) = %v, want in [%v, %v]", tt.n, d, tt.min, tt.max)
			}
		}
	}
}
