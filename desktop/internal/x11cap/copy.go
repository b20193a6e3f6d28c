package x11cap

import (
	"bytes"
	"time"

	"github.com/jezek/xgb/xproto"
)

// Moved windows travel as copies of the viewer's own picture.
//
// XDamage says where pixels changed, not that they moved, so the capturer watches the root's
// children (ConfigureNotify through SubstructureNotify): a top-level window whose outer rectangle
// moved without changing size is a candidate copy from where it was when the previous frame was
// captured (ref) to where it is now (cur). Nothing is taken on trust: a row of the destination is
// copied only if its captured pixels equal, byte for byte, what the viewers have at the source
// (prev), so a window partly covered, repainted while moving, or reported late simply falls back to
// encoding those rows. The copied rows then equal the capture in prev, the tile diff finds nothing
// there, and only what the move uncovered is encoded.

// recentMove is how long after a move a window's geometry is asked at every frame (a drag moves it
// again and again; asking right before the capture ties the geometry to the captured pixels).
const recentMove = time.Second

// maxGeometryAsks bounds the GetGeometry round trip's requests per frame.
const maxGeometryAsks = 32

// minCopyArea: a smaller copy is left to the encoder.
const minCopyArea = 64

type geometryAsk struct {
	w  xproto.Window
	ck xproto.GetGeometryCookie
}

// askGeometry sends GetGeometry for the windows that moved lately; gotGeometry reads the answers.
func (c *Capturer) askGeometry(now time.Time) []geometryAsk {
	var asks []geometryAsk
	for w, tw := range c.wins {
		if len(asks) == maxGeometryAsks {
			break
		}
		if tw.cur != tw.ref || now.Sub(tw.movedAt) < recentMove {
			asks = append(asks, geometryAsk{w, xproto.GetGeometry(c.conn, xproto.Drawable(w))})
		}
	}
	return asks
}

func (c *Capturer) gotGeometry(asks []geometryAsk, now time.Time) {
	for _, a := range asks {
		g, err := a.ck.Reply()
		tw := c.wins[a.w]
		if tw == nil {
			continue
		}
		if err != nil {
			delete(c.wins, a.w) // destroyed meanwhile
			continue
		}
		tw.cur = outer(int(g.X), int(g.Y), int(g.Width), int(g.Height), int(g.BorderWidth))
		if tw.cur != tw.ref {
			tw.movedAt = now
		}
	}
}

// settleWindows makes the windows' current places the reference (a keyframe, a frame that captured
// nothing).
func (c *Capturer) settleWindows() {
	for _, tw := range c.wins {
		tw.ref = tw.cur
	}
}

// moves turns the windows that moved since the last frame into copies, applied to prev (and to the
// tiles' record of what was sent low) in the order returned. Called by produce after the capture.
func (c *Capturer) moves(now time.Time) []Copy {
	var out []Copy
	screen := area{0, 0, c.w, c.h}
	for _, tw := range c.wins {
		src, dst := tw.ref, tw.cur
		tw.ref = tw.cur
		if src == dst || src.x1-src.x0 != dst.x1-dst.x0 || src.y1-src.y0 != dst.y1-dst.y0 {
			continue
		}
		dx, dy := dst.x0-src.x0, dst.y0-src.y0
		d := dst.intersect(screen).intersect(screen.shift(dx, dy))
		if d.empty() {
			continue
		}
		out = c.copyRows(out, d, dx, dy, now)
	}
	return out
}

// copyRows verifies the rows of d against prev shifted by (-dx, -dy) and appends one copy per run
// of matching rows (that changes something), ordered so that applying them one after the other
// reads only pixels no earlier copy of the run wrote.
func (c *Capturer) copyRows(out []Copy, d area, dx, dy int, now time.Time) []Copy {
	stride, w := c.w*4, d.x1-d.x0
	type run struct {
		y0, y1  int
		changes bool
	}
	var runs []run
	open := false
	for y := d.y0; y < d.y1; y++ {
		co := y*stride + d.x0*4
		po := (y-dy)*stride + (d.x0-dx)*4
		if !c.rowCapt[y/c.g.ts] || !bytes.Equal(c.cur[co:co+w*4], c.prev[po:po+w*4]) {
			open = false
			continue
		}
		if !open {
			runs = append(runs, run{y0: y})
			open = true
		}
		r := &runs[len(runs)-1]
		r.y1 = y + 1
		if !r.changes && !bytes.Equal(c.cur[co:co+w*4], c.prev[co:co+w*4]) {
			r.changes = true
		}
	}
	for k := range runs {
		r := runs[k]
		if dy > 0 { // moving down: the lowest run first, so no run reads rows an earlier one wrote
			r = runs[len(runs)-1-k]
		}
		if !r.changes || w*(r.y1-r.y0) < minCopyArea {
			continue
		}
		cp := Copy{SrcX: d.x0 - dx, SrcY: r.y0 - dy, X: d.x0, Y: r.y0, W: w, H: r.y1 - r.y0}
		c.moveLow(cp, now)
		for y := r.y0; y < r.y1; y++ {
			o := y*stride + d.x0*4
			copy(c.prev[o:o+w*4], c.cur[o:o+w*4]) // equal to prev's source rows: verified above
		}
		out = append(out, cp)
	}
	return out
}

// moveLow carries the tiles' record of pixels sent at low quality along with a copy: the viewer's
// copied pixels are as lossy as their source, and get the settle refresh in their new place.
func (c *Capturer) moveLow(cp Copy, now time.Time) {
	dx, dy := cp.X-cp.SrcX, cp.Y-cp.SrcY
	dst := area{cp.X, cp.Y, cp.X + cp.W, cp.Y + cp.H}
	src := dst.shift(-dx, -dy)
	ts := c.g.ts
	snap := map[int]area{}
	for cy := src.y0 / ts; cy <= (src.y1-1)/ts; cy++ {
		for cx := src.x0 / ts; cx <= (src.x1-1)/ts; cx++ {
			i := cy*c.g.cols + cx
			if l := c.tiles[i].low.intersect(src); !l.empty() {
				snap[i] = l
			}
		}
	}
	for cy := dst.y0 / ts; cy <= (dst.y1-1)/ts; cy++ {
		for cx := dst.x0 / ts; cx <= (dst.x1-1)/ts; cx++ {
			t := &c.tiles[cy*c.g.cols+cx]
			td := c.g.tileArea(cx, cy).intersect(dst)
			var add area
			for _, l := range snap {
				if l = l.shift(dx, dy).intersect(td); !l.empty() {
					add = add.union(l)
				}
			}
			if t.low.intersect(td) == t.low {
				t.low = area{} // all of it overwritten
			}
			if !add.empty() {
				t.low = t.low.union(add)
				t.changedAt = now
			}
		}
	}
}
