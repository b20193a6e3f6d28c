package app

import "math"

// deskView is the desktop viewer's geometry: how the display (DW×DH pixels) is laid out in
// the viewport (the scrolling element, VW×VH CSS pixels). The display is drawn at Scale and
// centred when it is smaller than the viewport (Off); when it is larger the viewport scrolls
// (Scroll, in scaled CSS pixels). Display point d shows at viewport point
// d·Scale + Off − Scroll. It is plain arithmetic, tested without a browser.
type deskView struct {
	DW, DH           float64 // display size in pixels (0 until the first Screen)
	VW, VH           float64 // viewport size in CSS pixels
	Fit              bool    // scale to fit: follows the viewport's size
	Scale            float64 // CSS pixels per display pixel
	ScrollX, ScrollY float64
}

// Zoom limits: at most 4× (pinch); at least the fit scale, or 1 if the display fits at 1:1.
const deskMaxScale = 4

func newDeskView() deskView { return deskView{Fit: true, Scale: 1} }

func (v deskView) known() bool { return v.DW > 0 && v.DH > 0 && v.VW > 0 && v.VH > 0 }

// fitScale is the scale at which the whole display fits the viewport.
func (v deskView) fitScale() float64 {
	if !v.known() {
		return 1
	}
	return math.Min(v.VW/v.DW, v.VH/v.DH)
}

func (v deskView) minScale() float64 { return math.Min(v.fitScale(), 1) }

// off is where the display's top-left corner sits when it is smaller than the viewport.
func (v deskView) off() (float64, float64) {
	return math.Max(0, (v.VW-v.DW*v.Scale)/2), math.Max(0, (v.VH-v.DH*v.Scale)/2)
}

// setDisplay records a new display size (a Screen message).
func (v *deskView) setDisplay(w, h int) {
	v.DW, v.DH = float64(w), float64(h)
	v.settle()
}

// setViewport records the viewport's new size (a resize, fullscreen, rotation).
func (v *deskView) setViewport(w, h float64) {
	v.VW, v.VH = math.Max(0, w), math.Max(0, h)
	v.settle()
}

// settle refits in fit mode, else keeps the scale within limits and the scroll in range.
func (v *deskView) settle() {
	if v.Fit {
		v.Scale = v.fitScale()
		v.ScrollX, v.ScrollY = 0, 0
		return
	}
	if v.known() {
		v.Scale = math.Min(math.Max(v.Scale, v.minScale()), deskMaxScale)
	}
	v.clampScroll()
}

func (v *deskView) clampScroll() {
	v.ScrollX = math.Min(math.Max(v.ScrollX, 0), math.Max(0, v.DW*v.Scale-v.VW))
	v.ScrollY = math.Min(math.Max(v.ScrollY, 0), math.Max(0, v.DH*v.Scale-v.VH))
}

// setFit switches to scale-to-fit.
func (v *deskView) setFit() {
	v.Fit = true
	v.settle()
}

// setOneToOne shows the display at 1:1, keeping the display point under viewport point
// (vx, vy) where it is (the viewport's centre for a button).
func (v *deskView) setOneToOne(vx, vy float64) { v.zoomTo(1, vx, vy) }

// zoomTo sets the scale to s (within limits), keeping the display point under viewport
// point (vx, vy) in place.
func (v *deskView) zoomTo(s, vx, vy float64) {
	if !v.known() {
		return
	}
	dx, dy := v.toDisplayF(vx, vy)
	v.Fit = false
	v.Scale = math.Min(math.Max(s, v.minScale()), deskMaxScale)
	ox, oy := v.off()
	v.ScrollX = dx*v.Scale + ox - vx
	v.ScrollY = dy*v.Scale + oy - vy
	v.clampScroll()
}

// zoomBy multiplies the scale by f around viewport point (vx, vy) (a pinch).
func (v *deskView) zoomBy(f, vx, vy float64) { v.zoomTo(v.Scale*f, vx, vy) }

