package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// The desktop viewer end to end: a real gateway, the agent's display inside its bwrap jail
// (Xvfb started by the agent's helper on first desktop use), a test program on that display
// (xterm, magenta, reporting mouse clicks to a file) and the WASM app in headless Chromium.

// xtermCols and xtermRows are the test program's size in cells.
const (
	xtermCols = 60
	xtermRows = 15
)

// clickRecorder is the test program: an xterm on the agent's display, magenta, whose shell
// turns on xterm's mouse reporting (DECSET 1000) and copies everything it receives — mouse
// reports ESC [ M b x y and typed text — to ~/desktop-events.
const clickRecorder = `stty raw -echo; printf '\033[?1000h'; exec cat > "$HOME/desktop-events"`

// desktopJS is the first desktop.js handle (the panel's canvas).
const desktopJS = `(window.porthole && porthole.desk && porthole.desk.all()[0])`

// magentaJS finds the test program on the canvas: the count and bounding box (display
// pixels) of pixels near #ff00ff (JPEG tolerance).
const magentaJS = `(() => {
	const h = ` + desktopJS + `;
	if (!h || h.canvas.width < 64) return {N: 0};
	const c = h.canvas, d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
	let n = 0, x0 = 1e9, y0 = 1e9, x1 = -1, y1 = -1;
	for (let y = 0; y < c.height; y += 2) for (let x = 0; x < c.width; x += 2) {
		const i = (y * c.width + x) * 4;
		if (d[i] > 200 && d[i+1] < 60 && d[i+2] > 200) { n++; if (x < x0) x0 = x; if (y < y0) y0 = y; if (x > x1) x1 = x; if (y > y1) y1 = y; }
	}
	return {N: n, X0: x0, Y0: y0, X1: x1, Y1: y1};
})()`

type magenta struct{ N, X0, Y0, X1, Y1 int }

// pagePointJS maps a display point to the page through the canvas's layout (what a person
// clicking there would hit).
func pagePointJS(dx, dy float64) string {
	return fmt.Sprintf(`(() => { const c = %s.canvas, r = c.getBoundingClientRect();
		return {X: r.left + %f * r.width / c.width, Y: r.top + %f * r.height / c.height}; })()`, desktopJS, dx, dy)
}

// requireDesktopSurface fails (under CI=true; skips elsewhere) when the gateway has no
// desktop surface: its route answers 501 (not registered) or 404.
func requireDesktopSurface(t *testing.T, g *gateway, agentID string) {
	t.Helper()
	req, _ := http.NewRequest("GET", g.URL+"/api/agents/"+agentID+"/desktop", nil)
	req.Header.Set("Origin", g.URL)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("GET desktop route: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotImplemented || resp.StatusCode == http.StatusNotFound {
		testenv.Missing(t, "the desktop surface: GET /api/agents/:id/desktop = %d %s (the gateway half and the helper half must be registered in cmd/porthole)", resp.StatusCode, strings.TrimSpace(string(body)))
	}
}

// startRecorder runs the test program through the exec API until the test ends.
func startRecorder(t *testing.T, g *gateway, agentID string) {
	t.Helper()
	startXterm(t, g, agentID, clickRecorder)
}

