package x11cap

import (
	"bytes"
	"math"
	"time"
)

// tile is what the capturer remembers of one tile of the screen.
type tile struct {
	changedAt time.Time // last time its pixels changed
	score     float32   // change rate: +1 per change, decaying with a 1 s time constant
	sentQ     uint8     // quality of the last encoding sent (0: never sent)
	low       area      // the part of the tile sent low since its last refresh
}

// area is a pixel rectangle [x0, x1) × [y0, y1); empty when x0 >= x1.
type area struct{ x0, y0, x1, y1 int }

func (a area) empty() bool { return a.x0 >= a.x1 || a.y0 >= a.y1 }

func (a area) union(b area) area {
	switch {
	case a.empty():
		return b
	case b.empty():
		return a
	}
	return area{min(a.x0, b.x0), min(a.y0, b.y0), max(a.x1, b.x1), max(a.y1, b.y1)}
}

func (a area) intersect(b area) area {
	r := area{max(a.x0, b.x0), max(a.y0, b.y0), min(a.x1, b.x1), min(a.y1, b.y1)}
	if r.empty() {
		return area{}
	}
	return r
}

// shift moves a by (dx, dy).
func (a area) shift(dx, dy int) area { return area{a.x0 + dx, a.y0 + dy, a.x1 + dx, a.y1 + dy} }

// rateDecay is the time constant of a tile's change score.
const rateDecay = time.Second

// touch records a change of the tile at now and returns its updated score.
func (t *tile) touch(now time.Time) float32 {
	if !t.changedAt.IsZero() {
		t.score *= float32(math.Exp(-float64(now.Sub(t.changedAt)) / float64(rateDecay)))
	}
	t.score++
	t.changedAt = now
	return t.score
}

// grid is the tiling of a w×h screen with square tiles of side ts.
type grid struct {
	w, h, ts, cols, rows int
}

func newGrid(w, h, ts int) grid {
	return grid{w: w, h: h, ts: ts, cols: (w + ts - 1) / ts, rows: (h + ts - 1) / ts}
}

// bounds returns the pixel rectangle of tile (cx, cy), clipped to the screen.
func (g grid) bounds(cx, cy int) (x, y, w, h int) {
	x, y = cx*g.ts, cy*g.ts
	return x, y, min(g.ts, g.w-x), min(g.ts, g.h-y)
}

// tileArea is the pixel area of tile (cx, cy).
func (g grid) tileArea(cx, cy int) area {
	x, y, w, h := g.bounds(cx, cy)
	return area{x, y, x + w, y + h}
}

// diffTile compares tile (cx, cy) of cur against prev (both BGRX with stride 4·g.w), copies the
// changed rows into prev and returns the bounding box of the changed pixels (empty: unchanged).
func (g grid) diffTile(cur, prev []byte, cx, cy int) area {
	x, y, w, h := g.bounds(cx, cy)
	stride := g.w * 4
	ch := area{x0: x + w, y0: y + h}
	for r := range h {
		o := (y+r)*stride + x*4
		a, b := cur[o:o+w*4], prev[o:o+w*4]
		if bytes.Equal(a, b) {
			continue
		}
		i := 0
		for a[i] == b[i] {
			i++
		}
		j := len(a) - 1
		for a[j] == b[j] {
			j--
		}
		ch.x0, ch.x1 = min(ch.x0, x+i/4), max(ch.x1, x+j/4+1)
		ch.y0, ch.y1 = min(ch.y0, y+r), y+r+1
		copy(b, a)
	}
	if ch.empty() {
		return area{}
	}
	return ch
}

// box is a rectangle of tiles with one encoding class.
type box struct {
	cx, cy, cw, ch int
	class          int
}

// merge groups the non-zero cells of class (cols×rows, row-major) into rectangles: horizontal runs of
// equal class in each row, then runs with the same columns and class in consecutive rows are joined.
func merge(class []int, cols, rows int) []box {
	var out []box
	open := map[[3]int]int{} // (cx, cw, class) → index in out of the box ending on the previous row
	for cy := range rows {
		next := map[[3]int]int{}
		row := class[cy*cols : (cy+1)*cols]
		for cx := 0; cx < cols; {
			c := row[cx]
			if c == 0 {
				cx++
				continue
			}
			end := cx + 1
			for end < cols && row[end] == c {
				end++
			}
			k := [3]int{cx, end - cx, c}
			if i, ok := open[k]; ok {
				out[i].ch++
				next[k] = i
			} else {
				out = append(out, box{cx: cx, cy: cy, cw: end - cx, ch: 1, class: c})
				next[k] = len(out) - 1
			}
			cx = end
		}
		open = next
	}
	return out
}

// halve box-filters the w×h BGRX image at src (stride bytes per row) down 2× into dst and returns
// dst's width and height ((w+1)/2, (h+1)/2); the last odd row or column is averaged with itself.
func halve(dst, src []byte, w, h, stride int) ([]byte, int, int) {
	w2, h2 := (w+1)/2, (h+1)/2
	if cap(dst) < w2*h2*4 {
		dst = make([]byte, w2*h2*4)
	}
	dst = dst[:w2*h2*4]
	for y := range h2 {
		r0 := src[2*y*stride:]
		r1 := r0
		if 2*y+1 < h {
			r1 = src[(2*y+1)*stride:]
		}
		d := dst[y*w2*4 : (y+1)*w2*4]
		for x := range w2 {
			a := 8 * x
			b := a + 4
			if 2*x+1 >= w {
				b = a
			}
			for c := range 3 {
				d[4*x+c] = byte((uint(r0[a+c]) + uint(r0[b+c]) + uint(r1[a+c]) + uint(r1[b+c]) + 2) / 4)
			}
			d[4*x+3] = 0
		}
	}
	return dst, w2, h2
}
