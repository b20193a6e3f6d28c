package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// Input on the agent's real display, asserted on what an X program there saw: xev, run in
// the agent's bwrap jail through the exec API, prints every pointer and key event of its
// window to a file in the agent's home, which the tests read back through exec.

// xevEvent is one event xev printed.
type xevEvent struct {
	Type         string // ButtonPress, ButtonRelease, MotionNotify, KeyPress, KeyRelease, ...
	RootX, RootY int    // the pointer on the screen
	State        int    // modifier and button mask (0x1 Shift, 0x4 Control, 0x100 Button1)
	Button       int    // ButtonPress/ButtonRelease
	Keysym       string // KeyPress/KeyRelease: the keysym's name, after modifiers ("a", "ISO_Left_Tab")
}

func (e xevEvent) String() string {
	return fmt.Sprintf("%s at (%d,%d) state %#x button %d keysym %q", e.Type, e.RootX, e.RootY, e.State, e.Button, e.Keysym)
}

var (
	xevHeadRE   = regexp.MustCompile(`^(\w+) event, serial`)
	xevRootRE   = regexp.MustCompile(`root:\((-?\d+),(-?\d+)\)`)
	xevStateRE  = regexp.MustCompile(`\bstate 0x([0-9a-f]+)`)
	xevButtonRE = regexp.MustCompile(`\bbutton (\d+)`)
	xevKeysymRE = regexp.MustCompile(`\(keysym 0x[0-9a-f]+, ([^)]+)\)`)
)

// parseXev splits xev's output into events (blank-line separated blocks).
func parseXev(log string) []xevEvent {
	var out []xevEvent
	for _, block := range strings.Split(log, "\n\n") {
		block = strings.TrimSpace(block)
		m := xevHeadRE.FindStringSubmatch(block)
		if m == nil {
			continue
		}
		e := xevEvent{Type: m[1]}
		if r := xevRootRE.FindStringSubmatch(block); r != nil {
			e.RootX, _ = strconv.Atoi(r[1])
			e.RootY, _ = strconv.Atoi(r[2])
		}
		if s := xevStateRE.FindStringSubmatch(block); s != nil {
			v, _ := strconv.ParseInt(s[1], 16, 32)
			e.State = int(v)
		}
		if strings.HasPrefix(e.Type, "Button") {
			if b := xevButtonRE.FindStringSubmatch(block); b != nil {
				e.Button, _ = strconv.Atoi(b[1])
			}
		}
		if k := xevKeysymRE.FindStringSubmatch(block); k != nil {
			e.Keysym = k[1]
		}
		out = append(out, e)
	}
	return out
}

// xevWindow is an xev test program on an agent's display.
type xevWindow struct {
	g          *gateway
	agentID    string
	name       string
	X, Y, W, H int // the window on the screen
}

var xwinAbsRE = regexp.MustCompile(`Absolute upper-left (X|Y):\s+(-?\d+)`)

