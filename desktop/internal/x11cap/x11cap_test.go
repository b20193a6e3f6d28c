package x11cap

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
)

// scene draws desktop-like content: a title bar, coloured panels and lines of text.
func scene(p *painter) {
	p.fill(0xf0f0f0, 0, 0, p.w, p.h)
	p.fill(0x3060a0, 0, 0, p.w, 28)
	p.fill(0xffffff, 40, 60, p.w-300, p.h-120)
	p.fill(0xe0c040, p.w-220, 60, 180, 300)
	for i := range (p.h - 160) / 16 {
		p.text(50, 80+16*i, fmt.Sprintf("%03d  func main() { fmt.Println(\"hello, porthole\") } // line %d", i, i))
	}
}

func TestReconstructionMatchesScreen(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"shm_damage", Options{}},
		{"plain_getimage_poll", Options{NoSHM: true, NoDamage: true, PollInterval: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startXvfb(t, 1280, 800)
			p := newPainter(t, d)
			scene(p)
			c := open(t, d, tc.opts)
			if tc.opts == (Options{}) && (!c.UsesSHM() || !c.UsesDamage()) {
				t.Fatalf("SHM %v Damage %v on Xvfb: want both", c.UsesSHM(), c.UsesDamage())
			}
			if tc.opts.NoSHM && c.UsesSHM() || tc.opts.NoDamage && c.UsesDamage() {
				t.Fatal("fallback options ignored")
			}
			var m model
			f, ok := next(t, c, 5*time.Second)
			if !ok || !f.Keyframe || f.Width != 1280 || f.Height != 800 {
				t.Fatalf("first frame: ok=%v keyframe=%v %dx%d", ok, f.Keyframe, f.Width, f.Height)
			}
			m.apply(t, f)
			if v := psnr(m.pix, p.capture()); v < 45 {
				t.Errorf("keyframe PSNR %.1f dB < 45", v)
			}
			// Changes: a moving block and a growing text, checked frame by frame while changing.
			for i := range 8 {
				p.fill(0xff0000+uint32(i*20), 100+i*60, 200, 120, 90)
				p.text(60, 500+i*16, strings.Repeat("typed ", 10+i))
				// The frames of this change (a poll may split it), before any settle refresh.
				if _, n := settle(t, c, &m, 150*time.Millisecond); n == 0 {
					t.Fatalf("change %d: no frame", i)
				}
				// While changing: within JPEG tolerance.
				if v := psnr(m.pix, p.capture()); v < 30 {
					t.Errorf("change %d: PSNR %.1f dB < 30", i, v)
				}
			}
			settle(t, c, &m, time.Second)
			v := psnr(m.pix, p.capture())
			t.Logf("settled PSNR %.1f dB", v)
			if v < 45 {
				t.Errorf("settled PSNR %.1f dB < 45", v)
			}
		})
	}
}

func TestIdleScreenCostsNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		maxCPU  time.Duration
		polling bool
	}{
		{"damage", Options{}, 20 * time.Millisecond, false},
		{"poll_fallback", Options{NoDamage: true}, 300 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startXvfb(t, 1280, 800)
			p := newPainter(t, d)
			scene(p)
			c := open(t, d, tc.opts)
			var m model
			settle(t, c, &m, 700*time.Millisecond)
			before := cpuTime(t)
			start := time.Now()
			f, ok := next(t, c, time.Second)
			if ok {
				t.Fatalf("idle screen produced a frame: %d rects, %d bytes, cursor %v pointer %v",
					len(f.Rects), f.Bytes(), f.Cursor != nil, f.Pointer != nil)
			}
			if el := time.Since(start); el < 950*time.Millisecond {
				t.Fatalf("Next returned after %v", el)
			}
			cpu := cpuTime(t) - before
			t.Logf("CPU over 1 s idle: %v", cpu)
			if cpu > tc.maxCPU {
				t.Errorf("idle CPU %v > %v", cpu, tc.maxCPU)
			}
		})
	}
}

func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestOneLineChangeIsSmall(t *testing.T) {
	d := startXvfb(t, 1280, 800)
	p := newPainter(t, d)
	scene(p)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 700*time.Millisecond)
	kf, err := c.Keyframe()
	if err != nil {
		t.Fatal(err)
	}
	// A line of output appears (first at change quality, then the settle refresh: both count).
	p.text(50, 712, "$ go test ./desktop/... -run TestOneLineChangeIsSmall -count=1   ok  0.42s")
	total, _ := settle(t, c, &m, time.Second)
	pct := 100 * float64(total) / float64(kf.Bytes())
	t.Logf("one line: %d bytes, keyframe %d bytes: %.2f %%", total, kf.Bytes(), pct)
	if total == 0 || pct > 5 {
		t.Errorf("a one-line change cost %d bytes, %.2f %% of a keyframe (want > 0, ≤ 5 %%)", total, pct)
	}
	if v := psnr(m.pix, p.capture()); v < 45 {
		t.Errorf("settled PSNR %.1f dB < 45", v)
	}
}