// panBy moves the picture by (dx, dy) CSS pixels (a two-finger drag: the picture follows the fingers).
func (v *deskView) panBy(dx, dy float64) {
	v.ScrollX -= dx
	v.ScrollY -= dy
	v.clampScroll()
}

// setScroll records the viewport's scroll position (scroll bars moved by the user).
func (v *deskView) setScroll(x, y float64) {
	v.ScrollX, v.ScrollY = x, y
	v.clampScroll()
}

// toDisplayF maps a viewport point to display coordinates, unclamped.
func (v deskView) toDisplayF(vx, vy float64) (float64, float64) {
	s := v.Scale
	if s <= 0 {
		s = 1
	}
	ox, oy := v.off()
	return (vx + v.ScrollX - ox) / s, (vy + v.ScrollY - oy) / s
}

// toDisplay maps a viewport point to the display pixel under it, clamped to the display;
// inside is false when the point is outside the picture (over the margins).
func (v deskView) toDisplay(vx, vy float64) (x, y uint16, inside bool) {
	fx, fy := v.toDisplayF(vx, vy)
	inside = fx >= 0 && fy >= 0 && fx < v.DW && fy < v.DH
	return deskClamp(fx, v.DW), deskClamp(fy, v.DH), inside
}

// toViewport maps a display point to the viewport.
func (v deskView) toViewport(dx, dy float64) (float64, float64) {
	ox, oy := v.off()
	return dx*v.Scale + ox - v.ScrollX, dy*v.Scale + oy - v.ScrollY
}

// reveal scrolls the least needed so display point (dx, dy) is at least margin CSS pixels
// inside the viewport (the trackpad cursor never leaves the screen).
func (v *deskView) reveal(dx, dy, margin float64) {
	vx, vy := v.toViewport(dx, dy)
	m := math.Min(margin, math.Min(v.VW, v.VH)/4)
	if vx < m {
		v.ScrollX -= m - vx
	} else if vx > v.VW-m {
		v.ScrollX += vx - (v.VW - m)
	}
	if vy < m {
		v.ScrollY -= m - vy
	} else if vy > v.VH-m {
		v.ScrollY += vy - (v.VH - m)
	}
	v.clampScroll()
}

// deskClamp floors f into [0, n-1].
func deskClamp(f, n float64) uint16 {
	if n < 1 || f < 0 || math.IsNaN(f) {
		return 0
	}
	if f > n-1 {
		f = n - 1
	}
	return uint16(f)
}

// deskButtons maps a DOM MouseEvent.buttons mask (1 primary, 2 secondary, 4 auxiliary)
// to the wire's (1 left, 2 middle, 4 right).
func deskButtons(dom int) uint8 {
	var b uint8
	if dom&1 != 0 {
		b |= 1 // left
	}
	if dom&2 != 0 {
		b |= 4 // right
	}
	if dom&4 != 0 {
		b |= 2 // middle
	}
	return b
}

// deskWheel turns wheel deltas into whole scroll steps, keeping the remainder (touchpads send
// many small deltas).
type deskWheel struct{ accX, accY float64 }

// DOM WheelEvent.deltaMode values and how much of each is one step.
const (
	deskWheelPixelStep = 100.0 // a mouse notch in Chromium and Firefox
	deskWheelLineStep  = 3.0
)

// add accumulates a wheel event and returns the whole steps it completes (positive: right, down).
func (w *deskWheel) add(dx, dy float64, mode int) (int16, int16) {
	step := deskWheelPixelStep
	switch mode {
	case 1:
		step = deskWheelLineStep
	case 2:
		step = 1 // a page: one step each
	}
	w.accX += dx / step
	w.accY += dy / step
	sx, sy := math.Trunc(w.accX), math.Trunc(w.accY)
	w.accX -= sx
	w.accY -= sy
	return int16(math.Max(-100, math.Min(100, sx))), int16(math.Max(-100, math.Min(100, sy)))
}

func (w *deskWheel) reset() { *w = deskWheel{} }
