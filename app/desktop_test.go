package app

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/desktop"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// fitView is a 1280×800 display in a 640×500 viewport, scaled to fit: scale 0.5, the
// picture 640×400 centred vertically (50 px above and below).
func fitView() deskView {
	v := newDeskView()
	v.setViewport(640, 500)
	v.setDisplay(1280, 800)
	return v
}

func TestDeskViewFitMapsViewportToDisplay(t *testing.T) {
	v := fitView()
	if !near(v.Scale, 0.5) {
		t.Fatalf("fit scale = %v, want 0.5", v.Scale)
	}
	if ox, oy := v.off(); !near(ox, 0) || !near(oy, 50) {
		t.Fatalf("offset = %v,%v, want 0,50 (centred)", ox, oy)
	}
	for _, c := range []struct {
		vx, vy float64
		x, y   uint16
		inside bool
	}{
		{0, 50, 0, 0, true},
		{320, 250, 640, 400, true},
		{639.9, 449.9, 1279, 799, true},
		{100, 10, 200, 0, false},     // the margin above: clamped to the top row
		{700, 600, 1279, 799, false}, // beyond: clamped to the corner
	} {
		x, y, in := v.toDisplay(c.vx, c.vy)
		if x != c.x || y != c.y || in != c.inside {
			t.Errorf("toDisplay(%v,%v) = %d,%d inside=%v, want %d,%d inside=%v", c.vx, c.vy, x, y, in, c.x, c.y, c.inside)
		}
	}
	// A new viewport size refits.
	v.setViewport(1280, 900)
	if !near(v.Scale, 1) {
		t.Errorf("after resize to 1280x900, scale = %v, want 1", v.Scale)
	}
}

func TestDeskViewOneToOneScrolls(t *testing.T) {
	v := fitView()
	v.setOneToOne(320, 250) // the viewport's centre stays on display point 640,400
	if v.Fit || !near(v.Scale, 1) {
		t.Fatalf("1:1: fit=%v scale=%v", v.Fit, v.Scale)
	}
	if !near(v.ScrollX, 320) || !near(v.ScrollY, 150) {
		t.Fatalf("1:1 scroll = %v,%v, want 320,150", v.ScrollX, v.ScrollY)
	}
	if x, y, _ := v.toDisplay(0, 0); x != 320 || y != 150 {
		t.Errorf("top-left at 1:1 = %d,%d, want 320,150", x, y)
	}
	if x, y, _ := v.toDisplay(320, 250); x != 640 || y != 400 {
		t.Errorf("centre at 1:1 = %d,%d, want 640,400", x, y)
	}
	// Scrolling is clamped to the picture.
	v.setScroll(5000, -20)
	if !near(v.ScrollX, 640) || !near(v.ScrollY, 0) {
		t.Errorf("scroll clamped = %v,%v, want 640,0", v.ScrollX, v.ScrollY)
	}
	if x, y, _ := v.toDisplay(639, 499); x != 1279 || y != 499 {
		t.Errorf("bottom-right after scrolling right = %d,%d, want 1279,499", x, y)
	}
	// Round trip.
	vx, vy := v.toViewport(1000, 300)
	if x, y, _ := v.toDisplay(vx, vy); x != 1000 || y != 300 {
		t.Errorf("round trip of 1000,300 = %d,%d", x, y)
	}
	v.setFit()
	if !near(v.Scale, 0.5) || v.ScrollX != 0 {
		t.Errorf("back to fit: scale %v scroll %v", v.Scale, v.ScrollX)
	}
}

