package app

import (
	"strings"
	"time"

	"github.com/porthole/porthole/desktop"
)

// deskSink is what the desktop client drives: the WebSocket and the canvas in the browser
// (desktop_session_wasm.go), a recorder in tests. Called with the session's lock held: it
// must not call back into the client synchronously.
type deskSink interface {
	send(m desktop.Message)
	setSize(w, h int)                         // a new display size: the canvas is cleared
	setView(v deskView)                       // lay the canvas out (scale, offset, scroll)
	frameEnd(seq uint32)                      // draw the rects received so far, then call drawn(seq)
	cursorShape(c desktop.CursorShape)        // the pointer's image
	cursorPos(x, y int, local bool)           // the pointer's position (local: trackpad's own)
	setCapture(on bool)                       // keys go to the desktop (we hold control)
	after(d time.Duration, f func(time.Time)) // call f after d (long-press), under the lock
}

// deskClient is the protocol and input logic of one DesktopPanel, independent of the
// browser. Not safe for concurrent use: the session serializes calls with its lock.
type deskClient struct {
	sink      deskSink
	connected bool         // Hello received on this connection
	mode      desktop.Mode // our permission (Hello, Mode)
	me        string       // our viewer id
	control   desktop.Control
	viewers   []desktop.ViewerInfo
	w, h      int // display size (0 until Screen)
	clipboard string
	err       string
	frames    uint32 // frames drawn (FrameEnd acknowledged)
	rects     int    // rects received

	view    deskView
	gesture *deskGesture
	wheel   deskWheel
	mods    termMods // the keys bar's sticky Ctrl/Alt
	held    map[string][]string
	buttons uint8 // mouse buttons we reported held
	capture bool
}

func newDeskClient(sink deskSink, mode desktop.Mode) *deskClient {
	return &deskClient{sink: sink, mode: mode, view: newDeskView(), gesture: newDeskGesture(), held: map[string][]string{}}
}

// holding reports whether we hold control (our input reaches the display).
func (c *deskClient) holding() bool {
	return c.connected && c.mode == desktop.ModeDrive && c.me != "" && !c.control.Agent && c.control.HolderID == c.me
}

// disconnected: the WebSocket closed.
func (c *deskClient) disconnected() {
	c.connected = false
	c.control = desktop.Control{}
	c.viewers = nil
	c.buttons = 0
	clear(c.held)
	c.gesture = newDeskGesture()
	c.gesture.Trackpad = c.trackpad()
	c.syncCapture()
}

func (c *deskClient) trackpad() bool { return c.gesture != nil && c.gesture.Trackpad }

// handle applies one frame from the gateway (Rect bytes go straight to the canvas: only
// counted here).
func (c *deskClient) handle(m desktop.Message) {
	switch m := m.(type) {
	case desktop.Hello:
		c.connected = true
		c.mode, c.me = m.Mode, m.ViewerID
		c.err = ""
	case desktop.ModeMsg:
		c.mode = m.Mode
	case desktop.Control:
		c.control = m
	case desktop.Viewers:
		c.viewers = m.Viewers
	case desktop.Screen:
		c.w, c.h = int(m.W), int(m.H)
		c.sink.setSize(c.w, c.h)
		c.view.setDisplay(c.w, c.h)
		c.sink.setView(c.view)
		if !c.gesture.active() {
			c.gesture.cursor = deskPt{float64(c.w) / 2, float64(c.h) / 2}
		}
	case desktop.Rect:
		c.rects++
	case desktop.FrameEnd:
		c.sink.frameEnd(m.Seq)
	case desktop.CursorShape:
		c.sink.cursorShape(m)
	case desktop.CursorPos:
		c.gesture.setCursor(float64(m.X), float64(m.Y))
		c.sink.cursorPos(int(m.X), int(m.Y), false)
	case desktop.Clipboard:
		c.clipboard = m.Text
	case desktop.ErrorMsg:
		c.err = m.Message
	}
	c.syncCapture()
}

