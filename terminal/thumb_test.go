//go:build !js

package terminal

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestThumbLines(t *testing.T) {
	for _, tt := range []struct {
		name       string
		out        string
		cols, rows int
		want       []string
	}{
		{"plain", "$ echo hi\r\nhi\r\n$ ", 80, 24, []string{"$ echo hi", "hi", "$"}},
		{"colours and titles", "\x1b]0;build <b>\x07\x1b[1;32mok\x1b[0m done\r\n", 80, 24, []string{"ok done"}},
		{"carriage return overwrites", "progress 10%\rprogress 99%\r\n", 80, 24, []string{"progress 99%"}},
		{"erase line", "old text\r\x1b[Knew\r\n", 80, 24, []string{"new"}},
		{"clear screen", "gone\r\n\x1b[H\x1b[2Jfresh", 80, 24, []string{"fresh"}},
		{"cursor position", "\x1b[2J\x1b[3;5Hthere\x1b[1;1Htop", 80, 24, []string{"top", "", "    there"}},
		{"scrolls", "1\r\n2\r\n3\r\n4\r\n5", 80, 3, []string{"3", "4", "5"}},
		{"wraps", "abcdefgh", 4, 5, []string{"abcd", "efgh"}},
		{"alternate screen", "shell$ vim\r\n\x1b[?1049h\x1b[Hediting\x1b[?1049l", 80, 24, []string{"shell$ vim"}},
		{"backspace and tab", "ab\bc\td", 80, 24, []string{"ac      d"}},
		{"utf-8", "héllo ✓\r\n", 80, 24, []string{"héllo ✓"}},
		{"controls dropped", "a\x00\x07\x7fb", 80, 24, []string{"ab"}},
		{"unknown size", "x", 0, 0, []string{"x"}},
		{"empty", "", 80, 24, nil},
		{"dcs skipped", "\x1bPq#0;1;2\x1b\\after", 80, 24, []string{"after"}},
	} {
		got := thumbLines([]byte(tt.out), false, tt.cols, tt.rows, thumbMaxLines, thumbWidth)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	// Only the last lines, each cut to the width.
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString(strings.Repeat("x", 200) + "\r\n")
	}
	b.WriteString("last")
	got := thumbLines([]byte(b.String()), true, 250, 60, 5, 40)
	if len(got) != 5 || got[4] != "last" || len(got[0]) != 40 {
		t.Errorf("long output: %d lines, last %q, first %d runes; want 5, last, 40", len(got), got[len(got)-1], len(got[0]))
	}
}

// FuzzThumbLines: any output (agent-controlled) gives bounded, printable lines and never panics.
func FuzzThumbLines(f *testing.F) {
	f.Add([]byte("$ ls\r\nfile\r\n\x1b[31mred\x1b[0m"), uint16(80), uint16(24))
	f.Add([]byte("\x1b[999;999H\x1b[999@\x1b[999P\x1b[999L\x1b[999M\x1b[?1049h\x1b[S\x1b[T"), uint16(3), uint16(2))
	f.Add([]byte("\x1b]0;t\x1b\\\x1bPdcs\x1b\\\x1b(B\x1b7\x1b8\x1bM\x1bc"), uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, out []byte, cols, rows uint16) {
		lines := thumbLines(out, len(out)%2 == 1, int(cols), int(rows), thumbMaxLines, thumbWidth)
		if len(lines) > thumbMaxLines {
			t.Fatalf("%d lines", len(lines))
		}
		for _, l := range lines {
			if utf8.RuneCountInString(l) > thumbWidth || !utf8.ValidString(l) {
				t.Fatalf("line %q: too long or not UTF-8", l)
			}
			for _, r := range l {
				if !unicode.IsPrint(r) {
					t.Fatalf("line %q holds %U", l, r)
				}
			}
		}
	})
}

// TestStatusForDashboard: Status counts the agent's terminals and shows the last lines of the
// one with the latest output; OnChange fires on open, output and end.
func TestStatusForDashboard(t *testing.T) {
	var mu sync.Mutex
	changes := map[string]int{}
	srv := newEnv(t, Config{OnChange: func(agentID string) {
		mu.Lock()
		changes[agentID]++
		mu.Unlock()
	}})
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return changes[id]
	}
	if st := srv.svc.Status("a1"); st.Sessions != 0 || st.Lines != nil {
		t.Fatalf("Status before any terminal = %+v, want none", st)
	}
	c := dial(t, srv, "a1", "alice", "drive")
	id1 := c.open(80, 24)
	if count("a1") == 0 {
		t.Errorf("no OnChange after an open")
	}
	c.run(id1, "echo first-$((1+1))")
	id2 := c.open(80, 24)
	c.run(id2, "echo second-$((2+2))")
	st := srv.svc.Status("a1")
	if st.Sessions != 2 || st.Active.IsZero() {
		t.Fatalf("Status = %+v, want 2 sessions with activity", st)
	}
	if !slices.ContainsFunc(st.Lines, func(l string) bool { return l == "second-4" }) {
		t.Errorf("thumbnail %q, want the second terminal's output (the latest)", st.Lines)
	}
	before := count("a1")
	c.run(id1, "echo again-$((3+3))")
	if count("a1") <= before {
		t.Errorf("no OnChange on output")
	}
	if st := srv.svc.Status("a1"); !slices.Contains(st.Lines, "again-6") {
		t.Errorf("thumbnail %q, want the first terminal's newest output", st.Lines)
	}
	before = count("a1")
	c.send(CloseTerminal{ID: id2})
	waitMsg(c, "Exit of terminal 2", 10*time.Second, func(e Exit) bool { return e.ID == id2 })
	deadline := time.Now().Add(5 * time.Second)
	// The Exit reaches the viewer while the terminal is still finishing: OnChange follows it.
	for (srv.svc.Status("a1").Sessions != 1 || count("a1") <= before) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := srv.svc.Status("a1"); st.Sessions != 1 || count("a1") <= before {
		t.Errorf("after closing one: %d sessions, %d changes (before %d); want 1 and a change", st.Sessions, count("a1"), before)
	}
	if st := srv.svc.Status("other"); st.Sessions != 0 {
		t.Errorf("another agent's status = %+v", st)
	}
}