func TestDeskViewZoomKeepsPointUnderFingers(t *testing.T) {
	v := fitView()
	bx, by := v.toDisplayF(200, 150)
	v.zoomBy(2, 200, 150)
	if !near(v.Scale, 1) {
		t.Fatalf("zoom ×2 from 0.5 = %v", v.Scale)
	}
	ax, ay := v.toDisplayF(200, 150)
	if !near(ax, bx) || !near(ay, by) {
		t.Errorf("point under the fingers moved: %v,%v → %v,%v", bx, by, ax, ay)
	}
	v.zoomBy(100, 0, 0)
	if !near(v.Scale, deskMaxScale) {
		t.Errorf("zoom is capped at %v, got %v", deskMaxScale, v.Scale)
	}
	v.zoomBy(0.001, 0, 0)
	if !near(v.Scale, 0.5) {
		t.Errorf("zoom out stops at the fit scale 0.5, got %v", v.Scale)
	}
	// Panning moves the picture with the fingers.
	v.zoomTo(2, 0, 0)
	before, _ := v.toDisplayF(100, 100)
	v.panBy(-50, 0) // fingers move left: the picture follows, what was right comes under
	after, _ := v.toDisplayF(100, 100)
	if !near(after-before, 25) { // 50 CSS px at scale 2
		t.Errorf("pan by -50 px at scale 2 moved the display point by %v, want 25", after-before)
	}
}

func TestDeskViewReveal(t *testing.T) {
	v := fitView()
	v.zoomTo(2, 0, 0)
	v.reveal(1200, 700, 24)
	vx, vy := v.toViewport(1200, 700)
	if vx < 24-1e-6 || vx > 640-24+1e-6 || vy < 24-1e-6 || vy > 500-24+1e-6 {
		t.Errorf("after reveal, 1200,700 is at %v,%v: outside the viewport's margin", vx, vy)
	}
}

func TestDeskButtonsAndWheel(t *testing.T) {
	for dom, want := range map[int]uint8{0: 0, 1: desktop.ButtonLeft, 2: desktop.ButtonRight, 4: desktop.ButtonMiddle, 7: 7, 3: desktop.ButtonLeft | desktop.ButtonRight} {
		if got := deskButtons(dom); got != want {
			t.Errorf("deskButtons(%d) = %d, want %d", dom, got, want)
		}
	}
	var w deskWheel
	if dx, dy := w.add(0, 100, 0); dx != 0 || dy != 1 {
		t.Errorf("one mouse notch = %d,%d, want 0,1", dx, dy)
	}
	var steps int16
	for range 10 { // a touchpad: many small deltas add up
		_, dy := w.add(0, -25, 0)
		steps += dy
	}
	if steps != -2 {
		t.Errorf("10×-25 px = %d steps, want -2", steps)
	}
	if dx, dy := w.add(6, 0, 1); dx != 2 || dy != 0 {
		t.Errorf("6 lines right = %d,%d, want 2,0", dx, dy)
	}
}

// deskRec records what the client does.
type deskRec struct {
	sent    []desktop.Message
	size    [2]int
	view    deskView
	ends    []uint32
	capture bool
	cursor  [3]int
	timers  []func(time.Time)
}

func (r *deskRec) send(m desktop.Message)          { r.sent = append(r.sent, m) }
func (r *deskRec) setSize(w, h int)                { r.size = [2]int{w, h} }
func (r *deskRec) setView(v deskView)              { r.view = v }
func (r *deskRec) frameEnd(seq uint32)             { r.ends = append(r.ends, seq) }
func (r *deskRec) cursorShape(desktop.CursorShape) {}
func (r *deskRec) cursorPos(x, y int, local bool) {
	r.cursor = [3]int{x, y, map[bool]int{false: 0, true: 1}[local]}
}
func (r *deskRec) setCapture(on bool)                       { r.capture = on }
func (r *deskRec) after(_ time.Duration, f func(time.Time)) { r.timers = append(r.timers, f) }
func (r *deskRec) take() []desktop.Message                  { s := r.sent; r.sent = nil; return s }

// connected returns a client that got Hello (id "me"), a 1280×800 screen, and a 640×500
// viewport; holding says whether Control names us.
func connectedClient(t *testing.T, mode desktop.Mode, holding bool) (*deskClient, *deskRec) {
	t.Helper()
	r := &deskRec{}
	c := newDeskClient(r, mode)
	c.viewport(640, 500)
	c.handle(desktop.Hello{Version: desktop.ProtocolVersion, Mode: mode, ViewerID: "me", ViewerName: "alice"})
	c.handle(desktop.Screen{W: 1280, H: 800})
	holder := desktop.Control{HolderID: "other", HolderName: "bob"}
	if holding {
		holder = desktop.Control{HolderID: "me", HolderName: "alice"}
	}
	c.handle(holder)
	r.take()
	return c, r
}

