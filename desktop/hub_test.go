//go:build !js

package desktop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// drawFrames sends n frames of random rects (partly overlapping tiles) and returns the
// FrameEnd seq of the last.
func drawFrames(t *testing.T, f *fakeHelper, tr *truth, rng *rand.Rand, n int, seq uint32) uint32 {
	t.Helper()
	W, H := int(tr.screen.W), int(tr.screen.H)
	for range n {
		for range 1 + rng.IntN(4) {
			w, h := 1+rng.IntN(min(100, W)), 1+rng.IntN(min(100, H))
			x, y := rng.IntN(W-w+1), rng.IntN(H-h+1)
			if err := f.send(tr.rect(x, y, w, h, 16)); err != nil {
				t.Fatalf("helper send: %v", err)
			}
		}
		seq++
		if err := f.send(FrameEnd{Seq: seq}); err != nil {
			t.Fatalf("helper send: %v", err)
		}
	}
	return seq
}

// converged waits until the viewer's picture is the helper's, and checks that every Rect
// it got is byte for byte one the helper sent.
func converged(t *testing.T, c *client, tr *truth, name string) {
	t.Helper()
	c.wait(name+" reconstructs the helper's screen", func(st *viewState) bool {
		_, ok := samePix(st.pix, tr.pix)
		return ok
	})
	for _, r := range c.state().rects {
		if tr.sent == nil {
			break
		}
		if !tr.sent[string(r)] {
			t.Fatalf("%s got a Rect the helper never sent: % x", name, r[:min(len(r), 32)])
		}
	}
	for _, d := range c.state().clips {
		if tr.sent == nil {
			break
		}
		if !tr.data[string(d)] {
			t.Fatalf("%s got a ClipRect whose image the helper never sent: % x", name, d[:min(len(d), 32)])
		}
	}
}

// A viewer reconstructs exactly what the helper drew, from the helper's own Rect bytes;
// a viewer joining later gets a keyframe that draws the same picture.
func TestViewerReconstructs(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.dial("alice", "drive", "")
	f := e.helper()
	tr := newTruth(256, 192)
	rng := rand.New(rand.NewPCG(1, 2))
	f.send(tr.screen)
	seq := drawFrames(t, f, tr, rng, 200, 0)
	converged(t, a, tr, "first viewer")

	b := e.dial("bob", "watch", "")
	converged(t, b, tr, "late viewer")
	if st := b.state(); person(st.hello.ViewerID) != "bob" || st.mode != ModeWatch || st.screen != tr.screen {
		t.Fatalf("late viewer: hello %+v mode %v screen %v", st.hello, st.mode, st.screen)
	}
	// The late viewer's keyframe holds the latest rects only: far fewer than were sent.
	if n := len(b.state().rects); n >= len(tr.sent)/2 {
		t.Errorf("late viewer's keyframe has %d rects of %d sent: not the latest per tile", n, len(tr.sent))
	}
	drawFrames(t, f, tr, rng, 100, seq)
	converged(t, a, tr, "first viewer")
	converged(t, b, tr, "late viewer")

	// Refresh: a keyframe from the gateway's model, the helper is not asked.
	before := len(b.state().rects)
	b.send(Refresh{})
	b.wait("a keyframe after Refresh", func(st *viewState) bool { return len(st.rects) > before })
	converged(t, b, tr, "refreshed viewer")

	// A new Screen resets the model: the old rects are not sent to new viewers.
	tr2 := newTruth(128, 64)
	tr2.sent = tr.sent
	f.send(tr2.screen)
	drawFrames(t, f, tr2, rng, 20, 1000)
	converged(t, a, tr2, "first viewer after resize")
	c := e.dial("carol", "watch", "")
	converged(t, c, tr2, "viewer after resize")
	if e.opens.Load() != 1 {
		t.Errorf("the gateway opened %d helper streams for one agent, want 1", e.opens.Load())
	}
}

