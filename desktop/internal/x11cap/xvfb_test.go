package x11cap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	_ "image/jpeg"
	_ "image/png"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/desktop/internal/palette"
	"github.com/porthole/porthole/internal/testenv"
)

func init() {
	// xgb logs a missing ~/.Xauthority on every connection.
	xgb.Logger = log.New(bytes.NewBuffer(nil), "", 0)
	xgb.Logger.SetOutput(discard{})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startXvfb starts a private Xvfb of w×h (display number chosen by Xvfb itself through -displayfd, no
// TCP, no abstract socket) and returns its display name; the test's cleanup kills it.
func startXvfb(t testing.TB, w, h int) string {
	t.Helper()
	bin := testenv.LookPath(t, "Xvfb")
	r, wp, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "-displayfd", "3", "-screen", "0", fmt.Sprintf("%dx%dx24", w, h),
		"-noreset", "-nolisten", "tcp", "-nolisten", "local")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + cmd.Dir, "PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{wp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		wp.Close()
		t.Fatalf("start Xvfb: %v", err)
	}
	wp.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			t.Fatalf("Xvfb gave no display number: %s", stderr.String())
		}
		return ":" + n
	case <-time.After(15 * time.Second):
		t.Fatalf("Xvfb did not start in 15 s: %s", stderr.String())
	}
	return ""
}

// painter is a test program drawing on the display through its own connection.
type painter struct {
	t      testing.TB
	conn   *xgb.Conn
	screen *xproto.ScreenInfo
	win    xproto.Window
	gc     xproto.Gcontext
	w, h   int
}

func newPainter(t testing.TB, display string) *painter {
	t.Helper()
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s := xproto.Setup(conn).DefaultScreen(conn)
	p := &painter{t: t, conn: conn, screen: s, w: int(s.WidthInPixels), h: int(s.HeightInPixels)}
	p.win, _ = xproto.NewWindowId(conn)
	if err := xproto.CreateWindowChecked(conn, s.RootDepth, p.win, s.Root, 0, 0, uint16(p.w), uint16(p.h), 0,
		xproto.WindowClassInputOutput, s.RootVisual, xproto.CwBackPixel|xproto.CwOverrideRedirect,
		[]uint32{0xffffff, 1}).Check(); err != nil {
		t.Fatal(err)
	}
	font, _ := xproto.NewFontId(conn)
	if err := xproto.OpenFontChecked(conn, font, uint16(len("fixed")), "fixed").Check(); err != nil {
		t.Fatalf("open font fixed: %v", err)
	}
	p.gc, _ = xproto.NewGcontextId(conn)
	xproto.CreateGC(conn, p.gc, xproto.Drawable(p.win), xproto.GcForeground|xproto.GcBackground|xproto.GcFont,
		[]uint32{0, 0xffffff, uint32(font)})
	xproto.MapWindow(conn, p.win)
	p.sync()
	return p
}