// startXterm runs a magenta xterm at the display's top left whose shell runs script,
// through the exec API, until the test ends.
func startXterm(t *testing.T, g *gateway, agentID, script string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		body, _ := json.Marshal(api.ExecRequest{
			Command:  []string{"sh", "-c", fmt.Sprintf(`DISPLAY="${DISPLAY:-:0}" exec xterm -geometry %dx%d+0+0 -bg '#ff00ff' -fg '#ffff00' -e sh -c %q`, xtermCols, xtermRows, script)},
			TimeoutS: 600,
		})
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/api/agents/"+agentID+"/exec", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", g.URL)
		hc := &http.Client{Jar: g.client.Jar}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("exec xterm: %v", err)
			}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ctx.Err() == nil {
			t.Errorf("xterm ended early: %d %s", resp.StatusCode, b)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// events returns what the test program recorded so far.
func events(t *testing.T, g *gateway, agentID string) string {
	t.Helper()
	var out api.ExecResult
	g.call(t, "POST", "/api/agents/"+agentID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", `cat "$HOME/desktop-events" 2>/dev/null || true`}}, http.StatusOK, &out)
	return out.Stdout
}

// presses returns the left-button presses in recorded events as 1-based cells (col, row).
func presses(ev string) [][2]int {
	var out [][2]int
	for i := 0; i+5 < len(ev); i++ {
		if ev[i] == 0x1b && ev[i+1] == '[' && ev[i+2] == 'M' && ev[i+3] == ' ' {
			out = append(out, [2]int{int(ev[i+4]) - 32, int(ev[i+5]) - 32})
			i += 5
		}
	}
	return out
}

// waitPress waits until the program recorded press number n (1-based) and returns its cell.
func waitPress(t *testing.T, g *gateway, agentID string, n int) [2]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ev := events(t, g, agentID)
		if p := presses(ev); len(p) >= n {
			return p[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test program recorded no click #%d; its events: %q", n, ev)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// cellAt is the xterm cell (1-based) under display point (x, y), given the program's box.
func cellAt(m magenta, x, y float64) [2]int {
	cw := float64(m.X1-m.X0+2) / xtermCols
	ch := float64(m.Y1-m.Y0+2) / xtermRows
	return [2]int{int((x-float64(m.X0))/cw) + 1, int((y-float64(m.Y0))/ch) + 1}
}

func near2(a, b [2]int, d int) bool {
	return a[0]-b[0] <= d && b[0]-a[0] <= d && a[1]-b[1] <= d && b[1]-a[1] <= d
}

// waitWindow waits until the canvas shows the test program and returns where it is.
func waitWindow(t *testing.T, ctx context.Context) magenta {
	t.Helper()
	waitJS(t, ctx, "the test program's window on the canvas", magentaJS+`.N > 2000`, 60*time.Second)
	return eval[magenta](t, ctx, magentaJS)
}

func openDesktop(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	do(t, ctx, "open the agent's desktop", 30*time.Second,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(".desktop-panel .desktop-screen canvas.desktop-canvas")),
	)
	waitJS(t, ctx, "connected, a screen and a first frame drawn",
		`(h => !!h && h.view().dw >= 64 && h.stats().frames > 0)(`+desktopJS+`) && !document.querySelector(".desktop-conn")`, 60*time.Second)
}

func takeControl(t *testing.T, ctx context.Context, tap bool) {
	t.Helper()
	click := chromedp.Click(chromedp.CSS(".desktop-take"))
	if tap {
		click = chromedp.Tap(chromedp.CSS(".desktop-take"))
	}
	do(t, ctx, "take control", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(".desktop-take")), click)
	waitJS(t, ctx, "holding control", `document.querySelector(".desktop-panel").dataset.holding === "true" && /You have control/.test(document.querySelector(".desktop-control").textContent)`, 20*time.Second)
}

func TestDesktopInBrowser(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xterm")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-desktop")
	requireDesktopSurface(t, g, agent.ID)
	b := startBrowser(t)
	ctx := b.ctx

	login(t, ctx, g.URL, "admin", adminPassword)
	deskURL := g.URL + "/agents/" + agent.ID + "?tab=desktop"
	openDesktop(t, ctx, deskURL)
	if eval[bool](t, ctx, `!!document.querySelector(".desktop-view-only")`) {
		t.Errorf("the owner (drive) is shown the view-only badge")
	}

	// The display runs now: start the test program on it.
	startRecorder(t, g, agent.ID)
	m := waitWindow(t, ctx)
	t.Logf("test program at %d,%d-%d,%d (%d magenta samples)", m.X0, m.Y0, m.X1, m.Y1, m.N)
	st := eval[struct{ Worker bool }](t, ctx, `(s => ({Worker: s.worker}))(`+desktopJS+`.stats())`)
	if !st.Worker {
		t.Errorf("rects were decoded on the main thread, want the decoder worker (CSP worker-src 'self')")
	}

	takeControl(t, ctx, false)
	// Click at a known point of the program: the centre of its left third.
	cx, cy := float64(m.X0)+float64(m.X1-m.X0)/3, float64(m.Y0+m.Y1)/2
	pt := eval[struct{ X, Y float64 }](t, ctx, pagePointJS(cx, cy))
	do(t, ctx, "click in the test program", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	got := waitPress(t, g, agent.ID, 1)
	if want := cellAt(m, cx, cy); !near2(got, want, 2) {
		t.Errorf("the click landed on cell %v, want near %v (display point %.0f,%.0f)", got, want, cx, cy)
	}
	// Typed text reaches the program (the keyboard input holds the focus after the click).
	do(t, ctx, "type", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: "porthole-typed"})
		return err
	}))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(events(t, g, agent.ID), "porthole-typed") {
		if time.Now().After(deadline) {
			t.Fatalf("typed text did not reach the test program: %q", events(t, g, agent.ID))
		}
		time.Sleep(300 * time.Millisecond)
	}
	screenshot(t, ctx, "desktop-viewer")

	t.Run("phone", func(t *testing.T) {
		pctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		if err := chromedp.Do(pctx); err != nil {
			t.Fatalf("open a second tab: %v", err)
		}
		b.watchConsole(t, pctx, "phone")
		do(t, pctx, "emulate a phone", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		openDesktop(t, pctx, deskURL)
		pm := waitWindow(t, pctx)
		takeControl(t, pctx, true) // the owner takes control from the other tab
		waitJS(t, ctx, "the first tab sees it lost control", `document.querySelector(".desktop-panel").dataset.holding === "false"`, 20*time.Second)
		if !eval[bool](t, pctx, `(el => !!el && el.offsetParent !== null)(document.querySelector(".desktop-keys-wrap .terminal-keys .terminal-key"))`) {
			t.Errorf("the special-keys bar is not shown on a phone holding control")
		}
		// A tap is a left click where the finger lands: the centre of the right third.
		cx, cy := float64(pm.X0)+float64(pm.X1-pm.X0)*2/3, float64(pm.Y0+pm.Y1)/2
		pt := eval[struct{ X, Y float64 }](t, pctx, pagePointJS(cx, cy))
		do(t, pctx, "tap in the test program", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			p := []*input.TouchPoint{{X: pt.X, Y: pt.Y}}
			if _, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchStart, TouchPoints: p}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchEnd, TouchPoints: []*input.TouchPoint{}})
			return err
		}))
		got := waitPress(t, g, agent.ID, 2)
		if want := cellAt(pm, cx, cy); !near2(got, want, 2) {
			t.Errorf("the tap landed on cell %v, want near %v", got, want)
		}

		// A long press is a right click; two fingers moving together scroll (the wheel).
		touch := func(what string, steps ...input.DispatchTouchEventParams) {
			t.Helper()
			do(t, pctx, what, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				for i, st := range steps {
					if i > 0 {
						time.Sleep(20 * time.Millisecond)
					}
					if st.Type == "" { // a pause
						time.Sleep(700 * time.Millisecond)
						continue
					}
					if _, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, st); err != nil {
						return err
					}
				}
				return nil
			}))
		}
		at := func(dx, dy float64) []*input.TouchPoint {
			return []*input.TouchPoint{{X: pt.X + dx, Y: pt.Y + dy}}
		}
		end := input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchEnd, TouchPoints: []*input.TouchPoint{}}
		touch("a long press", input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchStart, TouchPoints: at(0, 0)},
			input.DispatchTouchEventParams{}, end)
		waitEvent(t, g, agent.ID, "a right-button press from the long press", "\x1b[M\"")
		two := func(dy float64) []*input.TouchPoint {
			one, two := 1.0, 2.0
			return []*input.TouchPoint{{X: pt.X - 50, Y: pt.Y + dy, ID: &one}, {X: pt.X + 50, Y: pt.Y + dy, ID: &two}}
		}
		// Small steps, as fingers move: each finger's move is its own pointer event, and a large
		// step of one finger alone would look like a pinch.
		scroll := []input.DispatchTouchEventParams{{Type: input.DispatchTouchEventTypeTouchStart, TouchPoints: two(0)}}
		for i := 1; i <= 40; i++ {
			scroll = append(scroll, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchMove, TouchPoints: two(float64(-5 * i))})
		}
		touch("a two-finger scroll", append(scroll, end)...)
		waitEvent(t, g, agent.ID, "a wheel step from the two-finger scroll", "\x1b[M`", "\x1b[Ma")
		screenshot(t, pctx, "desktop-phone")
	})
}

