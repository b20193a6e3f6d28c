package palette

import (
	"bytes"
	"compress/flate"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// bgrx returns a w×h BGRX image (stride w·4+pad) whose pixels take n colours.
func bgrx(rng *rand.Rand, w, h, pad, n int) ([]byte, int) {
	stride := w*4 + pad
	cols := make([][3]byte, n)
	for i := range cols {
		cols[i] = [3]byte{byte(i * 37), byte(i * 91), byte(i*13 + 5)}
	}
	pix := make([]byte, stride*h)
	for y := range h {
		for x := range w {
			c := cols[rng.IntN(n)]
			if x < n && y == 0 {
				c = cols[x] // every colour at least once
			}
			o := y*stride + 4*x
			pix[o], pix[o+1], pix[o+2], pix[o+3] = c[0], c[1], c[2], 0xaa
		}
	}
	return pix, stride
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e Encoder
	for _, n := range []int{1, 2, 3, 4, 5, 16, 17, 200, 256} {
		for _, sz := range [][2]int{{1, 1}, {7, 3}, {13, 12}, {64, 64}, {333, 17}} {
			w, h := sz[0], sz[1]
			k := min(n, w*h)
			pix, stride := bgrx(rng, w, h, 8, k)
			data, ok := e.Encode([]byte{0xee}, pix, w, h, stride, MaxColours)
			if !ok || data[0] != 0xee {
				t.Fatalf("%d colours %dx%d: ok=%v", k, w, h, ok)
			}
			got, err := Decode(data[1:], w, h)
			if err != nil {
				t.Fatalf("%d colours %dx%d: %v", k, w, h, err)
			}
			for y := range h {
				for x := range w {
					s, d := pix[y*stride+4*x:], got[(y*w+x)*4:]
					if s[2] != d[0] || s[1] != d[1] || s[0] != d[2] || d[3] != 255 {
						t.Fatalf("%d colours %dx%d: pixel %d,%d = %v, want %v", k, w, h, x, y, d[:4], s[:3])
					}
				}
			}
			if k == 1 && len(data) != 1+1+3 {
				t.Errorf("a one-colour region takes %d bytes", len(data)-1)
			}
		}
	}
}

func TestTooManyColours(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pix, stride := bgrx(rng, 40, 40, 0, 40)
	var e Encoder
	if out, ok := e.Encode(nil, pix, 40, 40, stride, 16); ok || len(out) != 0 {
		t.Fatalf("40 colours under a 16-colour cap: ok=%v, %d bytes", ok, len(out))
	}
	// The encoder is reusable after a refusal.
	pix2, _ := bgrx(rng, 40, 40, 0, 3)
	data, ok := e.Encode(nil, pix2, 40, 40, stride, 16)
	if !ok || data[0] != 2 {
		t.Fatalf("3 colours after a refusal: ok=%v n-1=%d", ok, data[0])
	}
}

func TestTextIsSmall(t *testing.T) {
	// Two character cells of a bitmap font (6×13, black on white): what one typed key changes.
	w, h := 12, 13
	pix := make([]byte, w*h*4)
	for i := range pix {
		pix[i] = 0xff
	}
	for y := 2; y < 11; y++ {
		for x := range 5 {
			if (x+y)%3 == 0 || x == 0 {
				o := (y*w + x) * 4
				pix[o], pix[o+1], pix[o+2] = 0, 0, 0
			}
		}
		for x := 6; x < 12; x++ { // the cursor block
			o := (y*w + x) * 4
			pix[o], pix[o+1], pix[o+2] = 0, 0, 0
		}
	}
	var e Encoder
	data, ok := e.Encode(nil, pix, w, h, w*4, MaxColours)
	if !ok || len(data) > 40 {
		t.Fatalf("two text cells: ok=%v, %d bytes (want ≤ 40)", ok, len(data))
	}
}

func TestDecodeRejects(t *testing.T) {
	var e Encoder
	pix := bytes.Repeat([]byte{1, 2, 3, 0, 9, 9, 9, 0}, 64*32/2)
	good, _ := e.Encode(nil, pix, 64, 32, 256, MaxColours) // 2 colours, deflated
	if good[1+6] != Deflate {
		t.Fatalf("a regular 64×32 pattern was not deflated")
	}
	cases := map[string][]byte{
		"empty":             nil,
		"short palette":     {5, 1, 2, 3},
		"fill with rows":    {0, 1, 2, 3, 0},
		"no compression":    {1, 1, 2, 3, 4, 5, 6},
		"bad compression":   {1, 1, 2, 3, 4, 5, 6, 7, 0},
		"raw too short":     {1, 1, 2, 3, 4, 5, 6, Raw, 0xff},
		"raw too long":      append([]byte{1, 1, 2, 3, 4, 5, 6, Raw}, make([]byte, 17)...),
		"index too big":     append([]byte{2, 1, 2, 3, 4, 5, 6, 7, 8, 9, Raw}, bytes.Repeat([]byte{0xff}, 32)...),
		"inflate truncated": good[:len(good)-2],
		"inflate trailing":  append(append([]byte{}, good...), 0),
		"inflate garbage":   append([]byte{1, 1, 2, 3, 4, 5, 6, Deflate}, 0xff, 0xff, 0xff),
	}
	for name, b := range cases {
		w, h := 16, 8
		if strings.HasPrefix(name, "inflate") {
			w, h = 64, 32
		}
		if _, err := Decode(b, w, h); !errors.Is(err, ErrBad) {
			t.Errorf("%s: Decode = %v, want ErrBad", name, err)
		}
	}
	// Deflated indices that inflate past the image are refused.
	var big bytes.Buffer
	zw, _ := flate.NewWriter(&big, flate.BestSpeed)
	zw.Write(make([]byte, 1000))
	zw.Close()
	if _, err := Decode(append([]byte{1, 1, 2, 3, 4, 5, 6, Deflate}, big.Bytes()...), 16, 8); !errors.Is(err, ErrBad) {
		t.Errorf("over-long inflate: %v, want ErrBad", err)
	}
	if _, err := Decode(good, 64, 32); err != nil {
		t.Fatalf("the good data: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	var e Encoder
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 5, 40} {
		pix, stride := bgrx(rng, 16, 8, 0, n)
		d, _ := e.Encode(nil, pix, 16, 8, stride, MaxColours)
		f.Add(d, uint8(16), uint8(8))
	}
	f.Fuzz(func(t *testing.T, data []byte, w, h uint8) {
		out, err := Decode(data, int(w), int(h))
		if err != nil {
			if !errors.Is(err, ErrBad) {
				t.Fatalf("error %v is not ErrBad", err)
			}
			return
		}
		if len(out) != int(w)*int(h)*4 {
			t.Fatalf("%d bytes for %dx%d", len(out), w, h)
		}
	})
}