// sync waits until the server has processed every request so far.
func (p *painter) sync() {
	if _, err := xproto.GetInputFocus(p.conn).Reply(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *painter) fill(rgb uint32, x, y, w, h int) {
	xproto.ChangeGC(p.conn, p.gc, xproto.GcForeground, []uint32{rgb})
	xproto.PolyFillRectangle(p.conn, xproto.Drawable(p.win), p.gc,
		[]xproto.Rectangle{{X: int16(x), Y: int16(y), Width: uint16(w), Height: uint16(h)}})
	p.sync()
}

func (p *painter) text(x, y int, s string) {
	xproto.ChangeGC(p.conn, p.gc, xproto.GcForeground, []uint32{0x202020})
	xproto.ImageText8(p.conn, byte(len(s)), xproto.Drawable(p.win), p.gc, int16(x), int16(y), s)
	p.sync()
}

// put uploads BGRX pixels (w×h) to drawable d at x, y in strips that fit one request.
func (p *painter) put(d xproto.Drawable, pix []byte, x, y, w, h int) {
	rows := max(1, 200000/(w*4))
	for r := 0; r < h; r += rows {
		n := min(rows, h-r)
		xproto.PutImage(p.conn, xproto.ImageFormatZPixmap, d, p.gc, uint16(w), uint16(n), int16(x), int16(y+r), 0,
			24, pix[r*w*4:(r+n)*w*4])
	}
	p.sync()
}

// pixmaps uploads n full-screen noise images to the server once; show copies one to the window in a
// single request, so a frame is never captured half drawn and the test process spends almost nothing.
func (p *painter) pixmaps(n int) []xproto.Pixmap {
	var out []xproto.Pixmap
	for i := range n {
		pm, _ := xproto.NewPixmapId(p.conn)
		xproto.CreatePixmap(p.conn, p.screen.RootDepth, pm, xproto.Drawable(p.win), uint16(p.w), uint16(p.h))
		p.put(xproto.Drawable(pm), noise(p.w, p.h, uint64(i+1)), 0, 0, p.w, p.h)
		out = append(out, pm)
	}
	return out
}

func (p *painter) show(pm xproto.Pixmap) {
	xproto.CopyArea(p.conn, xproto.Drawable(pm), xproto.Drawable(p.win), p.gc, 0, 0, 0, 0, uint16(p.w), uint16(p.h))
	p.sync()
}

// capture reads the screen directly (the reference for the reconstruction).
func (p *painter) capture() []byte {
	r, err := xproto.GetImage(p.conn, xproto.ImageFormatZPixmap, xproto.Drawable(p.screen.Root), 0, 0,
		uint16(p.w), uint16(p.h), 0xffffffff).Reply()
	if err != nil {
		p.t.Fatal(err)
	}
	return r.Data[:p.w*p.h*4]
}

// noise returns a w×h BGRX image of smooth colour blobs plus fine detail (video-like content).
func noise(w, h int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	fx, fy, ph := rng.Float64()*0.05+0.01, rng.Float64()*0.05+0.01, rng.Float64()*6
	pix := make([]byte, w*h*4)
	for y := range h {
		for x := range w {
			i := (y*w + x) * 4
			pix[i] = byte(128 + 100*math.Sin(float64(x)*fx+ph))
			pix[i+1] = byte(128 + 100*math.Sin(float64(y)*fy+ph))
			pix[i+2] = byte(128 + 60*math.Sin(float64(x+y)*fx*0.7) + float64(rng.IntN(16)))
		}
	}
	return pix
}

// model is a viewer's reconstruction of the screen from frames.
type model struct {
	w, h int
	pix  []byte // BGRX
}

func (m *model) apply(t testing.TB, f Frame) {
	t.Helper()
	if f.Resized || m.pix == nil || f.Width != m.w || f.Height != m.h {
		if !f.Keyframe {
			t.Fatalf("size %dx%d → %dx%d without a keyframe", m.w, m.h, f.Width, f.Height)
		}
		m.w, m.h, m.pix = f.Width, f.Height, make([]byte, f.Width*f.Height*4)
	}
	for _, cp := range f.Copies {
		if cp.W <= 0 || cp.H <= 0 || cp.X < 0 || cp.Y < 0 || cp.SrcX < 0 || cp.SrcY < 0 ||
			cp.X+cp.W > m.w || cp.Y+cp.H > m.h || cp.SrcX+cp.W > m.w || cp.SrcY+cp.H > m.h {
			t.Fatalf("copy %+v outside %dx%d", cp, m.w, m.h)
		}
		tmp := make([]byte, cp.W*cp.H*4)
		for y := range cp.H {
			copy(tmp[y*cp.W*4:(y+1)*cp.W*4], m.pix[((cp.SrcY+y)*m.w+cp.SrcX)*4:])
		}
		for y := range cp.H {
			copy(m.pix[((cp.Y+y)*m.w+cp.X)*4:((cp.Y+y)*m.w+cp.X+cp.W)*4], tmp[y*cp.W*4:])
		}
	}
	for _, r := range f.Rects {
		if r.X < 0 || r.Y < 0 || r.W <= 0 || r.H <= 0 || r.X+r.W > m.w || r.Y+r.H > m.h {
			t.Fatalf("rect %d,%d %dx%d outside %dx%d", r.X, r.Y, r.W, r.H, m.w, m.h)
		}
		if r.Enc != EncJPEG && r.Enc != EncPNG && r.Enc != EncPalette || r.Enc != EncJPEG && r.Scaled {
			t.Fatalf("rect encoding %d scaled=%v", r.Enc, r.Scaled)
		}
		if r.Enc == EncPalette {
			rgba, err := palette.Decode(r.Data, r.W, r.H)
			if err != nil {
				t.Fatalf("rect %d,%d %dx%d: %v", r.X, r.Y, r.W, r.H, err)
			}
			for y := range r.H {
				for x := range r.W {
					s := rgba[(y*r.W+x)*4:]
					d := m.pix[((r.Y+y)*m.w+r.X+x)*4:]
					d[0], d[1], d[2] = s[2], s[1], s[0]
				}
			}
			continue
		}
		img, _, err := image.Decode(bytes.NewReader(r.Data))
		if err != nil {
			t.Fatalf("rect %d,%d %dx%d: %v", r.X, r.Y, r.W, r.H, err)
		}
		jw, jh := r.W, r.H
		if r.Scaled {
			jw, jh = (r.W+1)/2, (r.H+1)/2
		}
		if img.Bounds().Dx() != jw || img.Bounds().Dy() != jh {
			t.Fatalf("rect %dx%d scaled=%v: JPEG is %v", r.W, r.H, r.Scaled, img.Bounds())
		}
		rgba := image.NewRGBA(image.Rect(0, 0, jw, jh))
		draw.Draw(rgba, rgba.Rect, img, img.Bounds().Min, draw.Src)
		for y := range r.H {
			for x := range r.W {
				sx, sy := x, y
				if r.Scaled {
					sx, sy = x/2, y/2
				}
				s := rgba.Pix[sy*rgba.Stride+sx*4:]
				d := m.pix[((r.Y+y)*m.w+r.X+x)*4:]
				d[0], d[1], d[2] = s[2], s[1], s[0]
			}
		}
	}
}

// psnr of two BGRX images over the colour channels (+Inf when equal).
func psnr(a, b []byte) float64 {
	var se float64
	n := 0
	for i := 0; i+3 < len(a) && i+3 < len(b); i += 4 {
		for c := range 3 {
			d := float64(a[i+c]) - float64(b[i+c])
			se += d * d
		}
		n += 3
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/(se/float64(n)))
}

// next calls c.Next with a timeout; ok is false when nothing came.
func next(t testing.TB, c *Capturer, d time.Duration) (Frame, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	f, err := c.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return Frame{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return f, true
}

// settle applies frames until none comes for quiet; it returns the bytes and frames received.
func settle(t testing.TB, c *Capturer, m *model, quiet time.Duration) (bytes, frames int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		f, ok := next(t, c, quiet)
		if !ok {
			return
		}
		m.apply(t, f)
		bytes += f.Bytes()
		frames++
	}
	t.Fatal("the screen never settled")
	return
}

func open(t testing.TB, display string, o Options) *Capturer {
	t.Helper()
	c, err := Open(display, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
