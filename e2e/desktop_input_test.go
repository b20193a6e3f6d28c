package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestDesktopWatcherInputDropped: through a real gateway and a real bwrap agent's display, a
// watch-only sharee's viewer WebSocket sends clicks, keys, text and a wheel: the X program on
// the display records none of it, and the watcher is told it is watching (its TakeControl is
// refused too). The owner's input before taking control is dropped as well ("take control
// first"); after TakeControl the owner's click and keys reach the program, at the point
// clicked.
func TestDesktopWatcherInputDropped(t *testing.T) {
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
}