func TestDeskClientInputOnlyWhileHoldingControl(t *testing.T) {
	c, r := connectedClient(t, desktop.ModeDrive, false)
	if c.holding() || r.capture {
		t.Fatalf("holding=%v capture=%v before taking control", c.holding(), r.capture)
	}
	c.mouse(320, 250, 1)
	c.key(true, "KeyA")
	c.text("x")
	if got := r.take(); len(got) != 0 {
		t.Fatalf("sent %v without holding control, want nothing", got)
	}
	if c.controlText() != "bob has control" {
		t.Errorf("control text = %q", c.controlText())
	}
	c.takeControl()
	if got := r.take(); !reflect.DeepEqual(got, []desktop.Message{desktop.TakeControl{}}) {
		t.Fatalf("take control sent %v", got)
	}
	c.handle(desktop.Control{HolderID: "me", HolderName: "alice"})
	if !c.holding() || !r.capture || c.controlText() != "You have control" {
		t.Fatalf("after Control(me): holding=%v capture=%v text=%q", c.holding(), r.capture, c.controlText())
	}
	c.mouse(320, 250, 1) // the centre of the fitted picture, left button
	c.mouse(320, 250, 0) // released
	c.mouse(100, 10, 0)  // over the margin, nothing held: not sent
	c.wheelEvent(320, 250, 0, 100, 0)
	want := []desktop.Message{
		desktop.Pointer{X: 640, Y: 400, Buttons: desktop.ButtonLeft},
		desktop.Pointer{X: 640, Y: 400},
		desktop.Wheel{X: 640, Y: 400, DY: 1},
	}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("input sent\n got %v\nwant %v", got, want)
	}
	c.release()
	if got := r.take(); !reflect.DeepEqual(got, []desktop.Message{desktop.ReleaseControl{}}) {
		t.Errorf("release sent %v", got)
	}
	// The agent takes over: our input stops.
	c.handle(desktop.Control{HolderID: "agent", HolderName: "bot", Agent: true})
	c.key(true, "KeyB")
	if got := r.take(); len(got) != 0 || r.capture {
		t.Errorf("while the agent holds control: sent %v, capture %v", got, r.capture)
	}
	if c.controlText() != "The agent (bot) has control" {
		t.Errorf("control text = %q", c.controlText())
	}
}

func TestDeskClientWatcherSendsNoInput(t *testing.T) {
	c, r := connectedClient(t, desktop.ModeWatch, false)
	c.takeControl()
	c.handle(desktop.Control{HolderID: "me"}) // even if a gateway said so
	c.mouse(320, 250, 1)
	c.touch("down", 1, 320, 250, time.Now())
	c.touch("up", 1, 320, 250, time.Now())
	if got := r.take(); len(got) != 0 {
		t.Errorf("a watcher sent %v", got)
	}
}

func TestDeskClientFramesAreAckedAfterDrawing(t *testing.T) {
	c, r := connectedClient(t, desktop.ModeWatch, false)
	if r.size != [2]int{1280, 800} || !near(r.view.Scale, 0.5) {
		t.Fatalf("Screen: size %v view %+v", r.size, r.view)
	}
	c.handle(desktop.Rect{X: 0, Y: 0, W: 64, H: 64, Enc: desktop.EncJPEG, Data: []byte{1}})
	c.handle(desktop.FrameEnd{Seq: 7})
	if len(r.sent) != 0 {
		t.Fatalf("acknowledged before drawing: %v", r.sent)
	}
	if !reflect.DeepEqual(r.ends, []uint32{7}) {
		t.Fatalf("frameEnd calls %v", r.ends)
	}
	c.drawn(7)
	if got := r.take(); !reflect.DeepEqual(got, []desktop.Message{desktop.Ack{Seq: 7}}) {
		t.Errorf("after drawing sent %v, want Ack 7", got)
	}
	c.disconnected()
	c.drawn(8) // a frame of the old connection: not acknowledged on the next
	if got := r.take(); len(got) != 0 {
		t.Errorf("disconnected client sent %v", got)
	}
}

