package x11cap

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
)

// textPage is a w×h BGRX page of dark glyph-like boxes on white (a window of text).
func textPage(w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	pix := make([]byte, w*h*4)
	for i := range pix {
		pix[i] = 0xff
	}
	for row := 0; row+18 <= h; row += 18 {
		for col := 8; col+9 <= w-8; col += 9 {
			if rng.IntN(9) == 0 {
				continue
			}
			for y := row + 4; y < row+15; y++ {
				for x := col; x < col+6; x++ {
					if rng.IntN(3) != 0 {
						o := (y*w + x) * 4
						pix[o], pix[o+1], pix[o+2] = 60, 20, 20
					}
				}
			}
		}
	}
	return pix
}

// topWindow creates a mapped override-redirect window at x, y showing pix as its background.
func (p *painter) topWindow(x, y, w, h int, pix []byte) xproto.Window {
	pm, _ := xproto.NewPixmapId(p.conn)
	xproto.CreatePixmap(p.conn, p.screen.RootDepth, pm, xproto.Drawable(p.win), uint16(w), uint16(h))
	p.put(xproto.Drawable(pm), pix, 0, 0, w, h)
	win, _ := xproto.NewWindowId(p.conn)
	xproto.CreateWindow(p.conn, p.screen.RootDepth, win, p.screen.Root, int16(x), int16(y), uint16(w), uint16(h), 0,
		xproto.WindowClassInputOutput, p.screen.RootVisual, xproto.CwBackPixmap|xproto.CwOverrideRedirect, []uint32{uint32(pm), 1})
	xproto.MapWindow(p.conn, win)
	p.sync()
	return win
}

func (p *painter) move(win xproto.Window, x, y int) {
	xproto.ConfigureWindow(p.conn, win, xproto.ConfigWindowX|xproto.ConfigWindowY, []uint32{uint32(x), uint32(y)})
	p.sync()
}

// A window dragged across the screen travels as copies of the viewer's picture: the
// reconstruction stays exact, and the bytes are what the move uncovered, not the window.
func TestMovedWindowIsCopied(t *testing.T) {
	d := startXvfb(t, 1280, 800)
	p := newPainter(t, d)
	scene(p)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 500*time.Millisecond)
	win := p.topWindow(100, 200, 480, 300, textPage(480, 300, 1))
	shown, _ := settle(t, c, &m, 500*time.Millisecond)
	if v := psnr(m.pix, p.capture()); !math.IsInf(v, 1) {
		t.Fatalf("the window's first picture: PSNR %.1f dB, want exact", v)
	}
	moved, copies := 0, 0
	for i := 1; i <= 40; i++ {
		x, y := 100+i*13, 200+(i%7)*3-(i%3)*5 // right, and up and down
		p.move(win, x, y)
		for {
			f, ok := next(t, c, 150*time.Millisecond)
			if !ok {
				break
			}
			m.apply(t, f)
			moved += f.Bytes()
			copies += len(f.Copies)
		}
		if v := psnr(m.pix, p.capture()); !math.IsInf(v, 1) {
			t.Fatalf("move %d: PSNR %.1f dB, want exact", i, v)
		}
	}
	t.Logf("window shown: %d bytes; 40 moves: %d bytes, %d copies", shown, moved, copies)
	if copies < 40 {
		t.Errorf("40 moves made %d copies", copies)
	}
	// Each move sends what it uncovered (text of the scene behind), never the window again.
	if moved > 40*shown/5 {
		t.Errorf("40 moves cost %d bytes, over a fifth of sending the window 40 times (%d each)", moved, shown)
	}
}

// Rows of a moved window that do not match the viewer's picture (another window over it, content
// repainted during the move) are encoded; the reconstruction is still exact.
func TestMovedWindowPartlyCoveredOrRepainted(t *testing.T) {
	d := startXvfb(t, 1024, 640)
	p := newPainter(t, d)
	scene(p)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 500*time.Millisecond)
	win := p.topWindow(50, 100, 400, 260, textPage(400, 260, 2))
	cover := p.topWindow(300, 150, 120, 80, textPage(120, 80, 3)) // stays on top
	settle(t, c, &m, 500*time.Millisecond)
	copies := 0
	for i := 1; i <= 12; i++ {
		p.move(win, 50+i*20, 100+i*4)
		if i%4 == 0 { // the window's content changes as it moves
			xproto.ChangeWindowAttributes(p.conn, win, xproto.CwBackPixel, []uint32{uint32(0x102030 * i)})
			xproto.ClearArea(p.conn, false, win, 0, 0, 0, 0)
			p.sync()
		}
		for {
			f, ok := next(t, c, 150*time.Millisecond)
			if !ok {
				break
			}
			m.apply(t, f)
			copies += len(f.Copies)
		}
		if v := psnr(m.pix, p.capture()); !math.IsInf(v, 1) {
			t.Fatalf("move %d: PSNR %.1f dB, want exact", i, v)
		}
	}
	_ = cover
	if copies == 0 {
		t.Error("no copies at all")
	}
}

// Pixels sent at low quality keep their refresh when a copy carries them elsewhere: once the
// screen settles the reconstruction is near-exact.
func TestCopiedLowQualitySettles(t *testing.T) {
	d := startXvfb(t, 1024, 640)
	p := newPainter(t, d)
	c := open(t, d, Options{})
	var m model
	settle(t, c, &m, 500*time.Millisecond)
	// A photo-like window (too many colours for a palette) changing fast: JPEG at low quality.
	win := p.topWindow(40, 40, 300, 200, noise(300, 200, 1))
	for i := range 6 {
		xproto.ClearArea(p.conn, false, win, 0, 0, 0, 0)
		p.put(xproto.Drawable(win), noise(300, 200, uint64(i+2)), 0, 0, 300, 200)
		f, ok := next(t, c, time.Second)
		if ok {
			m.apply(t, f)
		}
	}
	copies := 0
	for i := 1; i <= 5; i++ {
		p.move(win, 40+i*60, 40+i*30)
		for {
			f, ok := next(t, c, 100*time.Millisecond)
			if !ok {
				break
			}
			m.apply(t, f)
			copies += len(f.Copies)
		}
	}
	settle(t, c, &m, time.Second)
	if v := psnr(m.pix, p.capture()); v < 45 {
		t.Errorf("settled after moving a lossy window: PSNR %.1f dB < 45 (%d copies)", v, copies)
	}
}