// drawn: the canvas shows every frame up to seq.
func (c *deskClient) drawn(seq uint32) {
	c.frames++
	if c.connected {
		c.sink.send(desktop.Ack{Seq: seq})
	}
}

func (c *deskClient) syncCapture() {
	if h := c.holding(); h != c.capture {
		c.capture = h
		c.sink.setCapture(h)
	}
}

// takeControl and release ask the gateway; its Control message says what happened.
func (c *deskClient) takeControl() {
	if c.connected && c.mode == desktop.ModeDrive {
		c.sink.send(desktop.TakeControl{})
	}
}

func (c *deskClient) release() {
	if c.holding() {
		c.sink.send(desktop.ReleaseControl{})
	}
}

// input sends m if we hold control (the gateway would drop it anyway).
func (c *deskClient) input(ms ...desktop.Message) {
	if !c.holding() {
		return
	}
	for _, m := range ms {
		c.sink.send(m)
	}
}

// The view.

func (c *deskClient) viewport(w, h float64) {
	c.view.setViewport(w, h)
	c.sink.setView(c.view)
}

func (c *deskClient) scrolled(x, y float64) { c.view.setScroll(x, y) }

func (c *deskClient) setFit(fit bool) {
	if fit {
		c.view.setFit()
	} else {
		c.view.setOneToOne(c.view.VW/2, c.view.VH/2)
	}
	c.sink.setView(c.view)
}

func (c *deskClient) setTrackpad(on bool) {
	c.gesture = newDeskGesture()
	c.gesture.Trackpad = on
	c.gesture.cursor = deskPt{float64(c.w) / 2, float64(c.h) / 2}
	if on {
		c.sink.cursorPos(c.w/2, c.h/2, true)
	}
}

// mouse: a mouse or pen event at viewport point (vx, vy) with DOM buttons held.
func (c *deskClient) mouse(vx, vy float64, domButtons int) {
	x, y, inside := c.view.toDisplay(vx, vy)
	b := deskButtons(domButtons)
	if !inside && b == 0 && c.buttons == 0 {
		return // over the margins, nothing held
	}
	c.buttons = b
	c.input(desktop.Pointer{X: x, Y: y, Buttons: b})
}

// wheelEvent: a wheel event at (vx, vy).
func (c *deskClient) wheelEvent(vx, vy, dx, dy float64, mode int) {
	if !c.holding() {
		return
	}
	sx, sy := c.wheel.add(dx, dy, mode)
	if sx == 0 && sy == 0 {
		return
	}
	x, y, _ := c.view.toDisplay(vx, vy)
	c.input(desktop.Wheel{X: x, Y: y, DX: sx, DY: sy})
}

// touch: a touch point went down, moved, or up (kind "down", "move", "up", "cancel").
// Watchers may pinch and pan too; only pointer frames need control.
func (c *deskClient) touch(kind string, id int, vx, vy float64, now time.Time) {
	var acts []deskAct
	switch kind {
	case "down":
		acts = c.gesture.down(id, vx, vy, now, c.view)
		if len(c.gesture.pts) == 1 {
			g := c.gesture
			c.sink.after(deskLongPress, func(t time.Time) {
				if c.gesture == g {
					c.apply(g.timeout(t, c.view))
				}
			})
		}
	case "move":
		acts = c.gesture.move(id, vx, vy, now, c.view)
	case "up", "cancel":
		acts = c.gesture.up(id, now, c.view, kind == "cancel")
	}
	c.apply(acts)
}

func (c *deskClient) apply(acts []deskAct) {
	viewChanged := false
	for _, a := range acts {
		switch a.Kind {
		case deskActPointer:
			c.input(desktop.Pointer{X: a.X, Y: a.Y, Buttons: a.Buttons})
		case deskActWheel:
			c.input(desktop.Wheel{X: a.X, Y: a.Y, DX: a.DX, DY: a.DY})
		case deskActZoom:
			c.view.zoomBy(a.Factor, a.VX, a.VY)
			viewChanged = true
		case deskActPan:
			c.view.panBy(a.VX, a.VY)
			viewChanged = true
		case deskActCursor:
			if c.view.Scale > c.view.fitScale()+1e-9 {
				c.view.reveal(float64(a.X), float64(a.Y), 24)
				viewChanged = true
			}
			c.sink.cursorPos(int(a.X), int(a.Y), true)
		}
	}
	if viewChanged {
		c.sink.setView(c.view)
	}
}

