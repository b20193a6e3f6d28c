package x11cap

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	"runtime"
	"testing"
	"time"

	"github.com/kbinani/screenshot"
)

// benchFrames is the number of frames a benchmark measures at least (make bench runs -benchtime 1x).
const benchFrames = 60

// motion alternates full-screen images with CopyArea and captures each: the CPU per changed frame is
// this process's (capture, diff, encode; the X server's drawing is not counted).
func motion(b *testing.B, o Options) (cpuPerFrame, wallPerFrame time.Duration, bytesPerFrame float64, scaled int) {
	d := startXvfb(b, 1920, 1080)
	p := newPainter(b, d)
	pm := p.pixmaps(3)
	o.MaxFPS = -1
	c := open(b, d, o)
	next(b, c, 5*time.Second) // keyframe
	for i := range 4 {        // warm up: past the first changes, into the steady state
		p.show(pm[i%3])
		next(b, c, 5*time.Second)
	}
	n := max(b.N, benchFrames)
	total := 0
	b.ResetTimer()
	cpu0, t0 := cpuTime(b), time.Now()
	for i := range n {
		p.show(pm[i%3])
		f, ok := next(b, c, 5*time.Second)
		if !ok || len(f.Rects) == 0 {
			b.Fatalf("frame %d: nothing captured", i)
		}
		total += f.Bytes()
		if f.Rects[0].Scaled {
			scaled++
		}
	}
	cpu, wall := cpuTime(b)-cpu0, time.Since(t0)
	b.StopTimer()
	return cpu / time.Duration(n), wall / time.Duration(n), float64(total) / float64(n), scaled
}

func BenchmarkDesktopFrame(b *testing.B) {
	b.Run("full_res", func(b *testing.B) {
		cpu, wall, size, _ := motion(b, Options{NoHalfRes: true})
		b.ReportMetric(float64(cpu.Microseconds())/1000, "ms-cpu/frame")
		b.ReportMetric(float64(wall.Microseconds())/1000, "ms-wall/frame")
		b.ReportMetric(size/1024, "KB/frame")
	})
	b.Run("adaptive", func(b *testing.B) {
		cpu, wall, size, scaled := motion(b, Options{})
		b.ReportMetric(float64(cpu.Microseconds())/1000, "ms-cpu/frame")
		b.ReportMetric(float64(wall.Microseconds())/1000, "ms-wall/frame")
		b.ReportMetric(size/1024, "KB/frame")
		b.ReportMetric(float64(scaled), "half-res-frames")
	})
}

// BenchmarkDesktopMotion: full-screen motion with the pipeline on one core (GOMAXPROCS=1).
func BenchmarkDesktopMotion(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cpu, wall, size, _ := motion(b, Options{})
	b.ReportMetric(1/wall.Seconds(), "fps")
	b.ReportMetric(1/cpu.Seconds(), "fps-cpu-bound")
	b.ReportMetric(size/1024, "KB/frame")
}

// BenchmarkDesktopTypedLine: a 1080p desktop full of text, one line typed at 10 characters a second,
// then settled; and the same line appearing at once. Both against a keyframe of the whole screen.
func BenchmarkDesktopTypedLine(b *testing.B) {
	d := startXvfb(b, 1920, 1080)
	p := newPainter(b, d)
	scene(p)
	c := open(b, d, Options{})
	var m model
	settle(b, c, &m, 600*time.Millisecond)
	b.ResetTimer()
	kf, err := c.Keyframe()
	if err != nil {
		b.Fatal(err)
	}
	line := "$ go test -run '^$' -bench . ./desktop/internal/x11cap/ | tee bench.txt"
	typed := 0
	for i := 1; i <= len(line); i++ {
		p.text(50, 1000, line[:i])
		deadline := time.Now().Add(100 * time.Millisecond)
		for {
			f, ok := next(b, c, time.Until(deadline))
			if !ok {
				break
			}
			m.apply(b, f)
			typed += f.Bytes()
		}
	}
	n, _ := settle(b, c, &m, time.Second)
	typed += n
	p.text(50, 1016, line)
	once, _ := settle(b, c, &m, time.Second)
	b.StopTimer()
	b.ReportMetric(float64(kf.Bytes()), "full-bytes")
	b.ReportMetric(float64(typed), "line-bytes")
	b.ReportMetric(100*float64(typed)/float64(kf.Bytes()), "line-%")
	b.ReportMetric(float64(once), "oneline-bytes")
	b.ReportMetric(100*float64(once)/float64(kf.Bytes()), "oneline-%")
	b.ReportMetric(psnr(m.pix, p.capture()), "settled-dB")
}

// BenchmarkDesktopIdle: one second of an idle screen.
func BenchmarkDesktopIdle(b *testing.B) {
	d := startXvfb(b, 1920, 1080)
	p := newPainter(b, d)
	scene(p)
	c := open(b, d, Options{})
	var m model
	settle(b, c, &m, 600*time.Millisecond)
	b.ResetTimer()
	cpu0 := cpuTime(b)
	sent := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if f, ok := next(b, c, time.Until(end)); ok {
			sent += f.Bytes()
		}
	}
	b.ReportMetric(float64(sent), "B/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000, "ms-cpu/s")
}

// BenchmarkDesktopOctopBaseline: the design card's pipeline, each tick kbinani/screenshot of the full
// screen + image/jpeg q80 + base64 in JSON, on the same 1080p content.
func BenchmarkDesktopOctopBaseline(b *testing.B) {
	d := startXvfb(b, 1920, 1080)
	p := newPainter(b, d)
	pm := p.pixmaps(3)
	b.Setenv("DISPLAY", d)
	n := max(b.N, benchFrames/3)
	total := 0
	var buf bytes.Buffer
	b.ResetTimer()
	cpu0, t0 := cpuTime(b), time.Now()
	for i := range n {
		p.show(pm[i%3])
		img, err := screenshot.CaptureRect(image.Rect(0, 0, 1920, 1080))
		if err != nil {
			b.Fatalf("screenshot: %v", err)
		}
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
			b.Fatal(err)
		}
		msg, err := json.Marshal(map[string]any{"type": "frame", "data": base64.StdEncoding.EncodeToString(buf.Bytes())})
		if err != nil {
			b.Fatal(err)
		}
		total += len(msg)
	}
	cpu, wall := cpuTime(b)-cpu0, time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "ms-cpu/frame")
	b.ReportMetric(float64(wall.Microseconds())/1000/float64(n), "ms-wall/frame")
	b.ReportMetric(float64(total)/1024/float64(n), "KB/frame")
	// At its 10 fps, an idle screen still costs 10 full frames a second.
	b.ReportMetric(10*float64(total)/float64(n), "idle-B/s")
}