// 20 viewers get the same bytes, which are the helper's: the helper encodes (sends) each
// frame once whatever the number of viewers.
func TestTwentyViewersSameBytes(t *testing.T) {
	e := newEnv(t, Config{})
	tr := newTruth(256, 192)
	var cs []*client
	cs = append(cs, e.dial("v0", "watch", ""))
	f := e.helper()
	f.send(tr.screen)
	for i := 1; i < 20; i++ {
		cs = append(cs, e.dial("v"+string(rune('a'+i)), "watch", ""))
	}
	for _, c := range cs {
		c.wait("the first keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var sent [][]byte
	for i := range 50 {
		r := tr.rect(rng.IntN(200), rng.IntN(150), 1+rng.IntN(56), 1+rng.IntN(42), 64+rng.IntN(512))
		sent = append(sent, Encode(r))
		f.send(r)
		f.send(FrameEnd{Seq: uint32(i + 1)})
		for _, c := range cs { // in lockstep: no coalescing, every viewer gets every rect
			c.wait("the frame", func(st *viewState) bool { return len(st.rects) == i+1 })
		}
	}
	for i, c := range cs {
		got := c.state().rects
		for j := range sent {
			if !bytes.Equal(got[j], sent[j]) {
				t.Fatalf("viewer %d rect %d differs from the helper's bytes", i, j)
			}
		}
		converged(t, c, tr, "viewer")
	}
}

// A viewer that never acknowledges and one whose TCP buffer is full leave the gateway's
// memory bounded while the helper floods frames, and the other viewer follows at full rate.
func TestSlowViewersBounded(t *testing.T) {
	e := newEnv(t, Config{})
	fast := e.dial("fast", "watch", "")
	noAck := e.dialOpts("noack", "watch", "", false)
	fast.mu.Lock()
	fast.drop = true
	fast.mu.Unlock()
	noAck.mu.Lock()
	noAck.drop = true
	noAck.mu.Unlock()
	stuck := e.dialRaw("stuck") // never reads: its socket buffers fill up
	_ = stuck
	f := e.helper()
	tr := newTruth(512, 512)
	tr.sent = nil // the test's own memory would dwarf the gateway's
	f.send(tr.screen)
	fast.wait("the first keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const frames, perFrame, size = 3000, 4, 8 << 10 // 96 MiB of rects in all
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Now()
	var peak uint64
	for i := range frames {
		for range perFrame {
			x, y := rng.IntN(8)*64, rng.IntN(8)*64
			if err := f.send(tr.rect(x, y, 64, 64, size)); err != nil {
				t.Fatalf("helper send: %v", err)
			}
		}
		f.send(FrameEnd{Seq: uint32(i + 1)})
		if i%500 == 499 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
		}
	}
	flood := time.Since(start)
	converged(t, fast, tr, "fast viewer")
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	peak = max(peak, m1.HeapAlloc)
	growth := int64(peak) - int64(m0.HeapAlloc)
	t.Logf("flood of %d frames (%d MiB) took %v; heap %d KiB before, peak growth %d KiB; fast viewer drew %d frames",
		frames, frames*perFrame*size>>20, flood, m0.HeapAlloc>>10, growth>>10, fast.state().frameEnds)
	// The screen is 64 tiles of 8 KiB: the model is ~0.5 MiB; each viewer holds at most one batch.
	if growth > 24<<20 {
		t.Errorf("gateway heap grew by %d MiB while a viewer did not read: not bounded", growth>>20)
	}
	if n := noAck.state().frameEnds; n != DefaultWindow {
		t.Errorf("the viewer that never acks got %d frames, want the window (%d)", n, DefaultWindow)
	}
	if n := fast.state().frameEnds; n < 20 {
		t.Errorf("the fast viewer drew only %d frames during the flood", n)
	}
}

// Each malformed helper frame ends the stream cleanly: viewers get Error{Helper} and are
// disconnected, and the next viewer gets a new stream.
func TestMalformedHelperFrames(t *testing.T) {
	bad := map[string][]byte{
		"unknown opcode":      {0, 0, 0, 1, 0x7e},
		"oversized length":    {0xff, 0xff, 0xff, 0xff},
		"zero length":         {0, 0, 0, 0},
		"rect off the screen": streamFrame(Rect{X: 250, Y: 0, W: 64, H: 64, Enc: EncJPEG, Data: []byte{1}}),
		"truncated rect":      {0, 0, 0, 3, byte(OpRect), 0, 1},
		"viewer opcode":       streamFrame(TakeControl{}),
		"bad cursor":          {0, 0, 0, 9, byte(OpCursorShape), 0, 1, 0, 1, 0, 0, 0, 0},
	}
	for name, frame := range bad {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			e := newEnv(t, Config{})
			a := e.dial("alice", "drive", "")
			f := e.helper()
			tr := newTruth(256, 192)
			f.send(tr.screen)
			drawFrames(t, f, tr, rand.New(rand.NewPCG(7, 8)), 3, 0)
			converged(t, a, tr, "viewer")
			f.sendRaw(frame)
			a.wait("Error{Helper}", a.hasErr(ErrCodeHelper, "bad frame"))
			a.wait("the close", func(st *viewState) bool {
				return websocket.IsCloseError(st.closed, websocket.CloseTryAgainLater)
			})
			<-f.done // the gateway closed the stream
			b := e.dial("bob", "watch", "")
			f2 := e.helper()
			f2.send(tr.screen)
			b.wait("a keyframe from the new stream", func(st *viewState) bool { return st.frameEnds >= 1 })
		})
	}
}

