//go:build !js

package terminal

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNoViewerFloodStopsAtFullRing: a `yes` flood in a terminal nobody is attached to stops
// once the ring is full: the gateway stops reading the helper stream, the helper stops reading
// the PTY, and yes blocks in write (no CPU spent for nobody). Attaching resumes it, and the
// viewer gets the ring's content first.
func TestNoViewerFloodStopsAtFullRing(t *testing.T) {
	const ring = 256 << 10
	h := newInProcessHelper(t)
	srv := newTestServer(t, Config{Scrollback: ring, HighWater: ring / 2}, h.Open)
	c := dial(t, srv, "nv", "alice", "drive")
	id := c.open(80, 24)
	c.run(id, "stty -echo")
	const mark = "porthole-noviewer-yes"
	c.send(Input{ID: id, Data: []byte("exec -a " + mark + " yes noviewer\r")})
	pid := 0
	for i := 0; pid == 0 && i < 100; i++ {
		pid = findProc(mark)
		time.Sleep(50 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("yes did not start")
	}
	c.ws.Close()

	seq := func() uint64 {
		for _, ti := range srv.svc.list("nv").Terminals {
			if ti.ID == id {
				return ti.Seq
			}
		}
		t.Fatal("terminal gone")
		return 0
	}
	// The ring fills, then nothing more is read.
	var s1 uint64
	for i := 0; ; i++ {
		a := seq()
		time.Sleep(500 * time.Millisecond)
		if s1 = seq(); s1 == a {
			break
		}
		if i > 20 {
			t.Fatalf("with no viewer the terminal never stopped reading: seq %d after %ds", s1, i/2)
		}
	}
	cpu0, self0 := procCPU(t, strconv.Itoa(pid)), procCPU(t, "self")
	time.Sleep(time.Second)
	cpu1, self1 := procCPU(t, strconv.Itoa(pid)), procCPU(t, "self")
	state := procState(t, pid)
	t.Logf("paused at seq %d (ring %d); in 1s: yes used %d ticks (state %s), gateway+helper %d ticks", s1, ring, cpu1-cpu0, state, self1-self0)
	if s2 := seq(); s2 != s1 {
		t.Errorf("seq grew from %d to %d while paused", s1, s2)
	}
	if cpu1-cpu0 > 2 || state != "S" {
		t.Errorf("yes used %d ticks in 1s (state %s), want it blocked in write", cpu1-cpu0, state)
	}
	if self1-self0 > 10 {
		t.Errorf("gateway and helper used %d ticks in 1s with no viewer, want near zero", self1-self0)
	}

	// A viewer attaches: it gets the ring, and the output flows again.
	c2 := dial(t, srv, "nv", "alice", "drive")
	c2.attachFrom(id, 0, 80, 24)
	c2.wait("output resumes", 20*time.Second, func() bool { return c2.next[id] > s1+4*ring })
	out := c2.output(id)
	if !strings.HasPrefix(strings.TrimLeft(out, "\r\n"), "noviewer\r\n") && !strings.Contains(out[:min(len(out), 64)], "noviewer") {
		t.Errorf("the viewer did not get the ring's content first: %.80q", out)
	}
	c2.send(CloseTerminal{ID: id})
	waitMsg(c2, "Exit", 10*time.Second, func(m Exit) bool { return m.ID == id })
}

// findProc returns the pid of a process whose argv[0] is name, or 0.
func findProc(name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if arg0, _, _ := strings.Cut(string(b), "\x00"); arg0 == name {
			return pid
		}
	}
	return 0
}

// procStat returns the fields of /proc/<pid>/stat after the command name.
func procStat(t *testing.T, pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// procCPU returns utime+stime of a process in clock ticks.
func procCPU(t *testing.T, pid string) int {
	f := procStat(t, pid)
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

func procState(t *testing.T, pid int) string { return procStat(t, strconv.Itoa(pid))[0] }
