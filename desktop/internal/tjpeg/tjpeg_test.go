package tjpeg

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"math"
	"testing"
)

// pattern returns a w×h BGRX image with smooth gradients and a sharp checkerboard, padded to stride.
func pattern(w, h, stride int) []byte {
	pix := make([]byte, stride*h)
	for y := range h {
		for x := range w {
			i := y*stride + x*4
			pix[i] = byte(x * 255 / max(w-1, 1))   // B
			pix[i+1] = byte(y * 255 / max(h-1, 1)) // G
			pix[i+2] = 40                          // R
			if (x/8+y/8)%2 == 0 && x < w/2 {
				pix[i], pix[i+1], pix[i+2] = 255, 255, 255
			}
		}
	}
	return pix
}

// psnr compares the decoded JPEG with the BGRX source.
func psnr(t *testing.T, img image.Image, pix []byte, w, h, stride int) float64 {
	t.Helper()
	if img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Fatalf("decoded %v, want %dx%d", img.Bounds(), w, h)
	}
	var se float64
	for y := range h {
		for x := range w {
			r, g, b, _ := img.At(x, y).RGBA()
			i := y*stride + x*4
			for _, d := range []float64{float64(r>>8) - float64(pix[i+2]), float64(g>>8) - float64(pix[i+1]), float64(b>>8) - float64(pix[i])} {
				se += d * d
			}
		}
	}
	mse := se / float64(w*h*3)
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}

func TestEncodeBGRXRoundTrip(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const w, h, stride = 200, 120, 1000 // stride wider than the row: a sub-rectangle of a bigger screen
	pix := pattern(w, h, stride)
	var sizes []int
	for _, c := range []struct {
		q       int
		sub     Subsampling
		minPSNR float64
	}{{40, S420, 24}, {95, S444, 36}} {
		out, err := e.EncodeBGRX(pix, w, h, stride, c.q, c.sub)
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		p := psnr(t, img, pix, w, h, stride)
		t.Logf("q%d %v: %d bytes, PSNR %.1f dB (turbo=%v)", c.q, c.sub, len(out), p, Turbo)
		if p < c.minPSNR {
			t.Errorf("q%d %v: PSNR %.1f dB < %.0f (colours swizzled or pitch ignored?)", c.q, c.sub, p, c.minPSNR)
		}
		sizes = append(sizes, len(out))
	}
	if sizes[0] >= sizes[1] {
		t.Errorf("q40 4:2:0 gave %d bytes, not fewer than q95 4:4:4's %d", sizes[0], sizes[1])
	}
}

func TestEncodeBGRXRejectsBadGeometry(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pix := make([]byte, 64*64*4)
	for _, g := range [][3]int{{0, 64, 256}, {64, 0, 256}, {64, 64, 100}, {64, 65, 256}, {70000, 1, 280000}} {
		if _, err := e.EncodeBGRX(pix, g[0], g[1], g[2], 80, S420); !errors.Is(err, ErrBadImage) {
			t.Errorf("%v: err %v, want ErrBadImage", g, err)
		}
	}
	e.Close()
	if _, err := e.EncodeBGRX(pix, 64, 64, 256, 80, S420); err == nil {
		t.Error("encode after Close succeeded")
	}
}

func BenchmarkEncode1080p(b *testing.B) {
	e, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	pix := pattern(1920, 1080, 1920*4)
	b.SetBytes(int64(len(pix)))
	for b.Loop() {
		if _, err := e.EncodeBGRX(pix, 1920, 1080, 1920*4, 80, S420); err != nil {
			b.Fatal(err)
		}
	}
}
