package x11cap

import (
	"errors"
	"reflect"
	"testing"
)

func TestMergeRuns(t *testing.T) {
	// 4×3 grid: a 2×2 block of class 2, a lone class 3, and a class-2 run of another width.
	class := []int{
		2, 2, 0, 3,
		2, 2, 0, 0,
		2, 2, 2, 0,
	}
	got := merge(class, 4, 3)
	want := []box{{0, 0, 2, 2, 2}, {3, 0, 1, 1, 3}, {0, 2, 3, 1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge = %+v, want %+v", got, want)
	}
	// Every non-zero cell is covered exactly once.
	cover := make([]int, len(class))
	for _, b := range got {
		for y := b.cy; y < b.cy+b.ch; y++ {
			for x := b.cx; x < b.cx+b.cw; x++ {
				cover[y*4+x]++
				if class[y*4+x] != b.class {
					t.Errorf("box %+v covers a cell of class %d", b, class[y*4+x])
				}
			}
		}
	}
	for i, n := range cover {
		if (class[i] != 0) != (n == 1) || n > 1 {
			t.Errorf("cell %d covered %d times", i, n)
		}
	}
}

func TestHalveOddSizes(t *testing.T) {
	// 3×3 white except one black pixel at (0,0).
	src := make([]byte, 3*3*4)
	for i := range src {
		src[i] = 255
	}
	src[0], src[1], src[2] = 0, 0, 0
	dst, w, h := halve(nil, src, 3, 3, 12)
	if w != 2 || h != 2 || len(dst) != 16 {
		t.Fatalf("halve 3×3 → %d×%d (%d bytes)", w, h, len(dst))
	}
	if dst[0] != 191 || dst[4] != 255 || dst[12] != 255 {
		t.Fatalf("halve values %v", dst)
	}
}

func TestScreenSizeBounds(t *testing.T) {
	c := &Capturer{opts: Options{TileSize: 64}}
	c.opts.setDefaults()
	for _, s := range [][2]int{{0, 800}, {1280, 0}, {-1, 5}, {MaxDim + 1, 10}, {MaxDim, MaxDim}, {65535, 65535}} {
		if err := c.configure(s[0], s[1]); !errors.Is(err, ErrScreenSize) {
			t.Errorf("configure(%d, %d) = %v, want ErrScreenSize", s[0], s[1], err)
		}
	}
	if err := c.configure(1, 1); err != nil || c.g.cols != 1 || c.g.rows != 1 {
		t.Errorf("configure(1, 1) = %v, grid %+v", err, c.g)
	}
}

func TestQualityFollowsChangeRate(t *testing.T) {
	c := &Capturer{}
	c.opts.setDefaults()
	first, busy := c.changeQuality(1, 0), c.changeQuality(8, 0)
	if first != 95 || busy != 50 || c.changeQuality(2, 0) != 80 {
		t.Errorf("first change q%d (want 95), second q%d (want 80), busy tile q%d (want 50, i.e. MinQuality 45 rounded)",
			first, c.changeQuality(2, 0), busy)
	}
	if lagged := c.changeQuality(1, 40); lagged != 40 {
		t.Errorf("lagging viewers: q%d, want 40", lagged)
	}
	if floor := c.changeQuality(8, 100); floor != 10 {
		t.Errorf("quality floor q%d, want 10", floor)
	}
}