// startXev runs xev (pointer and key events) in a w×h window named name on the agent's
// display through the exec API until the test ends, and waits until its window is viewable.
// The display must be running (a viewer or a screenshot started it).
func startXev(t *testing.T, g *gateway, agentID, name string, w, h int) *xevWindow {
	t.Helper()
	x := &xevWindow{g: g, agentID: agentID, name: name, W: w, H: h}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: this test; ends when cleanup cancels the exec
		defer wg.Done()
		body, _ := json.Marshal(api.ExecRequest{
			Command: []string{"sh", "-c", fmt.Sprintf(`exec xev -geometry %dx%d+200+150 -name %s -event mouse -event keyboard >"$HOME/%s.xev" 2>&1`,
				w, h, name, name)},
			TimeoutS: 600,
		})
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/api/agents/"+agentID+"/exec", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", g.URL)
		resp, err := (&http.Client{Jar: g.client.Jar}).Do(req)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("exec xev: %v", err)
			}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ctx.Err() == nil {
			t.Errorf("xev ended early: %d %s", resp.StatusCode, b)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out api.ExecResult
		g.call(t, "POST", "/api/agents/"+agentID+"/exec", sh("xwininfo -name "+name+" 2>&1"), http.StatusOK, &out)
		ms := xwinAbsRE.FindAllStringSubmatch(out.Stdout, -1)
		if out.ExitCode == 0 && len(ms) == 2 && strings.Contains(out.Stdout, "IsViewable") {
			x.X, _ = strconv.Atoi(ms[0][2])
			x.Y, _ = strconv.Atoi(ms[1][2])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("xev's window %s is not on the display: exit %d %s", name, out.ExitCode, out.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("xev %s at %d,%d (%dx%d)", name, x.X, x.Y, w, h)
	return x
}

// at is the screen point (dx, dy) inside the window.
func (x *xevWindow) at(dx, dy int) (int, int) { return x.X + dx, x.Y + dy }

// events returns every event xev recorded so far.
func (x *xevWindow) events(t *testing.T) []xevEvent {
	t.Helper()
	var out api.ExecResult
	x.g.call(t, "POST", "/api/agents/"+x.agentID+"/exec", sh(`cat "$HOME/`+x.name+`.xev"`), http.StatusOK, &out)
	if out.ExitCode != 0 {
		t.Fatalf("read xev's log: exit %d %s", out.ExitCode, out.Stderr)
	}
	return parseXev(out.Stdout)
}

// waitFor polls xev's events until ok holds of them and returns them.
func (x *xevWindow) waitFor(t *testing.T, what string, ok func([]xevEvent) bool) []xevEvent {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ev := x.events(t)
		if ok(ev) {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("xev did not record %s; it recorded:\n%s", what, dumpXev(ev))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func dumpXev(ev []xevEvent) string {
	var b strings.Builder
	for _, e := range ev {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}

// count counts the events of type typ matching f (nil: all of that type).
func count(ev []xevEvent, typ string, f func(xevEvent) bool) int {
	n := 0
	for _, e := range ev {
		if e.Type == typ && (f == nil || f(e)) {
			n++
		}
	}
	return n
}

// pressAt matches a press or release of button b at (x, y).
func pressAt(b, x, y int) func(xevEvent) bool {
	return func(e xevEvent) bool { return e.Button == b && e.RootX == x && e.RootY == y }
}

func keysym(name string) func(xevEvent) bool {
	return func(e xevEvent) bool { return e.Keysym == name }
}

// clickFrames are a left click at (x, y) on the viewer WebSocket: move, press, release.
func clickFrames(x, y int, button uint8) [][]byte {
	p := desktop.Pointer{X: uint16(x), Y: uint16(y)}
	down := p
	down.Buttons = button
	return [][]byte{desktop.Encode(p), desktop.Encode(down), desktop.Encode(p)}
}

func keyFrames(code string) [][]byte {
	return [][]byte{desktop.Encode(desktop.Key{Down: true, Code: code}), desktop.Encode(desktop.Key{Code: code})}
}

// TestDesktopViewerInput: through a real gateway and a real bwrap agent's display, a
// watch-only sharee's viewer WebSocket sends clicks, keys, text and a wheel: the X program on
// the display records none of it, and the watcher is told it is watching (its TakeControl is
// refused too). The owner's input before taking control is dropped as well ("take control
// first"); after TakeControl the owner's click and keys reach the program, at the point
// clicked, and so do the owner's wheel (buttons 4 and 5 up and down, 6 and 7 left and right,
// one press per step) and drag (press, motion with the button held, release).
func TestDesktopViewerInput(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xev")
	testenv.LookPath(t, "xwininfo")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-desktop-watcher")
	requireDesktopSurface(t, g, agent.ID)
	share := api.LevelWatch
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
	bob := g.addUser(t, "bob")

	owner := dialScreen(t, g, agent.ID, api.SurfaceDesktop, "the owner")
	watcher := dialScreen(t, bob, agent.ID, api.SurfaceDesktop, "bob (watch)")
	if code, b := desktopReq(t, g, g.client, "", "GET", "/api/agents/"+agent.ID+"/desktop/screenshot", nil); code != http.StatusOK {
		t.Fatalf("the owner's screenshot (starts the display) = %d %s", code, b)
	}
	xw := startXev(t, g, agent.ID, "porthole-watch-xev", 400, 300)

	// The owner clicks before taking control: dropped, and told why.
	ox, oy := xw.at(20, 20)
	for _, f := range clickFrames(ox, oy, desktop.ButtonLeft) {
		owner.send(f)
	}
	owner.erred(t, "your input was dropped", "take control first")

	// The owner takes control, clicks (which also focuses the window) and types 'd'.
	owner.send(desktop.Encode(desktop.TakeControl{}))
	owner.holds(t, owner)
	watcher.holds(t, owner)
	dx, dy := xw.at(300, 200)
	for _, f := range append(clickFrames(dx, dy, desktop.ButtonLeft), keyFrames("KeyD")...) {
		owner.send(f)
	}
	xw.waitFor(t, "the driver's click and 'd'", func(ev []xevEvent) bool {
		return count(ev, "ButtonPress", pressAt(1, dx, dy)) == 1 && count(ev, "ButtonRelease", pressAt(1, dx, dy)) == 1 &&
			count(ev, "KeyPress", keysym("d")) == 1
	})

	// The watcher, while the owner holds control and the window has the focus: a left and a
	// right click, keys, text and a wheel at its own point.
	wx, wy := xw.at(100, 60)
	var frames [][]byte
	frames = append(frames, clickFrames(wx, wy, desktop.ButtonLeft)...)
	frames = append(frames, clickFrames(wx, wy, desktop.ButtonRight)...)
	frames = append(frames, keyFrames("KeyW")...)
	frames = append(frames, desktop.Encode(desktop.Text{Text: "q"}))
	frames = append(frames, desktop.Encode(desktop.Wheel{X: uint16(wx), Y: uint16(wy), DY: 2}))
	for _, f := range frames {
		watcher.send(f)
	}
	watcher.erred(t, "you are watching this desktop: your input was dropped")
	watcher.send(desktop.Encode(desktop.TakeControl{}))
	watcher.erred(t, "you are watching this desktop: only drivers can take control")
	owner.holds(t, owner)

	// The driver's next key, sent after the watcher's input was answered, arrives; nothing of
	// the watcher's did (before it or since).
	for _, f := range keyFrames("KeyE") {
		owner.send(f)
	}
	ev := xw.waitFor(t, "the driver's 'e'", func(ev []xevEvent) bool { return count(ev, "KeyPress", keysym("e")) == 1 })
	time.Sleep(500 * time.Millisecond)
	ev = xw.events(t)
	for _, e := range ev {
		switch {
		case e.RootX == wx && e.RootY == wy:
			t.Errorf("the watcher's input reached the program: %v", e)
		case e.RootX == ox && e.RootY == oy:
			t.Errorf("the owner's input from before taking control reached the program: %v", e)
		case e.Type == "KeyPress" && e.Keysym != "d" && e.Keysym != "e":
			t.Errorf("a key the driver did not press reached the program: %v", e)
		case e.Type == "ButtonPress" && !(e.Button == 1 && e.RootX == dx && e.RootY == dy):
			t.Errorf("a button the driver did not press reached the program: %v", e)
		}
	}
	if t.Failed() {
		t.Logf("xev recorded:\n%s", dumpXev(ev))
	}

	// The driver's wheel: one press (and release) of the wheel's button per step, where the
	// pointer is.
	for _, c := range []struct {
		dx, dy          int16
		button, presses int
	}{
		{0, -2, 4, 2}, // up
		{0, 3, 5, 3},  // down
		{-1, 0, 6, 1}, // left
		{2, 0, 7, 2},  // right
	} {
		x, y := xw.at(60+40*c.button, 250)
		owner.send(desktop.Encode(desktop.Wheel{X: uint16(x), Y: uint16(y), DX: c.dx, DY: c.dy}))
		ev := xw.waitFor(t, fmt.Sprintf("Wheel{DX: %d, DY: %d} at (%d,%d): %d presses of button %d", c.dx, c.dy, x, y, c.presses, c.button),
			func(ev []xevEvent) bool { return count(ev, "ButtonRelease", pressAt(c.button, x, y)) >= c.presses })
		n := 0
		for _, e := range ev {
			if e.Type == "ButtonPress" && e.RootX == x && e.RootY == y {
				if e.Button != c.button {
					t.Errorf("Wheel{DX: %d, DY: %d} pressed %v, want only button %d", c.dx, c.dy, e, c.button)
				}
				n++
			}
		}
		if n != c.presses {
			t.Errorf("Wheel{DX: %d, DY: %d} = %d presses at (%d,%d), want %d", c.dx, c.dy, n, x, y, c.presses)
		}
	}

	// The driver's drag: press at a, move through m to b with the left button held, release.
	ax, ay := xw.at(40, 100)
	mx, my := xw.at(150, 140)
	bx, by := xw.at(330, 180)
	for _, p := range []desktop.Pointer{
		{X: uint16(ax), Y: uint16(ay)},
		{X: uint16(ax), Y: uint16(ay), Buttons: desktop.ButtonLeft},
		{X: uint16(mx), Y: uint16(my), Buttons: desktop.ButtonLeft},
		{X: uint16(bx), Y: uint16(by), Buttons: desktop.ButtonLeft},
		{X: uint16(bx), Y: uint16(by)},
	} {
		owner.send(desktop.Encode(p))
	}
	ev = xw.waitFor(t, fmt.Sprintf("the drag's release at (%d,%d)", bx, by), func(ev []xevEvent) bool {
		return count(ev, "ButtonRelease", pressAt(1, bx, by)) == 1
	})
	if count(ev, "ButtonPress", pressAt(1, ax, ay)) != 1 {
		t.Errorf("the drag: no press of button 1 at its start (%d,%d)", ax, ay)
	}
	held := func(x, y int) func(xevEvent) bool {
		return func(e xevEvent) bool { return e.RootX == x && e.RootY == y && e.State&0x100 != 0 }
	}
	// The X server may fold back-to-back motions into the last (a loaded machine did: no event
	// at the middle point); the drag's end must arrive with the button held.
	if count(ev, "MotionNotify", held(bx, by)) == 0 {
		t.Errorf("the drag: no motion to (%d,%d) with button 1 held", bx, by)
	}
	if count(ev, "MotionNotify", held(mx, my)) == 0 {
		t.Logf("the drag's middle point (%d,%d) was folded into its end", mx, my)
	}
	if count(ev, "ButtonPress", pressAt(1, mx, my))+count(ev, "ButtonPress", pressAt(1, bx, by)) != 0 {
		t.Errorf("the drag pressed the button again on its way")
	}
	if t.Failed() {
		t.Logf("xev recorded:\n%s", dumpXev(ev))
	}
}

// computerUse is an agent with its token, its display running and xev on it.
type computerUse struct {
	g     *gateway
	tok   api.Token
	base  string
	full  image.Rectangle // the screen
	xw    *xevWindow
	agent api.Agent
}

func startComputerUse(t *testing.T, name string) *computerUse {
	t.Helper()
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xev")
	testenv.LookPath(t, "xwininfo")
	cu := &computerUse{g: startGateway(t)}
	cu.agent = cu.g.createAgent(t, name)
	requireDesktopSurface(t, cu.g, cu.agent.ID)
	cu.g.call(t, "POST", "/api/agents/"+cu.agent.ID+"/tokens", nil, http.StatusCreated, &cu.tok)
	cu.base = "/api/agents/" + cu.agent.ID + "/desktop"
	cu.full = pngShot(t, cu.g, cu.tok.Secret, cu.agent.ID).Bounds() // starts the display
	cu.xw = startXev(t, cu.g, cu.agent.ID, "porthole-cu-xev", 400, 300)
	return cu
}

// act runs one action with the agent's token; it must answer 200.
func (cu *computerUse) act(t *testing.T, a desktop.Action) desktop.ActionResult {
	t.Helper()
	code, b := desktopReq(t, cu.g, nil, cu.tok.Secret, "POST", cu.base+"/actions", a)
	if code != http.StatusOK {
		t.Fatalf("action %+v = %d %s, want 200", a, code, b)
	}
	var res desktop.ActionResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("action %+v: answer %s: %v", a, b, err)
	}
	return res
}

// TestDesktopCursorPositionAfterMove: a computer-use loop that moves the pointer and then
// asks where it is gets the coordinate it moved to, at once (not the position before).
func TestDesktopCursorPositionAfterMove(t *testing.T) {
	cu := startComputerUse(t, "e2e-cursor-position")
	for i, d := range [][2]int{{31, 47}, {250, 120}, {5, 290}} {
		x, y := cu.xw.at(d[0], d[1])
		cu.act(t, desktop.Action{Action: "mouse_move", Coordinate: []int{x, y}})
		want := fmt.Sprint([]int{x, y})
		got := cu.act(t, desktop.Action{Action: "cursor_position"}).Coordinate
		if fmt.Sprint(got) == want {
			continue
		}
		// Say how long the answer stays stale.
		start, later := time.Now(), got
		for time.Since(start) < 5*time.Second && fmt.Sprint(later) != want {
			time.Sleep(20 * time.Millisecond)
			later = cu.act(t, desktop.Action{Action: "cursor_position"}).Coordinate
		}
		t.Errorf("move %d: cursor_position right after mouse_move [%d %d] = %v, want [%d %d] (%v %v later)", i, x, y, got, x, y, later, time.Since(start).Round(time.Millisecond))
	}
}

// TestDesktopComputerUseActions: the computer-use vocabulary on the real display of a bwrap
// agent, with its agent token, each action asserted on what xev recorded: the button numbers
// of right, middle and double clicks and of scrolling up and down, a drag's press, motion with
// the button held and release, a move (then cursor_position answers it), key combinations
// with their modifiers in the key's state; and JPEG screenshots at a scale decode to that size.
func TestDesktopComputerUseActions(t *testing.T) {
	cu := startComputerUse(t, "e2e-computer-use-actions")
	g, tok, base, full, xw := cu.g, cu.tok, cu.base, cu.full, cu.xw
	act := func(a desktop.Action) desktop.ActionResult { t.Helper(); return cu.act(t, a) }
	pt := func(dx, dy int) []int { x, y := xw.at(dx, dy); return []int{x, y} }
	pressesAt := func(ev []xevEvent, typ string, b int, c []int) int { return count(ev, typ, pressAt(b, c[0], c[1])) }

	// A left click focuses the window (keys go to it afterwards).
	p0 := pt(200, 150)
	act(desktop.Action{Action: "left_click", Coordinate: p0})
	xw.waitFor(t, "left_click: button 1 pressed and released", func(ev []xevEvent) bool {
		return pressesAt(ev, "ButtonPress", 1, p0) == 1 && pressesAt(ev, "ButtonRelease", 1, p0) == 1
	})

	// mouse_move, then (once the program saw it) cursor_position answers where the pointer is;
	// TestDesktopCursorPositionAfterMove asks at once.
	p1 := pt(31, 47)
	act(desktop.Action{Action: "mouse_move", Coordinate: p1})
	xw.waitFor(t, fmt.Sprintf("mouse_move: motion to %v with no button", p1), func(ev []xevEvent) bool {
		return count(ev, "MotionNotify", func(e xevEvent) bool { return e.RootX == p1[0] && e.RootY == p1[1] && e.State&0x700 == 0 }) > 0
	})
	if got := act(desktop.Action{Action: "cursor_position"}).Coordinate; fmt.Sprint(got) != fmt.Sprint(p1) {
		t.Errorf("cursor_position after the move reached the program = %v, want %v", got, p1)
	}

	for _, c := range []struct {
		action          string
		at              []int
		button, presses int
	}{
		{"right_click", pt(60, 40), 3, 1},
		{"middle_click", pt(90, 40), 2, 1},
		{"double_click", pt(120, 40), 1, 2},
		{"triple_click", pt(150, 40), 1, 3},
	} {
		act(desktop.Action{Action: c.action, Coordinate: c.at})
		ev := xw.waitFor(t, fmt.Sprintf("%s at %v: %d presses of button %d", c.action, c.at, c.presses, c.button), func(ev []xevEvent) bool {
			return pressesAt(ev, "ButtonRelease", c.button, c.at) >= c.presses
		})
		if n, r := pressesAt(ev, "ButtonPress", c.button, c.at), pressesAt(ev, "ButtonRelease", c.button, c.at); n != c.presses || r != c.presses {
			t.Errorf("%s at %v = %d presses, %d releases of button %d, want %d", c.action, c.at, n, r, c.button, c.presses)
		}
		for _, e := range ev {
			if e.Type == "ButtonPress" && e.RootX == c.at[0] && e.RootY == c.at[1] && e.Button != c.button {
				t.Errorf("%s pressed %v, want only button %d", c.action, e, c.button)
			}
		}
	}

	// left_click_drag: press at the start, motion with button 1 held, release at the end.
	s, e := pt(40, 200), pt(260, 120)
	act(desktop.Action{Action: "left_click_drag", StartCoordinate: s, Coordinate: e})
	ev := xw.waitFor(t, fmt.Sprintf("left_click_drag %v → %v", s, e), func(ev []xevEvent) bool {
		return pressesAt(ev, "ButtonRelease", 1, e) == 1
	})
	if pressesAt(ev, "ButtonPress", 1, s) != 1 {
		t.Errorf("left_click_drag: no press of button 1 at the start %v", s)
	}
	if count(ev, "MotionNotify", func(x xevEvent) bool { return x.RootX == e[0] && x.RootY == e[1] && x.State&0x100 != 0 }) == 0 {
		t.Errorf("left_click_drag: no motion to the end %v with button 1 held", e)
	}
	if pressesAt(ev, "ButtonPress", 1, e) != 0 {
		t.Errorf("left_click_drag pressed again at the end %v", e)
	}

	// scroll: up is button 4, down button 5, one press per step.
	for _, c := range []struct {
		dir           string
		amount        int
		at            []int
		button, other int
	}{
		{"up", 2, pt(300, 60), 4, 5},
		{"down", 3, pt(330, 60), 5, 4},
	} {
		act(desktop.Action{Action: "scroll", Coordinate: c.at, ScrollDirection: c.dir, ScrollAmount: c.amount})
		ev := xw.waitFor(t, fmt.Sprintf("scroll %s %d at %v: button %d", c.dir, c.amount, c.at, c.button), func(ev []xevEvent) bool {
			return pressesAt(ev, "ButtonRelease", c.button, c.at) >= c.amount
		})
		if n, o := pressesAt(ev, "ButtonPress", c.button, c.at), pressesAt(ev, "ButtonPress", c.other, c.at); n != c.amount || o != 0 {
			t.Errorf("scroll %s %d = %d presses of button %d and %d of button %d, want %d and 0", c.dir, c.amount, n, c.button, o, c.other, c.amount)
		}
	}

	// key combinations: the modifier is down (in the key's state) when the key is pressed.
	for _, c := range []struct {
		keys, modifier, keysym string
		state                  int
	}{
		{"ctrl+a", "Control_L", "a", 0x4},
		{"shift+Tab", "Shift_L", "ISO_Left_Tab", 0x1},
		{"ctrl+shift+End", "Shift_L", "End", 0x5},
	} {
		before := len(xw.events(t))
		act(desktop.Action{Action: "key", Text: c.keys})
		ev := xw.waitFor(t, fmt.Sprintf("key %q: %s", c.keys, c.keysym), func(ev []xevEvent) bool {
			return count(ev[min(before, len(ev)):], "KeyRelease", keysym(c.modifier)) > 0
		})[before:]
		if n := count(ev, "KeyPress", func(e xevEvent) bool { return e.Keysym == c.keysym && e.State&0x5 == c.state }); n != 1 {
			t.Errorf("key %q: %d presses of %s with state %#x, want 1; got:\n%s", c.keys, n, c.keysym, c.state, dumpXev(ev))
		}
	}

	// JPEG screenshots at a scale decode to that fraction of the screen.
	for _, scale := range []int{50, 25} {
		path := fmt.Sprintf("%s/screenshot?format=jpeg&scale=%d", base, scale)
		req, _ := http.NewRequest("GET", g.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/jpeg" {
			t.Fatalf("GET %s = %d %s (%s), want 200 image/jpeg", path, resp.StatusCode, resp.Header.Get("Content-Type"), b[:min(len(b), 200)])
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("decode the scale %d%% JPEG: %v", scale, err)
		}
		want := image.Rect(0, 0, full.Dx()*scale/100, full.Dy()*scale/100)
		if img.Bounds() != want {
			t.Errorf("JPEG screenshot at %d%% is %v, want %v (the screen is %v)", scale, img.Bounds(), want, full)
		}
		// The window is on it, where it is on the screen (scaled): xev's white background.
		cx, cy := (xw.X+xw.W/2)*scale/100, (xw.Y+xw.H/2)*scale/100
		if r, g, bl, _ := img.At(cx, cy).RGBA(); r>>8 < 200 || g>>8 < 200 || bl>>8 < 200 {
			t.Errorf("JPEG screenshot at %d%%: the window's centre (%d,%d) is %d,%d,%d, want xev's white", scale, cx, cy, r>>8, g>>8, bl>>8)
		}
	}
}