func streamFrame(m Message) []byte {
	b := Encode(m)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// The helper stream stays open while anyone is attached, and closes Grace after the last
// viewer left; a viewer back within Grace reuses it.
func TestHelperStreamGrace(t *testing.T) {
	e := newEnv(t, Config{Grace: 300 * time.Millisecond})
	a := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 64, H: 64})
	a.wait("a keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })
	a.close()
	time.Sleep(100 * time.Millisecond)
	b := e.dial("bob", "drive", "")
	b.wait("a keyframe from the warm stream", func(st *viewState) bool { return st.frameEnds >= 1 })
	b.close()
	select {
	case <-f.done:
		t.Fatal("the stream closed before the grace period ended")
	case <-time.After(150 * time.Millisecond):
	}
	select {
	case <-f.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the stream stayed open after the grace period")
	}
	if n := e.opens.Load(); n != 1 {
		t.Fatalf("opened %d streams, want 1", n)
	}
}

// A helper that cannot be reached: the viewer is told so and disconnected.
func TestHelperUnreachable(t *testing.T) {
	e := newEnv(t, Config{})
	e.failOpen.Store(true)
	a := e.dial("alice", "drive", "")
	a.wait("Error{Helper}", a.hasErr(ErrCodeHelper, "no helper for you"))
	a.wait("the close", func(st *viewState) bool { return st.closed != nil })
}

// drawCopyFrames sends n frames mixing rects and copies (a window dragged, overlapping moves,
// copies of copies) and returns the last FrameEnd seq.
func drawCopyFrames(t *testing.T, f *fakeHelper, tr *truth, rng *rand.Rand, n int, seq uint32) uint32 {
	t.Helper()
	W, H := int(tr.screen.W), int(tr.screen.H)
	for range n {
		for range 1 + rng.IntN(4) {
			var m Message
			if rng.IntN(2) == 0 {
				w, h := 1+rng.IntN(min(80, W)), 1+rng.IntN(min(80, H))
				m = tr.rect(rng.IntN(W-w+1), rng.IntN(H-h+1), w, h, 16)
			} else {
				w, h := 1+rng.IntN(W/2), 1+rng.IntN(H/2)
				sx, sy := rng.IntN(W-w+1), rng.IntN(H-h+1)
				x, y := min(max(sx+rng.IntN(41)-20, 0), W-w), min(max(sy+rng.IntN(41)-20, 0), H-h)
				m = tr.copy(sx, sy, x, y, w, h)
			}
			if err := f.send(m); err != nil {
				t.Fatalf("helper send: %v", err)
			}
		}
		seq++
		if err := f.send(FrameEnd{Seq: seq}); err != nil {
			t.Fatalf("helper send: %v", err)
		}
	}
	return seq
}

// Copies reconstruct exactly: for a viewer in step (it gets the Copies), one that lags and
// catches up (the helper's recent frames, or ClipRects of the moved images), and viewers
// joining late (a keyframe of ClipRects).
func TestCopiesReconstruct(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.dial("alice", "drive", "")
	lag := e.dialOpts("lagger", "watch", "", false)
	f := e.helper()
	tr := newTruth(256, 192)
	rng := rand.New(rand.NewPCG(9, 10))
	f.send(tr.screen)
	f.send(tr.rect(0, 0, 256, 192, 16))
	seq := drawCopyFrames(t, f, tr, rng, 1, 0)
	var late []*client
	for i := range 30 {
		seq = drawCopyFrames(t, f, tr, rng, 10, seq)
		if i%3 == 0 { // the lagger acks what it has, now and then
			st := lag.state()
			lag.send(Ack{Seq: st.lastSeq})
		}
		if i%10 == 5 {
			late = append(late, e.dial(fmt.Sprintf("late%d", i), "watch", ""))
		}
	}
	converged(t, a, tr, "viewer")
	for i, c := range late {
		converged(t, c, tr, fmt.Sprintf("late viewer %d", i))
	}
	for i := 0; ; i++ {
		st := lag.state()
		if _, ok := samePix(st.pix, tr.pix); ok {
			break
		}
		if i > 2000 {
			t.Fatal("the lagging viewer never caught up")
		}
		lag.send(Ack{Seq: st.lastSeq})
		time.Sleep(2 * time.Millisecond)
	}
	converged(t, lag, tr, "lagging viewer")
	if st := a.state(); st.copies == 0 {
		t.Error("the viewer in step got no Copy")
	}
	if st := late[0].state(); len(st.clips) == 0 {
		t.Error("a late viewer's keyframe has no ClipRect")
	}
}

