package app

import (
	"math"
	"time"

	"github.com/porthole/porthole/desktop"
)

// Touch on the desktop viewer: a state machine, fed with touch points in viewport
// coordinates and the current time, that emits what to do (pointer frames, wheel steps,
// zoom and pan of the view). It knows nothing of the browser.
//
// Pointer mode (the finger is the pointer): tap = left click where it lands, long-press =
// right click, one-finger drag = left-button drag. Trackpad mode (relative, with a visible
// cursor): moving a finger moves the cursor, tap = left click at the cursor, long-press =
// right click at the cursor, tap then touch and move = left-button drag. Both: two fingers
// moving together scroll (wheel), two fingers spreading or pinching zoom the view (and pan
// it with their midpoint).

// Gesture thresholds.
const (
	deskTapSlop     = 10.0 // CSS px a finger may move and still tap
	deskLongPress   = 500 * time.Millisecond
	deskTapDragGap  = 300 * time.Millisecond // trackpad: tap, then touch again within this → drag
	deskScrollStep  = 30.0                   // CSS px of two-finger movement per wheel step
	deskPinchRatio  = 0.12                   // a change of finger distance over this → pinch
	deskTrackpadAcc = 1.0                    // trackpad: display px per CSS px at scale 1
)

type deskActKind uint8

const (
	deskActPointer deskActKind = iota + 1 // Pointer{X, Y, Buttons}
	deskActWheel                          // Wheel{X, Y, DX, DY}
	deskActZoom                           // view.zoomBy(Factor, VX, VY)
	deskActPan                            // view.panBy(VX, VY)
	deskActCursor                         // trackpad: show the local cursor at X, Y
)

// deskAct is one thing a gesture asks for.
type deskAct struct {
	Kind    deskActKind
	X, Y    uint16 // display coordinates
	Buttons uint8
	DX, DY  int16
	Factor  float64
	VX, VY  float64
}

type deskTouchState uint8

const (
	touchIdle    deskTouchState = iota
	touchPending                // one finger down, not yet a tap, drag or long-press
	touchDrag                   // one finger moving (pointer: left drag; trackpad: cursor move or tap-drag)
	touchHeld                   // long-press fired: wait for the finger to lift
	touchTwo                    // two fingers down, undecided
	touchScroll                 // two fingers moving together
	touchPinch                  // two fingers pinching
	touchDone                   // a two-finger gesture ended: wait for every finger to lift
)

type deskPt struct{ X, Y float64 }

func (a deskPt) dist(b deskPt) float64 { return math.Hypot(a.X-b.X, a.Y-b.Y) }
func deskMid(a, b deskPt) deskPt       { return deskPt{(a.X + b.X) / 2, (a.Y + b.Y) / 2} }

// deskGesture is the touch state machine.
type deskGesture struct {
	Trackpad bool

	state    deskTouchState
	pts      map[int]deskPt // active touches
	order    []int          // their ids, first down first
	start    deskPt         // where the gesture's first finger went down
	last     deskPt         // its last position
	startAt  time.Time
	tapUpAt  time.Time // trackpad: when the last tap ended
	tapDrag  bool      // trackpad: this touch follows a tap: drag with the left button
	pressed  bool      // the left button is held (drag)
	d0, dLst float64   // two fingers: distance at start, last distance
	m0, mLst deskPt    // two fingers: midpoint at start, last midpoint
	scrollY  float64   // two-finger scroll not yet a whole step
	scrollX  float64
	cursor   deskPt // trackpad: the cursor, in display coordinates
}

func newDeskGesture() *deskGesture { return &deskGesture{pts: map[int]deskPt{}} }

// setCursor moves the trackpad cursor (the display reported where the pointer is).
func (g *deskGesture) setCursor(x, y float64) {
	if g.state != touchDrag { // our own moves win while the finger moves
		g.cursor = deskPt{x, y}
	}
}

// cursorAt is the trackpad cursor in display pixels.
func (g *deskGesture) cursorAt(v deskView) (uint16, uint16) {
	return deskClamp(g.cursor.X, v.DW), deskClamp(g.cursor.Y, v.DH)
}