// waitEvent waits until the test program recorded one of the mouse reports in want.
func waitEvent(t *testing.T, g *gateway, agentID, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ev := events(t, g, agentID)
		for _, w := range want {
			if strings.Contains(ev, w) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test program recorded no %s (%q); its events: %q", what, want, ev)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// canvasJS is the desktop canvas as a PNG data URL (what the viewer reconstructed).
const canvasJS = desktopJS + `.canvas.toDataURL("image/png")`

// viewerVsScreen compares a tab's canvas with the display's own screenshot (PNG through the
// computer-use API): the share of pixels within tol of the screen, and the share equal.
func viewerVsScreen(t *testing.T, ctx context.Context, g *gateway, agentID string, tol int) (within, equal float64) {
	t.Helper()
	durl := eval[string](t, ctx, canvasJS)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(durl, "data:image/png;base64,"))
	if err != nil {
		t.Fatalf("canvas data URL: %v", err)
	}
	view, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("canvas PNG: %v", err)
	}
	req, _ := http.NewRequest("GET", g.URL+"/api/agents/"+agentID+"/desktop/screenshot?format=png", nil)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("screenshot: %d %s", resp.StatusCode, body)
	}
	screen, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("screenshot PNG: %v", err)
	}
	if view.Bounds() != screen.Bounds() {
		t.Fatalf("the canvas is %v, the screen %v", view.Bounds(), screen.Bounds())
	}
	n, in, eq := 0, 0, 0
	b := screen.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r0, g0, b0, _ := screen.At(x, y).RGBA()
			r1, g1, b1, _ := view.At(x, y).RGBA()
			d := max(absDiff(r0>>8, r1>>8), absDiff(g0>>8, g1>>8), absDiff(b0>>8, b1>>8))
			n++
			if d <= tol {
				in++
			}
			if d == 0 {
				eq++
			}
		}
	}
	return float64(in) / float64(n), float64(eq) / float64(n)
}