// A viewer in step gets each Copy as the helper sent it, never the moved images again; 20 of
// them get the same bytes.
func TestCopiesInStepAreCopies(t *testing.T) {
	e := newEnv(t, Config{})
	tr := newTruth(256, 192)
	var cs []*client
	cs = append(cs, e.dial("v0", "watch", ""))
	f := e.helper()
	f.send(tr.screen)
	f.send(tr.rect(0, 0, 256, 192, 4096))
	f.send(FrameEnd{Seq: 1})
	for i := 1; i < 20; i++ {
		cs = append(cs, e.dial(fmt.Sprintf("v%d", i), "watch", ""))
	}
	for _, c := range cs {
		c.wait("the first keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })
	}
	before, base := make([]int, len(cs)), make([]int, len(cs))
	for i, c := range cs {
		st := c.state()
		before[i], base[i] = st.bytes, st.frameEnds
	}
	for i := range 50 { // a window dragged right and back, the uncovered strip redrawn
		x := 10 + (i%10)*8
		if (i/10)%2 == 1 {
			x = 90 - (i%10)*8
		}
		dx := 8
		if (i/10)%2 == 1 {
			dx = -8
		}
		f.send(tr.copy(x, 40, x+dx, 40, 100, 80))
		f.send(tr.rect(min(x, x+dx+100), 40, 8, 80, 16))
		f.send(FrameEnd{Seq: uint32(i + 2)})
		for j, c := range cs { // in lockstep: every viewer gets every frame
			c.wait("the frame", func(st *viewState) bool { return st.frameEnds > base[j]+i })
		}
	}
	for i, c := range cs {
		st := c.state()
		converged(t, c, tr, "viewer")
		if st.copies != 50 || len(st.clips) != 0 {
			t.Errorf("viewer %d: %d copies, %d ClipRects; want 50 copies and none", i, st.copies, len(st.clips))
		}
		if n := st.bytes - before[i]; n > 50*100 {
			t.Errorf("viewer %d: 50 moves cost %d bytes", i, n)
		}
	}
}

// A viewer that falls behind (its window full while the helper's frames keep coming) makes
// the gateway tell the helper how far, so the helper lowers its quality; once the viewer
// catches up the gateway says Lag 0 again.
func TestLagFollowsTheSlowestViewer(t *testing.T) {
	e := newEnv(t, Config{})
	v := e.dialOpts("slow", "watch", "", false)
	f := e.helper()
	tr := newTruth(256, 256)
	f.send(tr.screen)
	send := func(n int) {
		for range n {
			f.send(tr.rect(0, 0, 64, 64, 64))
			f.send(FrameEnd{})
		}
	}
	lag := func(what string, ok func(uint8) bool) uint8 {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			send(1)
			select {
			case m := <-f.in:
				if l, isLag := m.(Lag); isLag && ok(l.Frames) {
					return l.Frames
				}
			case <-deadline:
				t.Fatalf("the helper was never told %s", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	got := lag("the viewer is behind", func(n uint8) bool { return n >= 3 })
	if n := v.state().frameEnds; n != DefaultWindow {
		t.Errorf("the viewer that does not ack got %d frames, want its window (%d)", n, DefaultWindow)
	}
	// The viewer catches up: acks what it has and every frame from now on.
	v.mu.Lock()
	v.ack = true
	seq := v.st.lastSeq
	v.mu.Unlock()
	v.send(Ack{Seq: seq})
	lag("the viewer caught up (Lag 0)", func(n uint8) bool { return n == 0 })
	t.Logf("Lag %d while the viewer was behind, then 0", got)
}