func TestDeskClientTexts(t *testing.T) {
	c, _ := connectedClient(t, desktop.ModeDrive, true)
	c.handle(desktop.Viewers{Viewers: []desktop.ViewerInfo{{ID: "me", Name: "alice", Mode: desktop.ModeDrive}, {ID: "x", Name: "<b>eve</b>", Mode: desktop.ModeWatch}}})
	if got, want := c.viewersText(), "alice (driving, you), <b>eve</b> (watching)"; got != want {
		t.Errorf("viewers = %q, want %q", got, want)
	}
	c.handle(desktop.Control{})
	if c.controlText() != "Nobody has control" {
		t.Errorf("control text = %q", c.controlText())
	}
	s := deskCloseStatus(1008, "your permissions changed; reconnect", 2*time.Second)
	if !strings.HasPrefix(s, "Your access to this desktop was removed or changed (your permissions changed; reconnect).") || !strings.Contains(s, "Retrying in 2s") {
		t.Errorf("1008 status = %q", s)
	}
	if s := deskCloseStatus(1006, "", time.Second); s != "Connection lost. Retrying in 1s…" {
		t.Errorf("1006 status = %q", s)
	}
}

func TestDeskClientStickyModsAndKeysBar(t *testing.T) {
	c, r := connectedClient(t, desktop.ModeDrive, true)
	c.barKey(termKeyCtrl)
	c.text("c") // a soft keyboard's "c" with Ctrl armed: Ctrl+C by key
	want := []desktop.Message{
		desktop.Key{Down: true, Code: "ControlLeft"}, desktop.Key{Down: true, Code: "KeyC"},
		desktop.Key{Code: "KeyC"}, desktop.Key{Code: "ControlLeft"},
	}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("Ctrl then c:\n got %v\nwant %v", got, want)
	}
	c.text("hé") // disarmed: text
	if got := r.take(); !reflect.DeepEqual(got, []desktop.Message{desktop.Text{Text: "hé"}}) {
		t.Errorf("text = %v", got)
	}
	// A physical key with Alt armed holds Alt until that key is released.
	c.barKey(termKeyAlt)
	c.key(true, "Tab")
	c.key(false, "Tab")
	want = []desktop.Message{desktop.Key{Down: true, Code: "AltLeft"}, desktop.Key{Down: true, Code: "Tab"}, desktop.Key{Code: "Tab"}, desktop.Key{Code: "AltLeft"}}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("Alt then Tab:\n got %v\nwant %v", got, want)
	}
	// The bar's own keys: Esc by key, | by text.
	c.barKey("esc")
	c.barKey("pipe")
	want = []desktop.Message{desktop.Key{Down: true, Code: "Escape"}, desktop.Key{Code: "Escape"}, desktop.Text{Text: "|"}}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("Esc, |:\n got %v\nwant %v", got, want)
	}
	// Every key of the shared bar does something on a desktop.
	for _, k := range termKeys {
		if k.Seq == "" {
			continue
		}
		if ms, ok := deskBarKey(k.Name, termMods{}); !ok || len(ms) == 0 {
			t.Errorf("keys-bar key %q sends nothing on the desktop", k.Name)
		}
	}
	// Long text is cut within the wire limit, never inside a character.
	long := strings.Repeat("é", desktop.MaxText) // 2 bytes each
	ms := deskTextFrames(long, termMods{})
	var joined string
	for _, m := range ms {
		tx := m.(desktop.Text).Text
		if len(tx) > desktop.MaxText {
			t.Fatalf("a Text frame of %d bytes", len(tx))
		}
		if _, err := desktop.Decode(desktop.Encode(m)); err != nil {
			t.Fatalf("frame does not decode: %v", err)
		}
		joined += tx
	}
	if joined != long {
		t.Errorf("long text was altered when cut")
	}
}

