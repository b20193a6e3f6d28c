//go:build !js

package desktop

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFanOut: the gateway fanning a window drag (a Copy, the uncovered strip and a
// FrameEnd per frame) out to 1 and to 20 viewers over real WebSockets, paced by the first
// viewer. The CPU is this process's: the gateway and the viewers' readers; -cpuprofile tells
// them apart.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("viewers=%d", n), func(b *testing.B) {
			e := newEnv(b, Config{})
			tr := newTruth(1920, 1080)
			tr.sent = nil
			v0 := e.dial("v0", "watch", "")
			f := e.helper()
			f.send(tr.screen)
			f.send(tr.rect(0, 0, 1920, 1080, 64<<10))
			f.send(FrameEnd{Seq: 1})
			cs := []*client{v0}
			for i := 1; i < n; i++ {
				cs = append(cs, e.dial(fmt.Sprintf("v%d", i), "watch", ""))
			}
			for _, c := range cs {
				c.mu.Lock()
				c.drop, c.noPix = true, true
				c.mu.Unlock()
				c.wait("the keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })
			}
			frames := max(b.N, 1000)
			strip := Rect{X: 0, Y: 300, W: 8, H: 400, Enc: EncPalette, Data: []byte{0, 0, 0, 0}}
			base := v0.frameEnds()
			b.ResetTimer()
			cpu0, t0 := cpuNow(), time.Now()
			for i := range frames {
				x := 8 * (i % 150)
				strip.X = uint16(x)
				f.send(Copy{SrcX: uint16(x), SrcY: 300, X: uint16(x + 8), Y: 300, W: 640, H: 400})
				f.send(strip)
				f.send(FrameEnd{Seq: uint32(i + 2)})
				for v0.frameEnds() <= base+i {
					time.Sleep(50 * time.Microsecond)
				}
			}
			cpu, el := cpuNow()-cpu0, time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(frames), "µs-cpu/frame")
			b.ReportMetric(float64(frames)/el.Seconds(), "frames/s")
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *client) frameEnds() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.frameEnds
}