func TestCursorShapeAndPosition(t *testing.T) {
	d := startXvfb(t, 1280, 800)
	p := newPainter(t, d)
	c := open(t, d, Options{})
	f, _ := next(t, c, 5*time.Second)
	if f.Cursor == nil || f.Pointer == nil {
		t.Fatalf("keyframe without cursor (%v) or pointer (%v)", f.Cursor != nil, f.Pointer != nil)
	}
	first := *f.Cursor
	if len(first.RGBA) != first.W*first.H*4 || first.W == 0 {
		t.Fatalf("cursor %dx%d with %d bytes", first.W, first.H, len(first.RGBA))
	}
	// A window with another cursor (the "hand2" glyph), and the pointer moved into it.
	font, _ := xproto.NewFontId(p.conn)
	xproto.OpenFont(p.conn, font, uint16(len("cursor")), "cursor")
	cur, _ := xproto.NewCursorId(p.conn)
	xproto.CreateGlyphCursor(p.conn, cur, font, font, 60, 61, 0, 0, 0, 0xffff, 0xffff, 0xffff)
	xproto.ChangeWindowAttributes(p.conn, p.win, xproto.CwCursor, []uint32{uint32(cur)})
	xproto.WarpPointer(p.conn, 0, p.screen.Root, 0, 0, 0, 0, 321, 234)
	p.sync()
	var shape *Cursor
	var pos *Point
	for deadline := time.Now().Add(3 * time.Second); (shape == nil || pos == nil) && time.Now().Before(deadline); {
		f, ok := next(t, c, time.Second)
		if !ok {
			break
		}
		if len(f.Rects) > 0 {
			t.Errorf("a cursor change produced %d image rects: the cursor must not be in the frames", len(f.Rects))
		}
		if f.Cursor != nil {
			shape = f.Cursor
		}
		if f.Pointer != nil {
			pos = f.Pointer
		}
	}
	if shape == nil || shape.Serial == first.Serial {
		t.Fatalf("no new cursor shape reported (got %+v)", shape)
	}
	if pos == nil || *pos != (Point{321, 234}) {
		t.Fatalf("pointer %+v, want 321,234", pos)
	}
	opaque := 0
	for i := 3; i < len(shape.RGBA); i += 4 {
		if shape.RGBA[i] != 0 {
			opaque++
		}
	}
	if opaque == 0 {
		t.Fatal("cursor image fully transparent")
	}
	// Input moving the pointer within the same window: reported after NotePointerInput, shape unchanged.
	xproto.WarpPointer(p.conn, 0, p.screen.Root, 0, 0, 0, 0, 400, 300)
	p.sync()
	c.NotePointerInput()
	f, ok := next(t, c, time.Second)
	if !ok || f.Pointer == nil || *f.Pointer != (Point{400, 300}) || f.Cursor != nil {
		t.Fatalf("after NotePointerInput: ok=%v pointer=%+v cursor changed=%v", ok, f.Pointer, f.Cursor != nil)
	}
}

func TestResizeGivesKeyframe(t *testing.T) {
	d := startXvfb(t, 1280, 800)
	p := newPainter(t, d)
	scene(p)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 500*time.Millisecond)
	if err := c.Resize(1024, 640); err != nil {
		t.Fatal(err)
	}
	var f Frame
	for deadline := time.Now().Add(5 * time.Second); !f.Resized && time.Now().Before(deadline); {
		f, _ = next(t, c, time.Second)
	}
	if !f.Resized || !f.Keyframe || f.Width != 1024 || f.Height != 640 {
		t.Fatalf("after Resize: resized=%v keyframe=%v %dx%d", f.Resized, f.Keyframe, f.Width, f.Height)
	}
	m.apply(t, f)
	p.w, p.h = 1024, 640
	if v := psnr(m.pix, p.capture()); v < 45 {
		t.Errorf("resized keyframe PSNR %.1f dB", v)
	}
	// Changes after the resize are captured at the new size.
	p.fill(0x00ff00, 900, 500, 100, 100)
	settle(t, c, &m, 700*time.Millisecond)
	if v := psnr(m.pix, p.capture()); v < 45 {
		t.Errorf("after a change at the new size: PSNR %.1f dB", v)
	}
	if err := c.Resize(4000, 3000); !errors.Is(err, ErrResize) {
		t.Errorf("Resize beyond Xvfb's maximum: %v, want ErrResize", err)
	}
	if err := c.Resize(0, 100); !errors.Is(err, ErrScreenSize) {
		t.Errorf("Resize(0, 100): %v, want ErrScreenSize", err)
	}
}

func TestFullScreenMotionHalvesResolution(t *testing.T) {
	d := startXvfb(t, 1280, 800)
	p := newPainter(t, d)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 300*time.Millisecond)
	pm := p.pixmaps(2)
	scaled := 0
	for i := range 10 {
		p.show(pm[i%2])
		f, ok := next(t, c, 2*time.Second)
		if !ok {
			t.Fatalf("motion frame %d: nothing", i)
		}
		m.apply(t, f)
		for _, r := range f.Rects {
			if r.Scaled {
				scaled++
				break
			}
		}
		if v := psnr(m.pix, p.capture()); v < 22 {
			t.Errorf("motion frame %d: PSNR %.1f dB", i, v)
		}
	}
	if scaled < 5 {
		t.Errorf("%d of 10 full-screen motion frames were half resolution, want ≥ 5", scaled)
	}
	settle(t, c, &m, time.Second)
	if v := psnr(m.pix, p.capture()); v < 40 || math.IsNaN(v) {
		t.Errorf("settled after motion: PSNR %.1f dB < 40", v)
	}
}

func TestOpenBadDisplay(t *testing.T) {
	if _, err := Open(":4093", Options{}); err == nil {
		t.Fatal("Open of a display nobody serves succeeded")
	}
}