// TestDeskGestures feeds touch events to a client and checks the frames it sends.
func TestDeskGestures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	L, R := desktop.ButtonLeft, desktop.ButtonRight

	t.Run("tap is a left click where the finger lands", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeDrive, true)
		c.touch("down", 1, 320, 250, at(0))
		c.touch("move", 1, 323, 252, at(50)) // within the slop
		c.touch("up", 1, 323, 252, at(120))
		want := []desktop.Message{desktop.Pointer{X: 646, Y: 404}, desktop.Pointer{X: 646, Y: 404, Buttons: L}, desktop.Pointer{X: 646, Y: 404}}
		if got := r.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("tap:\n got %v\nwant %v", got, want)
		}
		// The long-press timer fires after the finger lifted: nothing.
		for _, f := range r.timers {
			f(at(600))
		}
		if got := r.take(); len(got) != 0 {
			t.Errorf("late long-press timer sent %v", got)
		}
	})
	t.Run("long-press is a right click", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeDrive, true)
		c.touch("down", 1, 100, 100, at(0))
		r.timers[0](at(499)) // early: nothing
		if got := r.take(); len(got) != 0 {
			t.Fatalf("before 500 ms: %v", got)
		}
		r.timers[0](at(520))
		c.touch("up", 1, 100, 100, at(800))
		want := []desktop.Message{desktop.Pointer{X: 200, Y: 100}, desktop.Pointer{X: 200, Y: 100, Buttons: R}, desktop.Pointer{X: 200, Y: 100}}
		if got := r.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("long-press:\n got %v\nwant %v", got, want)
		}
	})
	t.Run("drag holds the left button", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeDrive, true)
		c.touch("down", 1, 100, 100, at(0))
		c.touch("move", 1, 150, 100, at(50))
		c.touch("move", 1, 200, 120, at(100))
		r.timers[0](at(600)) // moving: no right click
		c.touch("up", 1, 200, 120, at(150))
		want := []desktop.Message{
			desktop.Pointer{X: 200, Y: 100}, desktop.Pointer{X: 200, Y: 100, Buttons: L},
			desktop.Pointer{X: 300, Y: 100, Buttons: L}, desktop.Pointer{X: 400, Y: 140, Buttons: L},
			desktop.Pointer{X: 400, Y: 140},
		}
		if got := r.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("drag:\n got %v\nwant %v", got, want)
		}
	})
	t.Run("two fingers together scroll", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeDrive, true)
		c.touch("down", 1, 300, 300, at(0))
		c.touch("down", 2, 360, 300, at(10))
		for i := 1; i <= 4; i++ { // both fingers up by 4×20 px: 80 px = 2 whole steps down
			c.touch("move", 1, 300, 300-float64(20*i), at(10+20*i))
			c.touch("move", 2, 360, 300-float64(20*i), at(10+20*i))
		}
		c.touch("up", 1, 300, 220, at(200))
		c.touch("up", 2, 360, 220, at(200))
		var dy int16
		for _, m := range r.take() {
			w, ok := m.(desktop.Wheel)
			if !ok {
				t.Fatalf("two-finger scroll sent %#v, want only Wheel", m)
			}
			if w.X != 660 || w.Y != 500 {
				t.Errorf("wheel at %d,%d, want under the fingers' start 660,500", w.X, w.Y)
			}
			dy += w.DY
		}
		if dy != 2 {
			t.Errorf("scrolled %d steps, want 2 (down: the fingers moved up)", dy)
		}
		if !c.view.Fit {
			t.Errorf("scrolling zoomed the view")
		}
	})
	t.Run("pinch zooms the view, sends nothing", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeWatch, false) // watchers may zoom too
		c.touch("down", 1, 300, 250, at(0))
		c.touch("down", 2, 340, 250, at(10))
		c.touch("move", 1, 260, 250, at(30))
		c.touch("move", 2, 380, 250, at(30)) // distance 40 → 120: ×3
		c.touch("up", 1, 260, 250, at(60))
		c.touch("up", 2, 380, 250, at(60))
		if len(r.sent) != 0 {
			t.Errorf("pinch sent %v", r.sent)
		}
		if c.view.Fit || c.view.Scale < 1.2 {
			t.Errorf("after pinching out, scale = %v fit=%v, want zoomed in", c.view.Scale, c.view.Fit)
		}
		if !near(r.view.Scale, c.view.Scale) {
			t.Errorf("the canvas was not told about the zoom")
		}
	})
	t.Run("trackpad moves a cursor, taps click at it", func(t *testing.T) {
		c, r := connectedClient(t, desktop.ModeDrive, true)
		c.setTrackpad(true) // cursor starts at the centre, 640,400
		c.touch("down", 1, 50, 50, at(0))
		c.touch("move", 1, 70, 40, at(30)) // +20,-10 CSS px at scale 0.5 = +40,-20 display px
		c.touch("up", 1, 70, 40, at(60))
		c.touch("down", 1, 500, 400, at(1000)) // a tap anywhere clicks at the cursor
		c.touch("up", 1, 500, 400, at(1080))
		want := []desktop.Message{
			desktop.Pointer{X: 680, Y: 380},
			desktop.Pointer{X: 680, Y: 380}, desktop.Pointer{X: 680, Y: 380, Buttons: L}, desktop.Pointer{X: 680, Y: 380},
		}
		if got := r.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("trackpad:\n got %v\nwant %v", got, want)
		}
		if r.cursor != [3]int{680, 380, 1} {
			t.Errorf("local cursor = %v, want 680,380 (local)", r.cursor)
		}
		// Tap, then touch again and move: a drag with the left button.
		c.touch("down", 1, 100, 100, at(1200))
		c.touch("move", 1, 130, 100, at(1230))
		c.touch("up", 1, 130, 100, at(1260))
		want = []desktop.Message{desktop.Pointer{X: 680, Y: 380, Buttons: L}, desktop.Pointer{X: 740, Y: 380, Buttons: L}, desktop.Pointer{X: 740, Y: 380}}
		if got := r.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("trackpad tap-drag:\n got %v\nwant %v", got, want)
		}
	})
}