// key: a physical key went down or up (only reported while we capture).
func (c *deskClient) key(down bool, code string) {
	if code == "" || len(code) > desktop.MaxCode {
		return
	}
	if down {
		// A sticky modifier from the keys bar holds for this key.
		mods := deskModCodes(c.mods)
		c.mods = termMods{}
		for _, m := range mods {
			c.input(desktop.Key{Down: true, Code: m})
		}
		if len(mods) > 0 {
			c.held[code] = mods
		}
		c.input(desktop.Key{Down: true, Code: code})
		return
	}
	c.input(desktop.Key{Code: code})
	if mods := c.held[code]; mods != nil {
		delete(c.held, code)
		for i := len(mods) - 1; i >= 0; i-- {
			c.input(desktop.Key{Code: mods[i]})
		}
	}
}

// text: text typed (IME composition, soft keyboard).
func (c *deskClient) text(s string) {
	if s == "" {
		return
	}
	ms := deskTextFrames(s, c.mods)
	c.mods = termMods{}
	c.input(ms...)
}

// barKey: a tap on the keys bar.
func (c *deskClient) barKey(name string) {
	switch name {
	case termKeyCtrl:
		c.mods.Ctrl = !c.mods.Ctrl
		return
	case termKeyAlt:
		c.mods.Alt = !c.mods.Alt
		return
	}
	if ms, ok := deskBarKey(name, c.mods); ok {
		c.mods = termMods{}
		c.input(ms...)
	}
}

// setClipboard puts text on the display's clipboard (drive only, size-capped).
func (c *deskClient) setClipboard(s string) string {
	if !c.holding() {
		return "Take control to paste into the desktop."
	}
	if len(s) > desktop.MaxClipboard {
		return "The clipboard text is over the 1 MiB limit."
	}
	c.sink.send(desktop.SetClipboard{Text: s})
	return ""
}

// What the panel shows, as plain strings (rendered as text, never HTML).

func (c *deskClient) controlText() string {
	switch {
	case !c.connected:
		return ""
	case c.control.Agent:
		if c.control.HolderName != "" {
			return "The agent (" + c.control.HolderName + ") has control"
		}
		return "The agent has control"
	case c.control.HolderID == "":
		return "Nobody has control"
	case c.control.HolderID == c.me:
		return "You have control"
	case deskPerson(c.control.HolderID) == deskPerson(c.me):
		return "You have control in another tab"
	}
	return c.control.HolderName + " has control"
}

func (c *deskClient) viewersText() string {
	parts := make([]string, 0, len(c.viewers))
	for _, v := range c.viewers {
		s := v.Name + " (" + v.Mode.String()
		if v.ID == c.me {
			s += ", you"
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

// deskPerson is the person's part of a wire id: the gateway names each connection
// "<person id>#<conn id>", so one person's tabs share it.
func deskPerson(id string) string {
	if i := strings.LastIndexByte(id, '#'); i >= 0 {
		return id[:i]
	}
	return id
}

// deskCloseStatus is the sentence shown when the connection ended, before a retry in d.
func deskCloseStatus(code int, reason string, d time.Duration) string {
	retry := " Retrying in " + d.Round(100*time.Millisecond).String() + "…"
	if code == 1008 {
		s := "Your access to this desktop was removed or changed"
		if reason != "" {
			s += " (" + reason + ")"
		}
		return s + "." + retry
	}
	if reason != "" {
		return "Connection lost: " + reason + "." + retry
	}
	return "Connection lost." + retry
}