// active reports whether fingers are down or a gesture is in progress.
func (g *deskGesture) active() bool { return len(g.pts) > 0 }

// pointAt is where a one-finger action happens: under the finger, or the trackpad cursor.
func (g *deskGesture) pointAt(v deskView, p deskPt) (uint16, uint16) {
	if g.Trackpad {
		return g.cursorAt(v)
	}
	x, y, _ := v.toDisplay(p.X, p.Y)
	return x, y
}

func ptr(x, y uint16, b uint8) deskAct { return deskAct{Kind: deskActPointer, X: x, Y: y, Buttons: b} }

// click is a move, a press and a release of button b at (x, y).
func click(x, y uint16, b uint8) []deskAct {
	return []deskAct{ptr(x, y, 0), ptr(x, y, b), ptr(x, y, 0)}
}

// down: finger id touched at viewport point (x, y).
func (g *deskGesture) down(id int, x, y float64, now time.Time, v deskView) []deskAct {
	p := deskPt{x, y}
	if _, ok := g.pts[id]; !ok {
		g.order = append(g.order, id)
	}
	g.pts[id] = p
	switch len(g.pts) {
	case 1:
		if g.state != touchIdle && g.state != touchDone {
			return nil
		}
		g.state = touchPending
		g.start, g.last, g.startAt = p, p, now
		g.tapDrag = g.Trackpad && !g.tapUpAt.IsZero() && now.Sub(g.tapUpAt) <= deskTapDragGap
		return nil
	case 2:
		var out []deskAct
		if g.pressed { // a drag becomes a two-finger gesture: release the button
			x, y := g.pointAt(v, g.last)
			out = append(out, ptr(x, y, 0))
			g.pressed = false
		}
		a, b := g.two()
		g.state = touchTwo
		g.d0, g.dLst = a.dist(b), a.dist(b)
		g.m0, g.mLst = deskMid(a, b), deskMid(a, b)
		g.scrollX, g.scrollY = 0, 0
		return out
	}
	return nil // a third finger: ignored
}

// two returns the first two fingers.
func (g *deskGesture) two() (deskPt, deskPt) {
	return g.pts[g.order[0]], g.pts[g.order[1]]
}

// move: finger id moved to (x, y).
func (g *deskGesture) move(id int, x, y float64, now time.Time, v deskView) []deskAct {
	old, ok := g.pts[id]
	if !ok {
		return nil
	}
	p := deskPt{x, y}
	g.pts[id] = p
	switch g.state {
	case touchPending:
		if p.dist(g.start) <= deskTapSlop {
			return nil
		}
		g.state = touchDrag
		var out []deskAct
		if g.Trackpad {
			if g.tapDrag {
				cx, cy := g.cursorAt(v)
				out = append(out, ptr(cx, cy, desktop.ButtonLeft))
				g.pressed = true
			}
			return append(out, g.trackpadMove(p.X-g.start.X, p.Y-g.start.Y, v)...)
		}
		sx, sy, _ := v.toDisplay(g.start.X, g.start.Y)
		out = append(out, ptr(sx, sy, 0), ptr(sx, sy, desktop.ButtonLeft))
		g.pressed = true
		g.last = p
		x, y, _ := v.toDisplay(p.X, p.Y)
		return append(out, ptr(x, y, desktop.ButtonLeft))
	case touchDrag:
		if g.Trackpad {
			return g.trackpadMove(p.X-old.X, p.Y-old.Y, v)
		}
		g.last = p
		x, y, _ := v.toDisplay(p.X, p.Y)
		return []deskAct{ptr(x, y, desktop.ButtonLeft)}
	case touchTwo, touchScroll, touchPinch:
		if len(g.pts) < 2 {
			return nil
		}
		return g.twoMove(v)
	}
	return nil
}