// The gateway's ids are per connection ("<person>#<conn>"): of one person's two tabs only
// the one whose Hello id is Control's holds control; the other shows "Take control".
func TestDeskClientTwoTabsOfOnePerson(t *testing.T) {
	r := &deskRec{}
	c := newDeskClient(r, desktop.ModeDrive)
	c.viewport(640, 500)
	c.handle(desktop.Hello{Version: desktop.ProtocolVersion, Mode: desktop.ModeDrive, ViewerID: "u1#7", ViewerName: "alice"})
	c.handle(desktop.Screen{W: 1280, H: 800})
	c.handle(desktop.Control{HolderID: "u1#6", HolderName: "alice"}) // alice's other tab
	c.handle(desktop.Viewers{Viewers: []desktop.ViewerInfo{{ID: "u1#6", Name: "alice", Mode: desktop.ModeDrive}, {ID: "u1#7", Name: "alice", Mode: desktop.ModeDrive}}})
	r.take()
	if c.holding() || r.capture {
		t.Fatalf("the other tab holds control, yet holding=%v capture=%v", c.holding(), r.capture)
	}
	if got := c.controlText(); got != "You have control in another tab" {
		t.Errorf("control text = %q", got)
	}
	if got := c.viewersText(); got != "alice (driving), alice (driving, you)" {
		t.Errorf("viewers text = %q", got)
	}
	c.key(true, "KeyA")
	c.release()
	if got := r.take(); len(got) != 0 {
		t.Fatalf("sent %v from the tab that does not hold control", got)
	}
	c.takeControl()
	c.handle(desktop.Control{HolderID: "u1#7", HolderName: "alice"})
	if !c.holding() || !r.capture || c.controlText() != "You have control" {
		t.Fatalf("after taking over: holding=%v capture=%v text=%q", c.holding(), r.capture, c.controlText())
	}
}
