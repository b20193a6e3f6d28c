//go:build !js

package terminal

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// heapInUse returns the Go heap in use after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rss returns this process's resident set size in bytes (0 if unknown).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// listSeq asks for a List and returns terminal id's output seq on the server.
func listSeq(c *client, id uint32) uint64 {
	c.t.Helper()
	c.mu.Lock()
	n := len(c.msgs)
	c.mu.Unlock()
	c.send(ListRequest{})
	var seq uint64
	c.wait("List", 10*time.Second, func() bool {
		for _, m := range c.msgs[n:] {
			if l, ok := m.(List); ok {
				for _, ti := range l.Terminals {
					if ti.ID == id {
						seq = ti.Seq
					}
				}
				return true
			}
		}
		return false
	})
	return seq
}

// Memory bounds for a flood with a stalled client, over the baseline.
const (
	floodHeapBound = 32 << 20
	floodRSSBound  = 96 << 20
)

func TestFloodWithStalledClientStaysBounded(t *testing.T) {
	srv := newEnv(t, Config{})
	driver := dialNoRead(t, srv, "a1", "alice", "drive")
	driver.keepTail = 64 << 10
	driver.start()
	flood := driver.open(80, 24)
	other := driver.open(80, 24)
	driver.run(flood, "PS1='PROMPT''> '")
	driver.send(Detach{ID: flood})

	// A driver attaches to the flooding terminal and then never reads again.
	stalled := dialNoRead(t, srv, "a1", "bob", "drive")
	stalled.send(Attach{ID: flood, Since: listSeq(driver, flood)})

	heap0, rss0 := heapInUse(), rss()
	driver.send(Input{ID: flood, Data: []byte("yes\r")})

	// With only the stalled client attached, the flood is paused: the gateway stops
	// reading the helper, the helper stops reading the PTY, and yes blocks in write().
	time.Sleep(time.Second)
	s1 := listSeq(driver, flood)
	time.Sleep(time.Second)
	s2 := listSeq(driver, flood)
	if s1 < 1<<10 || s2 != s1 {
		t.Fatalf("flood with only a stalled client: server seq went %d → %d in 1s, want it started and paused", s1, s2)
	}
	if h := heapInUse(); h > heap0+floodHeapBound {
		t.Errorf("heap grew from %d to %d bytes with a paused flood, bound +%d", heap0, h, floodHeapBound)
	}
	t.Logf("paused flood at seq %d; heap %d → %d", s2, heap0, heapInUse())

	// Another terminal keeps working.
	if out := driver.run(other, "echo alive"); !strings.Contains(out, "alive\r\n") {
		t.Fatalf("other terminal during the flood: %q", out)
	}

	// A fast client attaches: the flood runs at full speed, the stalled client falls off
	// the ring, and memory stays bounded.
	driver.attachFrom(flood, s2, 80, 24)
	deadline := time.Now().Add(3 * time.Second)
	var maxHeap, maxRSS uint64
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		maxHeap, maxRSS = max(maxHeap, heapInUse()), max(maxRSS, rss())
	}
	s3 := listSeq(driver, flood)
	if s3 < s2+4<<20 {
		t.Errorf("flood with a fast client moved only %d bytes in 3s", s3-s2)
	}
	if maxHeap > heap0+floodHeapBound {
		t.Errorf("heap reached %d bytes (baseline %d) during a %d-byte flood, bound +%d", maxHeap, heap0, s3-s2, floodHeapBound)
	}
	if rss0 > 0 && maxRSS > rss0+floodRSSBound {
		t.Errorf("RSS reached %d bytes (baseline %d) during a %d-byte flood, bound +%d", maxRSS, rss0, s3-s2, floodRSSBound)
	}
	t.Logf("flood moved %d MB in 3s; heap baseline %d max %d; RSS baseline %d max %d", (s3-s2)>>20, heap0, maxHeap, rss0, maxRSS)
	if out := driver.run(other, "echo still-alive"); !strings.Contains(out, "still-alive\r\n") {
		t.Fatalf("other terminal during the flood: %q", out)
	}

	// Ctrl-C stops the flood and the prompt comes back.
	from := driver.outLen(flood)
	driver.send(Input{ID: flood, Data: []byte{0x03}})
	driver.waitOutput(flood, from, "PROMPT> ", 10*time.Second)
	s4 := listSeq(driver, flood)
	time.Sleep(300 * time.Millisecond)
	if s5 := listSeq(driver, flood); s5 != s4 {
		t.Errorf("output continued after Ctrl-C: seq %d → %d", s4, s5)
	}
}

// TestStalledWatcherDoesNotHoldTheAgentBack: a watcher (anyone the agent is shared with)
// that stops reading must not pause the agent's program: with no driver attached the flood
// runs on into the ring, and the watcher falls behind instead.
func TestStalledWatcherDoesNotHoldTheAgentBack(t *testing.T) {
	srv := newEnv(t, Config{})
	driver := dialNoRead(t, srv, "a1", "alice", "drive")
	driver.keepTail = 64 << 10
	driver.start()
	flood := driver.open(80, 24)
	driver.run(flood, "PS1='PROMPT''> '")
	driver.send(Detach{ID: flood})

	stalled := dialNoRead(t, srv, "a1", "bob", "watch")
	stalled.send(Attach{ID: flood, Since: listSeq(driver, flood)})
	heap0 := heapInUse()
	s1 := listSeq(driver, flood)
	driver.send(Input{ID: flood, Data: []byte("yes\r")})
	time.Sleep(2 * time.Second)
	s2 := listSeq(driver, flood)
	if s2 < s1+4<<20 {
		t.Fatalf("flood with only a stalled watcher moved %d bytes in 2s, want > 4 MiB (the watcher must not pause the agent)", s2-s1)
	}
	if h := heapInUse(); h > heap0+floodHeapBound {
		t.Errorf("heap grew from %d to %d bytes, bound +%d", heap0, h, floodHeapBound)
	}
	driver.attachFrom(flood, listSeq(driver, flood), 80, 24)
	from := driver.outLen(flood)
	driver.send(Input{ID: flood, Data: []byte{0x03}})
	driver.waitOutput(flood, from, "PROMPT> ", 10*time.Second)
}