// trackpadMove moves the cursor by a finger's movement (CSS px), scaled to the display.
func (g *deskGesture) trackpadMove(dx, dy float64, v deskView) []deskAct {
	s := v.Scale
	if s <= 0 {
		s = 1
	}
	g.cursor.X = math.Min(math.Max(g.cursor.X+dx*deskTrackpadAcc/s, 0), math.Max(0, v.DW-1))
	g.cursor.Y = math.Min(math.Max(g.cursor.Y+dy*deskTrackpadAcc/s, 0), math.Max(0, v.DH-1))
	g.last = deskPt{g.last.X + dx, g.last.Y + dy}
	x, y := g.cursorAt(v)
	var b uint8
	if g.pressed {
		b = desktop.ButtonLeft
	}
	return []deskAct{ptr(x, y, b), {Kind: deskActCursor, X: x, Y: y}}
}

// twoMove handles two fingers: decide scroll or pinch, then act.
func (g *deskGesture) twoMove(v deskView) []deskAct {
	a, b := g.two()
	d, m := a.dist(b), deskMid(a, b)
	if g.state == touchTwo {
		switch {
		case g.d0 > 0 && math.Abs(d/g.d0-1) > deskPinchRatio:
			g.state = touchPinch
		case m.dist(g.m0) > deskTapSlop:
			g.state = touchScroll
		default:
			return nil
		}
	}
	var out []deskAct
	switch g.state {
	case touchPinch:
		if g.dLst > 0 && d > 0 {
			out = append(out, deskAct{Kind: deskActZoom, Factor: d / g.dLst, VX: m.X, VY: m.Y})
		}
		if dx, dy := m.X-g.mLst.X, m.Y-g.mLst.Y; dx != 0 || dy != 0 {
			out = append(out, deskAct{Kind: deskActPan, VX: dx, VY: dy})
		}
	case touchScroll:
		// Fingers moving up bring what is below into view: scroll down.
		g.scrollX -= (m.X - g.mLst.X) / deskScrollStep
		g.scrollY -= (m.Y - g.mLst.Y) / deskScrollStep
		sx, sy := math.Trunc(g.scrollX), math.Trunc(g.scrollY)
		if sx != 0 || sy != 0 {
			g.scrollX -= sx
			g.scrollY -= sy
			x, y, _ := v.toDisplay(g.m0.X, g.m0.Y)
			if g.Trackpad {
				x, y = g.cursorAt(v)
			}
			out = append(out, deskAct{Kind: deskActWheel, X: x, Y: y, DX: int16(sx), DY: int16(sy)})
		}
	}
	g.dLst, g.mLst = d, m
	return out
}

// up: finger id lifted (cancel: the browser took the touch; nothing is clicked).
func (g *deskGesture) up(id int, now time.Time, v deskView, cancel bool) []deskAct {
	p, ok := g.pts[id]
	if !ok {
		return nil
	}
	delete(g.pts, id)
	for i, o := range g.order {
		if o == id {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	var out []deskAct
	switch g.state {
	case touchPending:
		if !cancel {
			x, y := g.pointAt(v, p)
			out = click(x, y, desktop.ButtonLeft)
			g.tapUpAt = now
		}
	case touchDrag:
		if g.pressed {
			x, y := g.pointAt(v, g.last)
			if !g.Trackpad {
				x, y, _ = v.toDisplay(p.X, p.Y)
			}
			out = append(out, ptr(x, y, 0))
			g.pressed = false
		}
	case touchTwo, touchScroll, touchPinch:
		g.state = touchDone
	}
	if len(g.pts) == 0 {
		if g.state != touchPending || cancel {
			g.tapUpAt = time.Time{}
		}
		g.state = touchIdle
		g.tapDrag = false
	}
	return out
}

// timeout is called deskLongPress after a finger went down (and may be called late or
// more than once): a finger still down and still → right click.
func (g *deskGesture) timeout(now time.Time, v deskView) []deskAct {
	if g.state != touchPending || len(g.pts) != 1 || now.Sub(g.startAt) < deskLongPress {
		return nil
	}
	g.state = touchHeld
	g.tapUpAt = time.Time{}
	x, y := g.pointAt(v, g.start)
	return click(x, y, desktop.ButtonRight)
}