func absDiff(a, b uint32) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// A window dragged on the display reaches the viewer as copies of its own canvas, and what the
// viewer reconstructs is the screen: in the tab that got the copies, and in a tab opened after
// (its keyframe draws the moved images clipped, ClipRects).
func TestDesktopCopiesInBrowser(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xterm")
	testenv.LookPath(t, "xdotool")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-desktop-copies")
	requireDesktopSurface(t, g, agent.ID)
	b := startBrowser(t)
	ctx := b.ctx
	login(t, ctx, g.URL, "admin", adminPassword)
	deskURL := g.URL + "/agents/" + agent.ID + "?tab=desktop"
	openDesktop(t, ctx, deskURL)
	// A terminal of text (magenta, yellow text) that stays put.
	startXterm(t, g, agent.ID, `seq -f 'line %g of the text the window carries' 1 40; exec cat`)
	waitWindow(t, ctx)
	time.Sleep(1500 * time.Millisecond)
	if in, eq := viewerVsScreen(t, ctx, g, agent.ID, 24); in < 0.995 {
		t.Fatalf("before the drag the canvas matches the screen at %.2f%% of pixels (%.2f%% exactly)", 100*in, 100*eq)
	}
	// Drag it: 25 moves right and down, as a window manager moves a window a person drags.
	var out api.ExecResult
	g.call(t, "POST", "/api/agents/"+agent.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c",
		`export DISPLAY="${DISPLAY:-:0}"; w=$(xdotool search --classname xterm | head -1); for i in $(seq 1 25); do xdotool windowmove "$w" $((i*17)) $((i*9)); sleep 0.04; done`},
		TimeoutS: 60}, http.StatusOK, &out)
	if out.ExitCode != 0 {
		t.Fatalf("xdotool: exit %d: %s%s", out.ExitCode, out.Stdout, out.Stderr)
	}
	time.Sleep(1500 * time.Millisecond) // settled
	copies := eval[int](t, ctx, desktopJS+`.stats().copies`)
	in, eq := viewerVsScreen(t, ctx, g, agent.ID, 24)
	t.Logf("after the drag: %d copies drawn; canvas = screen at %.3f%% of pixels, %.3f%% exactly", copies, 100*in, 100*eq)
	if copies == 0 {
		t.Errorf("the drag reached the viewer without a single copy")
	}
	if in < 0.995 {
		t.Errorf("after the drag the canvas matches the screen at %.2f%% of pixels, want ≥ 99.5%%", 100*in)
	}
	if errs := eval[int](t, ctx, desktopJS+`.stats().decodeErrors`); errs != 0 {
		t.Errorf("%d rects did not decode", errs)
	}

	// A tab opened now gets a keyframe that draws the moved window from the gateway's model.
	pctx, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Do(pctx); err != nil {
		t.Fatalf("open a second tab: %v", err)
	}
	b.watchConsole(t, pctx, "second tab")
	openDesktop(t, pctx, deskURL)
	time.Sleep(time.Second)
	in2, eq2 := viewerVsScreen(t, pctx, g, agent.ID, 24)
	t.Logf("a tab opened after the drag: canvas = screen at %.3f%% of pixels, %.3f%% exactly", 100*in2, 100*eq2)
	if in2 < 0.995 {
		t.Errorf("the late tab's canvas matches the screen at %.2f%% of pixels, want ≥ 99.5%%", 100*in2)
	}
}
