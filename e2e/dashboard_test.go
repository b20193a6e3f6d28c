package e2e

// The household dashboard and the surface-first agent page in a real headless Chromium against
// an in-process gateway with bwrap agents, at 1280×800, 1920×1080, 390×844 (portrait, touch)
// and 844×390 (landscape, touch): layout measurements, screenshots of every page written to
// bin/e2e-artifacts/ (or $PORTHOLE_E2E_ARTIFACTS), live updates, the account, token and audit
// flows end to end, and no console errors or warnings on a normal visit.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/server"
)

const dashAdminPassword = "dash-e2e-admin-pw-5b7e"

// viewport is one screen the acceptance checks.
type viewport struct {
	name          string
	w, h          int64
	phone         bool    // touch, mobile: the keys bar shows
	minSurface    float64 // the terminal's share of the whole viewport height
	emulateMobile bool
}

// maxHeadRow is the tallest the agent page's header row may be: one compact row (34 px
// controls and their padding), at every size.
const maxHeadRow = 44

var viewports = []viewport{
	{name: "1280x800", w: 1280, h: 800, minSurface: 0.85},
	{name: "1920x1080", w: 1920, h: 1080, minSurface: 0.85},
	{name: "390x844-portrait", w: 390, h: 844, phone: true, minSurface: 0.70, emulateMobile: true},
	{name: "844x390-landscape", w: 844, h: 390, phone: true, minSurface: 0.70, emulateMobile: true},
}

// artifactsDir is where screenshots go: $PORTHOLE_E2E_ARTIFACTS, else bin/e2e-artifacts in the
// repository (ignored by git).
func artifactsDir(t testing.TB) string {
	dir := os.Getenv("PORTHOLE_E2E_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "bin", "e2e-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts dir: %v", err)
	}
	return dir
}

// shot saves a screenshot of the tab as an artefact.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(cctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Errorf("write %s: %v", p, err)
	}
}

// tab is a browser tab whose console is kept, as chromium does, with its own viewport.
type tab struct {
	*chromium
	cancel context.CancelFunc
}

// newTab opens a tab in c's browser context (same cookies), sized to vp.
func newTab(t *testing.T, parent context.Context, vp viewport) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	tb := &tab{chromium: &chromium{ctx: ctx}, cancel: cancel}
	msgs := chromedp.Console(ctx)
	go func() { // owner: this tab; ends with its context
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.console = append(tb.console, m.String())
			tb.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console of the %s tab:\n%s", vp.name, strings.Join(tb.messages(), "\n"))
		}
		cancel()
	})
	opts := []chromedp.EmulateViewportOption{}
	if vp.emulateMobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	tb.steps(t, "size the tab "+vp.name, chromedp.EmulateViewport(vp.w, vp.h, opts...))
	return tb
}

// noiseFree fails on console errors or warnings: for visits that are not plain (a page left
// idle, a refused paste, access removed). A normal visit is held to consoleSilent.
func noiseFree(t *testing.T, where string, msgs []string) {
	t.Helper()
	for _, m := range msgs {
		if strings.HasPrefix(m, "error:") || strings.HasPrefix(m, "warning:") || strings.HasPrefix(m, "exception:") {
			t.Errorf("%s: console: %s", where, m)
		}
	}
}

// consoleSilent fails on anything at all in the console: a normal visit logs nothing, not even
// a debug line or a note of the app's own (nor Chromium's note that a page deferred its install
// prompt: third_party/go-app's app.js no longer calls preventDefault for it).
func consoleSilent(t *testing.T, base, where string, msgs []string) {
	t.Helper()
	for _, m := range msgs {
		t.Errorf("%s: console: %s", where, m)
	}
}

// layout is what the agent page measures.
type layout struct {
	InnerW, InnerH       float64
	ScrollW, ScrollH     float64
	HeadTop, HeadBottom  float64 // the header row (.agent-head)
	AboveSurface         float64 // the header rows' bottom (.agent-tools and the terminal's bar too)
	ScreenTop, ScreenH   float64 // .terminal-screens
	KeysShown            bool
	KeysOK               bool // every key inside the viewport, the bar not scrolling sideways
	KeysTop              float64
	XtermTransform       string
	CanvasScaled         bool
	Cols, Rows, FontSize float64
}

const layoutJS = `(() => {
	const r = (sel) => { const el = document.querySelector(sel); return el ? el.getBoundingClientRect() : null; };
	const head = r(".agent-head"), screen = r(".terminal-screens");
	let above = head ? head.bottom : -1;
	for (const sel of [".agent-tools", ".terminal-bar"]) { const b = r(sel); if (b && b.height > 0) above = Math.max(above, b.bottom); }
	const keys = document.querySelector(".terminal-keys");
	const keysShown = !!keys && !keys.hidden && getComputedStyle(keys).display !== "none";
	let keysOK = keysShown && keys.scrollWidth <= keys.clientWidth + 1;
	if (keysShown) for (const k of keys.querySelectorAll(".terminal-key")) {
		const b = k.getBoundingClientRect();
		if (b.left < -0.5 || b.right > innerWidth + 0.5 || b.top < -0.5 || b.bottom > innerHeight + 0.5 || b.width < 20) keysOK = false;
	}
	// A CSS transform, scale or zoom on the terminal or any ancestor scales it (blurry, clipped
	// letters); so does a box drawn at another size than its layout size.
	let tr = "none";
	const h = window.porthole && porthole.term ? porthole.term.all().find(x => x.term.element && x.term.element.offsetParent !== null) : null;
	for (let el = h ? h.term.element : null; el; el = el.parentElement) {
		const cs = getComputedStyle(el);
		if (cs.transform && cs.transform !== "none") { tr = "transform " + cs.transform; break; }
		if (cs.scale && cs.scale !== "none") { tr = "scale " + cs.scale; break; }
		if (cs.zoom && cs.zoom !== "1" && cs.zoom !== "normal") { tr = "zoom " + cs.zoom; break; }
		const b = el.getBoundingClientRect();
		if (el.offsetWidth > 0 && Math.abs(b.width - el.offsetWidth) > 1) { tr = "drawn " + b.width + " wide, laid out " + el.offsetWidth; break; }
	}
	let scaled = false;
	if (h) for (const c of h.term.element.querySelectorAll("canvas")) {
		const b = c.getBoundingClientRect();
		if (b.width > 0 && c.width > 0 && Math.abs(b.width * devicePixelRatio - c.width) > 2) scaled = true;
	}
	return {
		InnerW: innerWidth, InnerH: innerHeight,
		ScrollW: document.documentElement.scrollWidth, ScrollH: document.documentElement.scrollHeight,
		HeadTop: head ? head.top : -1, HeadBottom: head ? head.bottom : -1, AboveSurface: above, ScreenTop: screen ? screen.top : -1, ScreenH: screen ? screen.height : -1,
		KeysShown: keysShown, KeysOK: keysOK, KeysTop: keysShown ? keys.getBoundingClientRect().top : -1,
		XtermTransform: tr, CanvasScaled: scaled,
		Cols: h ? h.term.cols : 0, Rows: h ? h.term.rows : 0, FontSize: h ? h.fontSize() : 0,
	};
})()`

// dashSetup is a gateway with admin, a second user and a few agents.
type dashSetup struct {
	url    string
	admin  *apiSession
	viewer *apiSession
	agent  api.Agent // shared for watching, with a terminal open
}

func startDashSetup(t *testing.T) *dashSetup {
	t.Helper()
	testenv.LookPath(t, "bwrap")
	ts := serveGateway(t, server.Config{AdminPassword: dashAdminPassword})
	s := &shellServer{URL: ts.URL, ts: ts}
	d := &dashSetup{url: ts.URL, admin: s.login(t, "admin", dashAdminPassword)}
	d.admin.call(t, "POST", "/api/users", api.CreateUserRequest{Username: "viewer", Password: "viewer-password-77a1"}, http.StatusCreated, nil)
	d.viewer = s.login(t, "viewer", "viewer-password-77a1")
	d.admin.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: "household",
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelWatch}, http.StatusCreated, &d.agent)
	for _, n := range []string{"builder", "notes"} {
		d.admin.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: n,
			Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}}, http.StatusCreated, nil)
	}
	return d
}

// loginTab logs a browser context in through the login form.
func loginTab(t *testing.T, c *chromium, base, user, pw string) {
	t.Helper()
	c.steps(t, "open the login page", chromedp.Navigate(base+"/login"))
	c.until(t, "the app's login form", appLoginFormJS)
	c.steps(t, "log in as "+user,
		chromedp.SendKeys(chromedp.ID("username"), user),
		chromedp.SendKeys(chromedp.ID("password"), pw),
		chromedp.Click(chromedp.ID("login-submit")),
	)
	c.until(t, "the dashboard after login", `location.pathname === "/" && !!document.getElementById("own-agents")`)
}

// TestDashboardLayouts: at each acceptance viewport, the dashboard, the agent's terminal, the
// account, audit and users pages, with screenshots; the terminal gets the screen and the keys.
func TestDashboardLayouts(t *testing.T) {
	d := startDashSetup(t)
	c := startChromium(t)
	loginTab(t, c, d.url, "admin", dashAdminPassword)
	// A terminal with output, so the dashboard has a thumbnail.
	c.steps(t, "open the terminal", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	c.until(t, "a prompt", promptJS)
	typeIntoTab(t, c.ctx, "echo dashboard-$((6*7))\n")
	c.until(t, "the echo", lineJS("dashboard-42"))

	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			tb := newTab(t, c.ctx, vp)
			tb.steps(t, "open the dashboard", chromedp.Navigate(d.url+"/"))
			tb.until(t, "the cards", `document.querySelectorAll("li.agent-card[data-state]").length === 3`)
			tb.until(t, "the thumbnail", `[...document.querySelectorAll(".thumb-lines")].some(p => p.textContent.includes("dashboard-42"))`)
			if w := js[float64](t, tb.chromium, `document.documentElement.scrollWidth - innerWidth`); w > 0.5 {
				t.Errorf("dashboard overflows sideways by %.0f px", w)
			}
			shot(t, tb.ctx, "dashboard-"+vp.name)

			// One tap on the card opens the agent on the surface used last.
			tb.steps(t, "open the agent from its card", chromedp.Click(chromedp.CSS(fmt.Sprintf(`li.agent-card[data-agent-id=%s] .agent-open`, quote(d.agent.ID)))))
			tb.until(t, "the agent's page on its terminal", `location.pathname.startsWith("/agents/") && location.search.includes("tab=terminal")`)
			tb.until(t, "the terminal", `!!document.querySelector(".terminal-screens .xterm-screen")`)
			tb.until(t, "the earlier output", lineJS("dashboard-42"))
			if vp.phone {
				tb.until(t, "the keys bar", `!!document.querySelector(".terminal-keys .terminal-key")`)
			}
			time.Sleep(300 * time.Millisecond) // the last fit
			l := js[layout](t, tb.chromium, layoutJS)
			share := l.ScreenH / l.InnerH
			headRow := l.HeadBottom - l.HeadTop
			t.Logf("%s: header row %.0f px (%.0f–%.0f), chrome above the terminal ends at %.0f px, terminal %.0f px from %.0f of a %.0f px window (%.0f%%), grid %vx%v at %v px, page %vx%v",
				vp.name, headRow, l.HeadTop, l.HeadBottom, l.AboveSurface, l.ScreenH, l.ScreenTop, l.InnerH, 100*share, l.Cols, l.Rows, l.FontSize, l.ScrollW, l.ScrollH)
			if share < vp.minSurface {
				t.Errorf("%s: the terminal is %.0f of the window's %.0f px (%.0f%%), want ≥ %.0f%%", vp.name, l.ScreenH, l.InnerH, 100*share, 100*vp.minSurface)
			}
			if l.HeadBottom <= 0 || headRow > maxHeadRow {
				t.Errorf("%s: the header row is %.0f px tall (ends at %.0f), want one compact row ≤ %d px", vp.name, headRow, l.HeadBottom, maxHeadRow)
			}
			// Above the terminal: that row only, or on an upright phone a second one for the
			// terminal's own bar (its tabs and who is attached).
			rows := 1
			if vp.phone && vp.h > vp.w {
				rows = 2
			}
			if l.AboveSurface > float64(rows*maxHeadRow) {
				t.Errorf("%s: the chrome above the terminal ends at %.0f px, want ≤ %d rows of %d px", vp.name, l.AboveSurface, rows, maxHeadRow)
			}
			if l.ScreenTop < l.AboveSurface-0.5 {
				t.Errorf("%s: the terminal (top %.0f) starts under the header (bottom %.0f)", vp.name, l.ScreenTop, l.AboveSurface)
			}
			if l.ScrollH > l.InnerH+0.5 || l.ScrollW > l.InnerW+0.5 {
				t.Errorf("%s: the page scrolls: %vx%v in a %vx%v viewport", vp.name, l.ScrollW, l.ScrollH, l.InnerW, l.InnerH)
			}
			if vp.phone && (!l.KeysShown || !l.KeysOK) {
				t.Errorf("%s: keys bar shown %v, every key visible without scrolling %v", vp.name, l.KeysShown, l.KeysOK)
			}
			if !vp.phone && l.KeysShown {
				t.Errorf("%s: keys bar shown with a mouse", vp.name)
			}
			shot(t, tb.ctx, "agent-terminal-"+vp.name)

			// The menu opens over the terminal: nothing below moves.
			before := l.ScreenTop
			tb.steps(t, "open the menu", chromedp.Click(chromedp.CSS(".agent-menu-toggle")))
			tb.until(t, "the menu", `!!document.getElementById("agent-menu")`)
			if after := js[layout](t, tb.chromium, layoutJS); after.ScreenTop != before || after.ScreenH != l.ScreenH {
				t.Errorf("%s: opening the menu moved the terminal: top %v → %v, height %v → %v", vp.name, before, after.ScreenTop, l.ScreenH, after.ScreenH)
			}
			shot(t, tb.ctx, "agent-menu-"+vp.name)

			for _, pg := range []struct{ path, ready, name string }{
				{"/account", `!!document.getElementById("session-list")`, "account"},
				{"/audit", `!!document.getElementById("audit-table")`, "audit"},
				{"/admin/users", `!!document.getElementById("user-table") && !!document.querySelector("#health-panel .health-list")`, "users"},
			} {
				tb.steps(t, "open "+pg.path, chromedp.Navigate(d.url+pg.path))
				tb.until(t, pg.name+" page", pg.ready)
				if w := js[float64](t, tb.chromium, `document.documentElement.scrollWidth - innerWidth`); w > 0.5 {
					t.Errorf("%s overflows sideways by %.0f px at %s", pg.path, w, vp.name)
				}
				shot(t, tb.ctx, pg.name+"-"+vp.name)
			}
			consoleSilent(t, d.url, vp.name, tb.messages())
		})
	}
	consoleSilent(t, d.url, "first tab", c.messages())
}

// typeIntoTab types into the shown terminal (see typeInto).
func typeIntoTab(t *testing.T, ctx context.Context, keys string) { typeInto(t, ctx, keys) }

// TestDashboardLiveWatchAndFit: the owner's dashboard shows another user's watch attachment
// within a second; the watcher sees the driver's whole grid with no CSS scaling (a smaller
// font in a smaller window); access removed is a sentence, not endless retries.
func TestDashboardLiveWatchAndFit(t *testing.T) {
	d := startDashSetup(t)
	owner := startChromium(t)
	loginTab(t, owner, d.url, "admin", dashAdminPassword)
	owner.steps(t, "a big window", chromedp.EmulateViewport(1600, 1000))
	owner.steps(t, "open the terminal", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	owner.until(t, "a prompt", promptJS)
	typeInto(t, owner.ctx, "echo grid-$((2*21))\n")
	owner.until(t, "the echo", lineJS("grid-42"))
	ownerSize := js[layout](t, owner, layoutJS)

	dash := newTab(t, owner.ctx, viewports[0])
	dash.steps(t, "open the dashboard", chromedp.Navigate(d.url+"/"))
	dash.until(t, "the cards", `document.querySelectorAll("li.agent-card[data-state]").length === 3`)
	// Record, in the page, when the watcher first shows on the card.
	js[bool](t, dash.chromium, fmt.Sprintf(`(() => {
		const card = () => document.querySelector('li.agent-card[data-agent-id=%s]');
		new MutationObserver(() => {
			const v = card() && card().querySelector(".agent-viewers");
			if (v && /viewer watching the terminal/.test(v.textContent) && window.__watchSeen === undefined) window.__watchSeen = Date.now();
		}).observe(document.body, {subtree: true, childList: true, characterData: true});
		return true;
	})()`, quote(d.agent.ID)))

	w := startChromium(t)
	loginTab(t, w, d.url, "viewer", "viewer-password-77a1")
	w.steps(t, "a smaller window", chromedp.EmulateViewport(1000, 700))
	// When the watcher's terminal WebSocket opens (wall clock, as the dashboard's), in every new document.
	if _, err := chromedp.Call(w.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
		const O = window.WebSocket;
		window.WebSocket = function (u, p) {
			const s = new O(u, p);
			s.addEventListener("open", () => { if (String(u).endsWith("/terminal") && window.__wsOpen === undefined) window.__wsOpen = Date.now(); });
			return s;
		};
		window.WebSocket.prototype = O.prototype;
		Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
	})()`}); err != nil {
		t.Fatalf("install the WebSocket probe: %v", err)
	}
	w.steps(t, "watch the terminal", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	w.until(t, "the driver's output", lineJS("grid-42"))
	opened := js[float64](t, w, `window.__wsOpen || 0`)
	dash.until(t, "the watcher on the dashboard", `window.__watchSeen !== undefined`)
	seen := js[float64](t, dash.chromium, `window.__watchSeen`)
	lag := time.Duration(seen-opened) * time.Millisecond
	t.Logf("the dashboard showed the watcher %v after their WebSocket opened", lag)
	if opened == 0 || lag > time.Second {
		t.Errorf("the dashboard showed the watch attachment %v after it happened (opened at %v), want within 1 s", lag, opened)
	}

	// The watcher's grid is the driver's, fitted by font size, never scaled with CSS.
	w.until(t, "the driver's grid", fmt.Sprintf(`(h => h && h.term.cols === %v && h.term.rows === %v)(porthole.term.all()[0])`, ownerSize.Cols, ownerSize.Rows))
	time.Sleep(500 * time.Millisecond) // the font steps down over a few frames
	wl := js[layout](t, w, layoutJS)
	fits := js[bool](t, w, `(() => { const h = porthole.term.all()[0]; const s = h.term.element.querySelector(".xterm-screen").getBoundingClientRect();
		const host = h.term.element.parentElement.getBoundingClientRect(); return s.width <= host.width + 1 && s.height <= host.height + 1 })()`)
	t.Logf("driver %vx%v at %v px; watcher %vx%v at %v px, transform %s, fits %v", ownerSize.Cols, ownerSize.Rows, ownerSize.FontSize, wl.Cols, wl.Rows, wl.FontSize, wl.XtermTransform, fits)
	if wl.XtermTransform != "none" || wl.CanvasScaled {
		t.Errorf("the watcher's terminal is CSS-scaled: transform %q, canvas scaled %v", wl.XtermTransform, wl.CanvasScaled)
	}
	if wl.FontSize >= ownerSize.FontSize || !fits {
		t.Errorf("watcher font %v px (driver %v), grid fits %v: want a smaller font that shows the whole grid", wl.FontSize, ownerSize.FontSize, fits)
	}
	shot(t, w.ctx, "terminal-watcher-fitted")

	// Access removed: a sentence with the way on, no endless retries.
	share := api.LevelNone
	d.admin.call(t, "PATCH", "/api/agents/"+d.agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
	w.until(t, "the sentence", `/deleted, or it is no longer shared with you/.test((document.querySelector(".terminal-conn-text") || {}).textContent || "")`)
	conns := js[string](t, w, connsJS)
	time.Sleep(3 * time.Second)
	if got := js[string](t, w, connsJS); got != conns || !js[bool](t, w, `!!document.querySelector(".terminal-conn a[href='/']")`) {
		t.Errorf("after the unshare: connections %s → %s, dashboard link %v; want no retries and a way back", conns, got,
			js[bool](t, w, `!!document.querySelector(".terminal-conn a[href='/']")`))
	}
	dash.until(t, "the watcher gone from the dashboard", fmt.Sprintf(`!/viewer watching/.test((document.querySelector('li.agent-card[data-agent-id=%s]') || {}).textContent || "")`, quote(d.agent.ID)))
	noiseFree(t, "dashboard tab", dash.messages())
}

// TestDashboardIdleInBrowser: with 20 idle agents, the dashboard's WebSocket carries nothing
// over a few seconds (keep-alive pings excepted, every 30 s).
func TestDashboardIdleInBrowser(t *testing.T) {
	ts := serveGateway(t, server.Config{AdminPassword: dashAdminPassword})
	s := &shellServer{URL: ts.URL, ts: ts}
	admin := s.login(t, "admin", dashAdminPassword)
	// 20 agents whose helpers run idle in their jails (an exec started each; nothing is open).
	for i := 0; i < 20; i++ {
		var a api.Agent
		admin.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: fmt.Sprintf("idle-%02d", i),
			Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}}, http.StatusCreated, &a)
		admin.call(t, "POST", "/api/agents/"+a.ID+"/exec", api.ExecRequest{Command: []string{"true"}}, http.StatusOK, nil)
	}
	c := startChromium(t)
	var frames, bytes atomic.Int64
	var mu sync.Mutex
	var ws network.RequestID
	if err := chromedp.Listen(c.ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventWebSocketCreated:
			if strings.HasSuffix(e.URL, "/api/dashboard") {
				mu.Lock()
				ws = e.RequestID
				mu.Unlock()
			}
		case *network.EventWebSocketFrameReceived:
			mu.Lock()
			ok := e.RequestID == ws
			mu.Unlock()
			if ok {
				frames.Add(1)
				bytes.Add(int64(len(e.Response.PayloadData)))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(c.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	loginTab(t, c, ts.URL, "admin", dashAdminPassword)
	c.until(t, "20 idle agents' cards", `document.querySelectorAll("li.agent-card[data-state=idle]").length === 20`)
	time.Sleep(2 * time.Second) // the snapshot and the backends' health arrive
	f0, b0 := frames.Load(), bytes.Load()
	if f0 == 0 {
		t.Fatal("saw no frame of the dashboard's WebSocket: the measurement is broken")
	}
	cpu0, g0 := processCPU(), runtime.NumGoroutine()
	time.Sleep(4 * time.Second)
	f1, b1 := frames.Load(), bytes.Load()
	cpu, g1 := processCPU()-cpu0, runtime.NumGoroutine()
	t.Logf("dashboard WebSocket: %d frames (%d bytes) at load; %d frames, %d bytes over 4 s with 20 idle helpers; "+
		"this process (gateway and test) used %v CPU, goroutines %d → %d", f0, b0, f1-f0, b1-b0, cpu, g0, g1)
	if f1 != f0 {
		t.Errorf("an idle dashboard received %d frames (%d bytes) in 4 s, want none", f1-f0, b1-b0)
	}
	noiseFree(t, "idle dashboard", c.messages())
}

// TestAccountTokensAuditInBrowser: a password change, log out other sessions, an agent token
// created, used, copied and revoked, and the audit log's filters and paging, all through the UI.
func TestAccountTokensAuditInBrowser(t *testing.T) {
	d := startDashSetup(t)
	c := startChromium(t)
	loginTab(t, c, d.url, "viewer", "viewer-password-77a1")

	t.Run("password", func(t *testing.T) {
		other := (&shellServer{URL: d.url}).login(t, "viewer", "viewer-password-77a1") // another session
		c.steps(t, "open the account", chromedp.Navigate(d.url+"/account"))
		c.until(t, "two sessions", `document.querySelectorAll("#session-list .session-item").length >= 2`)
		c.steps(t, "a wrong current password",
			chromedp.SendKeys(chromedp.ID("current-password"), "not-it"),
			chromedp.SendKeys(chromedp.ID("new-password-1"), "viewer-new-password-2"),
			chromedp.SendKeys(chromedp.ID("new-password-2"), "viewer-new-password-2"),
			chromedp.Click(chromedp.ID("password-submit")))
		c.until(t, "the refusal", `/current password is not right/.test((document.querySelector("#password-form .error") || {}).textContent || "")`)
		clear(t, c, "current-password")
		c.steps(t, "the right one", chromedp.SendKeys(chromedp.ID("current-password"), "viewer-password-77a1"), chromedp.Click(chromedp.ID("password-submit")))
		c.until(t, "changed", `/password was changed/.test((document.getElementById("account-notice") || {}).textContent || "")`)
		other.call(t, "GET", "/api/me", nil, http.StatusUnauthorized, nil) // the other session is gone
		fresh := (&shellServer{URL: d.url}).login(t, "viewer", "viewer-new-password-2")
		c.steps(t, "reload the account", chromedp.Navigate(d.url+"/account"))
		c.until(t, "two sessions again", `document.querySelectorAll("#session-list .session-item").length === 2`)
		c.steps(t, "log out other sessions", chromedp.Click(chromedp.ID("logout-others")))
		c.until(t, "one session left", `document.querySelectorAll("#session-list .session-item").length === 1`)
		fresh.call(t, "GET", "/api/me", nil, http.StatusUnauthorized, nil)
		c.steps(t, "still logged in here", chromedp.Navigate(d.url+"/"))
		c.until(t, "the dashboard", `!!document.getElementById("own-agents")`)
	})

	t.Run("tokens", func(t *testing.T) {
		var mine api.Agent
		d.viewer = (&shellServer{URL: d.url}).login(t, "viewer", "viewer-new-password-2")
		d.viewer.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: "tokened", Backend: api.Backend{Type: api.BackendBwrap}}, http.StatusCreated, &mine)
		c.steps(t, "open its settings", chromedp.Navigate(d.url+"/agents/"+mine.ID+"/edit"))
		c.until(t, "the tokens", `!!document.getElementById("token-none")`)
		c.steps(t, "create a token", chromedp.SendKeys(chromedp.ID("token-name"), "claude on the laptop"), chromedp.Click(chromedp.ID("token-create")))
		c.until(t, "the secret, once", `(document.getElementById("token-secret") || {}).textContent?.startsWith("pht_")`)
		secret := js[string](t, c, `document.getElementById("token-secret").textContent`)
		c.until(t, "listed by name", `[...document.querySelectorAll("#token-list .token-name")].some(e => e.textContent === "claude on the laptop")`)
		if strings.Contains(js[string](t, c, `document.getElementById("token-list").textContent`), secret) {
			t.Error("the token list shows the secret")
		}
		bearer := func(want int) {
			t.Helper()
			req, _ := http.NewRequest("GET", d.url+"/api/agents/"+mine.ID, nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET the agent with the token: %d, want %d", resp.StatusCode, want)
			}
		}
		bearer(http.StatusOK)

		// The copy button puts exactly the secret on the clipboard (read back through the page,
		// with the permission a user would grant).
		for _, perm := range []string{"clipboard-read", "clipboard-write"} {
			if _, err := chromedp.Call(c.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{Origin: d.url,
				Permission: &cdpbrowser.PermissionDescriptor{Name: perm}, Setting: cdpbrowser.PermissionSettingGranted}); err != nil {
				t.Fatalf("grant %s: %v", perm, err)
			}
		}
		c.steps(t, "copy the secret", chromedp.Click(chromedp.ID("token-copy")))
		c.until(t, "copied", `/^Copied\.$/.test((document.querySelector("#token-created .muted") || {}).textContent || "")`)
		if got := js[string](t, c, `navigator.clipboard.readText()`); got != secret {
			t.Errorf("the clipboard after Copy holds %q, want the token's secret %q", got, secret)
		}
		// Shown once: a reload lists the token by name, and its secret is nowhere on the page.
		c.steps(t, "reload the settings", chromedp.Reload())
		c.until(t, "listed after the reload", `[...document.querySelectorAll("#token-list .token-name")].some(e => e.textContent === "claude on the laptop")`)
		if js[bool](t, c, `!!document.getElementById("token-secret") || !!document.getElementById("token-copy")`) ||
			strings.Contains(js[string](t, c, `document.documentElement.outerHTML`), secret) {
			t.Error("after a reload the page still shows the token's secret")
		}
		bearer(http.StatusOK) // the token itself lives on

		c.steps(t, "revoke", chromedp.Click(chromedp.CSS("#token-list .token-revoke")))
		c.steps(t, "confirm", chromedp.Click(chromedp.CSS("#token-list .token-revoke-confirm")))
		c.until(t, "no tokens", `!!document.getElementById("token-none")`)
		bearer(http.StatusUnauthorized)
	})

	t.Run("admin resets a password", func(t *testing.T) {
		a := startChromium(t)
		loginTab(t, a, d.url, "admin", dashAdminPassword)
		a.steps(t, "open the users page", chromedp.Navigate(d.url+"/admin/users"))
		a.until(t, "viewer's row", `[...document.querySelectorAll("#user-table td.username")].some(td => td.textContent === "viewer")`)
		var users []api.User
		d.admin.call(t, "GET", "/api/users", nil, http.StatusOK, &users)
		row := ""
		for _, u := range users {
			if u.Username == "viewer" {
				row = fmt.Sprintf(`tr[data-user-id=%s]`, quote(u.ID))
			}
		}
		if row == "" {
			t.Fatal("no user viewer")
		}
		a.steps(t, "reset viewer's password", chromedp.Click(chromedp.CSS(row+" .reset-password")))
		a.steps(t, "type the new one", chromedp.SendKeys(chromedp.CSS(row+" .reset-input"), "viewer-reset-password-3"), chromedp.Click(chromedp.CSS(row+" .reset-save")))
		a.until(t, "done", `/new password for viewer/.test((document.querySelector(".notice") || {}).textContent || "")`)
		(&shellServer{URL: d.url}).login(t, "viewer", "viewer-reset-password-3")
		a.until(t, "the health panel", `!!document.querySelector('#health-panel .health-item[data-backend="bwrap"] .health-ok')`)
		// No container engine on this machine: that backend is down, with the reason.
		down := `document.querySelector('#health-panel .health-item[data-backend="container"]')`
		a.until(t, "the container backend down", down+` && `+down+`.classList.contains("health-down")`)
		state := js[string](t, a, down+`.querySelector(".badge").textContent`)
		reason := js[string](t, a, down+`.querySelector(".muted").textContent`)
		t.Logf("health panel: container %s: %s", state, reason)
		if state != "unavailable" || !strings.Contains(reason, "container engine") || !strings.Contains(reason, "not reachable") {
			t.Errorf("health panel: container %q, reason %q; want unavailable, the engine not reachable", state, reason)
		}
		if js[bool](t, a, down+`.querySelector(".health-ok") !== null`) {
			t.Error("the down container backend is also marked ok")
		}
		shot(t, a.ctx, "health-container-down-1280x800")
	})

	t.Run("audit", func(t *testing.T) {
		// Enough events for two pages: 55 logins of the admin (an admin reads every event).
		for i := 0; i < 55; i++ {
			(&shellServer{URL: d.url}).login(t, "admin", dashAdminPassword)
		}
		a := startChromium(t)
		loginTab(t, a, d.url, "admin", dashAdminPassword)
		a.steps(t, "open the audit log", chromedp.Navigate(d.url+"/audit"))
		a.until(t, "a full page", `document.querySelectorAll("#audit-table tbody tr").length === 50`)
		firstPage := js[[]string](t, a, `[...document.querySelectorAll("#audit-table tbody tr")].map(r => r.dataset.eventId)`)
		a.steps(t, "older", chromedp.Click(chromedp.ID("audit-older")))
		a.until(t, "page 2", `document.querySelector(".pager .muted").textContent === "Page 2"`)
		a.until(t, "older events", fmt.Sprintf(`[...document.querySelectorAll("#audit-table tbody tr")].every(r => +r.dataset.eventId < %s)`, firstPage[len(firstPage)-1]))
		a.steps(t, "newer", chromedp.Click(chromedp.ID("audit-newer")))
		a.until(t, "page 1 again", `document.querySelector(".pager .muted").textContent === "Page 1"`)

		// Filter: viewer's events (the password change, the token), then on a surface.
		a.steps(t, "filter by user", chromedp.SendKeys(chromedp.ID("audit-user"), "viewer"), chromedp.Click(chromedp.ID("audit-apply")))
		a.until(t, "only viewer's", `(rs => rs.length > 0 && rs.every(r => r.querySelector(".audit-actor").textContent === "viewer"))([...document.querySelectorAll("#audit-table tbody tr")])`)
		actions := js[[]string](t, a, `[...document.querySelectorAll("#audit-table .audit-action")].map(e => e.textContent)`)
		for _, want := range []string{"user.update", "token.create", "token.revoke", "session.revoke_others"} {
			if !slices.Contains(actions, want) {
				t.Errorf("viewer's events %v lack %s", actions, want)
			}
		}
		if !strings.Contains(js[string](t, a, `location.search`), "user=viewer") {
			t.Errorf("the filter is not in the address: %s", js[string](t, a, `location.search`))
		}
		choose(t, a, "#audit-surface", "terminal")
		a.steps(t, "apply", chromedp.Click(chromedp.ID("audit-apply")))
		a.until(t, "nothing on the terminal for viewer here", `!!document.getElementById("audit-empty")`)
		// A time window in the past holds nothing.
		a.steps(t, "clear", chromedp.Click(chromedp.ID("audit-clear")))
		a.until(t, "everything again", `document.querySelectorAll("#audit-table tbody tr").length === 50`)
		// The agent filter: only that agent's rows, far fewer than all, in the address too.
		tokened := js[string](t, a, `([...document.querySelectorAll("#audit-agent option")].find(o => o.textContent === "tokened") || {}).value || ""`)
		if tokened == "" {
			t.Fatal("the agent filter does not offer viewer's agent tokened to the admin")
		}
		choose(t, a, "#audit-agent", tokened)
		a.steps(t, "apply", chromedp.Click(chromedp.ID("audit-apply")))
		a.until(t, "only tokened's", `(rs => rs.length > 0 && rs.length < 50 && rs.every(r => r.querySelector(".audit-agent").textContent === "tokened"))([...document.querySelectorAll("#audit-table tbody tr")])`)
		actions = js[[]string](t, a, `[...document.querySelectorAll("#audit-table .audit-action")].map(e => e.textContent)`)
		for _, want := range []string{"agent.create", "token.create", "token.revoke"} {
			if !slices.Contains(actions, want) {
				t.Errorf("tokened's events %v lack %s", actions, want)
			}
		}
		if slices.Contains(actions, "session.login") {
			t.Errorf("the agent filter kept logins: %v", actions)
		}
		if q, _ := url.ParseQuery(strings.TrimPrefix(js[string](t, a, `location.search`), "?")); q.Get("agent") != tokened {
			t.Errorf("the agent filter is not in the address: %s", js[string](t, a, `location.search`))
		}
		a.steps(t, "clear", chromedp.Click(chromedp.ID("audit-clear")))
		a.until(t, "everything again", `document.querySelectorAll("#audit-table tbody tr").length === 50`)
		js[bool](t, a, `(() => { const i = document.getElementById("audit-until"); i.value = "2001-01-01T00:00"; i.dispatchEvent(new Event("change", {bubbles: true})); return true })()`)
		a.steps(t, "apply", chromedp.Click(chromedp.ID("audit-apply")))
		a.until(t, "nothing before 2001", `!!document.getElementById("audit-empty")`)
		q, _ := url.ParseQuery(strings.TrimPrefix(js[string](t, a, `location.search`), "?"))
		if q.Get("until") == "" {
			t.Errorf("until not kept in the address")
		}
		noiseFree(t, "audit", a.messages())
	})
}

// TestAppStates: the app's edge states, each as a page a person can act on: an app-styled 404,
// an agent that is not there, a backend that is down offered disabled with the reason, one
// /api/me per visit, the Install button and the "update available" toast, a styled offline page.
func TestAppStates(t *testing.T) {
	s := startShellServer(t) // no container engine here: that backend is down
	c := startChromium(t)
	loginUI(t, c, s.URL, "admin", shellAdminPassword)

	// One /api/me for the whole page (the top bar and the page share it).
	c.steps(t, "reload the dashboard", chromedp.Navigate(s.URL+"/"))
	c.until(t, "the dashboard", `!!document.getElementById("own-agents") && (document.getElementById("whoami") || {}).textContent === "admin"`)
	if n := js[int](t, c, `performance.getEntriesByType("resource").filter(e => new URL(e.name).pathname === "/api/me").length`); n != 1 {
		t.Errorf("the dashboard asked /api/me %d times, want once", n)
	}
	consoleSilent(t, s.URL, "login and dashboard", c.messages())
	// What follows are error states: the browser itself logs the API's 404 for a missing agent.

	c.steps(t, "a path that is no page", chromedp.Navigate(s.URL+"/no/such/page"))
	c.until(t, "the app's 404", `!!document.getElementById("not-found") && !!document.getElementById("nav-agents")`)
	shot(t, c.ctx, "not-found-1280x800")

	c.steps(t, "an agent that is not there", chromedp.Navigate(s.URL+"/agents/no-such-agent"))
	c.until(t, "a sentence and the way back", `/no longer shared with you/.test((document.getElementById("agent-missing") || {}).textContent || "") && !!document.querySelector("#agent-missing a[href='/']")`)

	c.steps(t, "the new-agent form", chromedp.Navigate(s.URL+"/agents/new"))
	c.until(t, "the container backend offered disabled", `(o => o && o.disabled && /unavailable/.test(o.textContent))(document.querySelector("#agent-backend option[value=container]"))`)
	if js[string](t, c, `document.getElementById("agent-backend").value`) != api.BackendBwrap {
		t.Errorf("the form does not start on a working backend")
	}
	choose(t, c, "#agent-backend", api.BackendContainer) // as an edited agent on it would show
	c.until(t, "the reason", `/container backend cannot start agents right now/.test((document.getElementById("backend-down") || {}).textContent || "")`)

	// An agent on that backend anyway (made through the API; the form would not): its terminal
	// says in a short sentence why it cannot start and what to do, not the engine's error with
	// its socket path (an admin has that folded away under Details).
	var boxed api.Agent
	admin := s.login(t, "admin", shellAdminPassword)
	admin.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: "boxed",
		Backend: api.Backend{Type: api.BackendContainer, Network: api.NetworkNone}}, http.StatusCreated, &boxed)
	c.steps(t, "open its terminal", chromedp.Navigate(s.URL+"/agents/"+boxed.ID+"?tab=terminal"))
	c.until(t, "the terminal's error", `!!document.querySelector(".terminal-error")`)
	shown := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(js[string](t, c, `document.querySelector(".terminal-error").innerText`)), "Details"))
	details := js[string](t, c, `(document.querySelector(".terminal-error details code") || {}).textContent || ""`)
	t.Logf("the container agent's terminal says %q (details for the admin: %q)", shown, details)
	if !strings.Contains(shown, "the container backend is unavailable") || !strings.Contains(shown, "Backend health") {
		t.Errorf("terminal of a container agent with no engine says %q, want that the container backend is unavailable and where to see why", shown)
	}
	if n := len([]rune(shown)); n > 160 || regexp.MustCompile(`\.sock|unix:|/run/|/var/|backend unavailable`).MatchString(shown) {
		t.Errorf("terminal error shown = %q (%d characters), want a short sentence without the socket path or the error chain", shown, n)
	}
	if open := js[bool](t, c, `!!document.querySelector(".terminal-error details[open]")`); details == "" || open {
		t.Errorf("the admin's details: %q, open %v; want the server's words, folded away", details, open)
	}
	shot(t, c.ctx, "terminal-backend-down-1280x800")

	// Install: Chromium offers it for this manifest and service worker; a synthetic event in a
	// browser that did not is as good.
	c.steps(t, "the dashboard", chromedp.Navigate(s.URL+"/"))
	c.until(t, "the dashboard", `!!document.getElementById("own-agents")`)
	js[bool](t, c, `(() => { if (!document.getElementById("install-app")) { const e = new Event("beforeinstallprompt");
		e.prompt = () => {}; e.userChoice = Promise.resolve({outcome: "dismissed"}); window.dispatchEvent(e); } return true })()`)
	c.until(t, "the Install button", `!!document.getElementById("install-app")`)

	// A new version activated in the background: the toast offers to reload.
	js[bool](t, c, `(goappOnUpdate(), true)`)
	c.until(t, "the update toast", `/new version of Porthole is ready/.test((document.getElementById("update-toast") || {}).textContent || "")`)
	shot(t, c.ctx, "update-toast-1280x800")

	// Offline: the service worker's offline page, styled from its cache.
	c.until(t, "the service worker", `navigator.serviceWorker.controller !== null || true`)
	js[bool](t, c, `navigator.serviceWorker.ready.then(() => true)`)
	s.ts.CloseClientConnections()
	s.ts.Close()
	c.steps(t, "navigate while the server is down", chromedp.Navigate(s.URL+"/audit"))
	c.until(t, "the offline page", `!!document.getElementById("offline")`)
	c.until(t, "styled", `getComputedStyle(document.getElementById("offline")).display === "flex"`)
	shot(t, c.ctx, "offline-1280x800")
}

// TestTerminalTextSizeAndPhone: the terminal's text size is a per-device setting (the menu's
// A+/A−, a pinch on a phone), remembered across visits; a paste the browser refuses says so.
func TestTerminalTextSizeAndPhone(t *testing.T) {
	d := startDashSetup(t)
	c := startChromium(t)
	loginTab(t, c, d.url, "admin", dashAdminPassword)
	tb := newTab(t, c.ctx, viewports[2]) // 390x844, touch
	tb.steps(t, "open the terminal", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	tb.until(t, "a prompt", promptJS)
	fontJS := `porthole.term.all()[0].fontSize()`
	before := js[float64](t, tb.chromium, fontJS)

	// A pinch: two fingers move apart over the terminal.
	pinch := func(from, to float64) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			pts := func(half float64) []*input.TouchPoint {
				one, two := 1.0, 2.0
				return []*input.TouchPoint{{X: 195 - half, Y: 400, ID: &one}, {X: 195 + half, Y: 400, ID: &two}}
			}
			steps := []input.DispatchTouchEventParams{{Type: input.DispatchTouchEventTypeTouchStart, TouchPoints: pts(from)}}
			for i := 1; i <= 5; i++ {
				steps = append(steps, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchMove, TouchPoints: pts(from + (to-from)*float64(i)/5)})
			}
			steps = append(steps, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchEnd, TouchPoints: []*input.TouchPoint{}})
			for _, s := range steps {
				if _, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	tb.steps(t, "pinch out", pinch(40, 90))
	tb.until(t, "a bigger text", fmt.Sprintf(`%s > %v`, fontJS, before))
	tb.until(t, "remembered", fmt.Sprintf(`+localStorage.getItem("porthole-term-font") === %s`, fontJS))
	pinched := js[float64](t, tb.chromium, fontJS)
	t.Logf("pinch: %v px → %v px", before, pinched)

	// The menu's A− makes it smaller again, and a new visit keeps it.
	tb.steps(t, "open the menu", chromedp.Click(chromedp.CSS(".agent-menu-toggle")))
	tb.steps(t, "A−", chromedp.Click(chromedp.CSS(".font-smaller")))
	tb.until(t, "a smaller text", fmt.Sprintf(`%s < %v`, fontJS, pinched))
	size := js[float64](t, tb.chromium, fontJS)
	tb.steps(t, "come back", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	tb.until(t, "a prompt", promptJS)
	tb.until(t, "the same size", fmt.Sprintf(`%s === %v`, fontJS, size))

	if got := js[layout](t, tb.chromium, layoutJS); !got.KeysOK {
		t.Errorf("with the new text size, a phone key is out of sight")
	}

	// Paste without clipboard permission: a sentence, not silence.
	tb.steps(t, "open the tools", chromedp.Click(chromedp.CSS(".terminal-tools-toggle")))
	tb.steps(t, "paste", chromedp.Click(chromedp.CSS(".terminal-paste")))
	tb.until(t, "why not", `/did not let Porthole read the clipboard/.test((document.querySelector(".terminal-notice") || {}).textContent || "")`)
	shot(t, tb.ctx, "terminal-paste-refused-390x844-portrait")
	noiseFree(t, "phone", tb.messages())
}

// TestDashboardRecentSurfaceAndURL: the agent page keeps the surface (?tab=) and the terminal
// (&term=) in the address bar as the user switches; the dashboard's card opens the agent on the
// surface used last; a reload of a terminal's address opens that terminal.
func TestDashboardRecentSurfaceAndURL(t *testing.T) {
	d := startDashSetup(t)
	c := startChromium(t)
	loginTab(t, c, d.url, "admin", dashAdminPassword)
	card := fmt.Sprintf(`li.agent-card[data-agent-id=%s] .agent-open`, quote(d.agent.ID))
	query := func(key string) string {
		return js[string](t, c, fmt.Sprintf(`new URLSearchParams(location.search).get(%s) || ""`, quote(key)))
	}

	// A first visit opens the terminal; the tabs move ?tab= along without a navigation.
	c.steps(t, "open the agent from its card", chromedp.Click(chromedp.CSS(card)))
	c.until(t, "the terminal", `!!document.querySelector(".tab-panel .terminal-panel") && new URLSearchParams(location.search).get("tab") === "terminal"`)
	c.until(t, "a prompt", promptJS)
	js[bool](t, c, `(window.__samePage = true)`)
	for _, s := range []string{"desktop", "browser", "desktop"} {
		c.steps(t, "the "+s+" tab", chromedp.Click(chromedp.ID("tab-"+s)))
		c.until(t, "the "+s+" panel", fmt.Sprintf(`!!document.querySelector(".tab-panel .%s-panel")`, s))
		if got := query("tab"); got != s {
			t.Errorf("after a click on the %s tab, ?tab=%q, want %q", s, got, s)
		}
	}
	if !js[bool](t, c, `window.__samePage === true`) {
		t.Errorf("switching surfaces reloaded the page")
	}

	// Back on the dashboard, one tap on the card lands on the desktop, the surface used last.
	c.steps(t, "back to the dashboard", chromedp.Click(chromedp.ID("nav-agents")))
	c.until(t, "the dashboard", `location.pathname === "/" && !!document.getElementById("own-agents")`)
	c.steps(t, "tap the card", chromedp.Click(chromedp.CSS(card)))
	c.until(t, "the agent on its desktop", `location.pathname.startsWith("/agents/") && !!document.querySelector(".tab-panel .desktop-panel")`)
	if got := query("tab"); got != "desktop" {
		t.Errorf("the card opened ?tab=%q, want desktop (used last)", got)
	}
	// Even after a full reload of the dashboard (the choice is kept on the device).
	c.steps(t, "reload the dashboard", chromedp.Navigate(d.url+"/"))
	c.until(t, "the card", `!!document.querySelector(`+quote(card)+`)`)
	if href := js[string](t, c, `document.querySelector(`+quote(card)+`).getAttribute("href")`); !strings.Contains(href, "tab=desktop") {
		t.Errorf("after a reload the card links to %q, want the desktop", href)
	}

	// Two terminals: choosing one puts it in the address (&term=).
	c.steps(t, "back to the terminal", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal"))
	c.until(t, "a prompt", promptJS)
	c.steps(t, "a second terminal", chromedp.Click(chromedp.CSS(".terminal-new")))
	c.until(t, "two terminal tabs", `document.querySelectorAll(".terminal-tab[data-term-id]").length === 2`)
	ids := js[[]string](t, c, `[...document.querySelectorAll(".terminal-tab[data-term-id]")].map(e => e.dataset.termId)`)
	for _, id := range []string{ids[0], ids[1], ids[0]} {
		c.steps(t, "choose terminal "+id, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.terminal-tab[data-term-id=%s] .terminal-tab-name`, quote(id)))))
		c.until(t, "terminal "+id+" shown", fmt.Sprintf(`!!document.querySelector('.terminal-tab.active[data-term-id=%s]')`, quote(id)))
		if tab, term := query("tab"), query("term"); tab != "terminal" || term != id {
			t.Errorf("after choosing terminal %s the address says tab=%q term=%q, want terminal and %s", id, tab, term, id)
		}
	}

	// A reload of either terminal's address opens that one.
	for _, id := range []string{ids[1], ids[0]} {
		c.steps(t, "load terminal "+id+"'s address", chromedp.Navigate(d.url+"/agents/"+d.agent.ID+"?tab=terminal&term="+id))
		c.until(t, "terminal "+id+" open", fmt.Sprintf(`!!document.querySelector('.terminal-tab.active[data-term-id=%s]') && document.querySelectorAll(".terminal-tab[data-term-id]").length === 2`, quote(id)))
		c.until(t, "its screen shown", `porthole.term.all().some(x => x.term.element && x.term.element.offsetParent !== null)`)
	}
}

// TestNormalVisitConsoleSilent: a person's normal visit, from the address of the app without a
// session to the login, the dashboard, an agent's terminal (typing in it) and the account page,
// writes nothing at all to the console.
func TestNormalVisitConsoleSilent(t *testing.T) {
	d := startDashSetup(t)
	c := startChromium(t)
	c.steps(t, "open the app", chromedp.Navigate(d.url+"/"))
	c.until(t, "the login form", `location.pathname === "/login" && `+appLoginFormJS)
	c.steps(t, "log in",
		chromedp.SendKeys(chromedp.ID("username"), "admin"),
		chromedp.SendKeys(chromedp.ID("password"), dashAdminPassword),
		chromedp.Click(chromedp.ID("login-submit")))
	c.until(t, "the dashboard", `location.pathname === "/" && document.querySelectorAll("li.agent-card[data-state]").length === 3`)
	c.steps(t, "open the agent", chromedp.Click(chromedp.CSS(fmt.Sprintf(`li.agent-card[data-agent-id=%s] .agent-open`, quote(d.agent.ID)))))
	c.until(t, "a prompt", promptJS)
	typeInto(t, c.ctx, "echo quiet-$((6*7))\n")
	c.until(t, "the echo", lineJS("quiet-42"))
	c.steps(t, "open the menu", chromedp.Click(chromedp.CSS(".agent-menu-toggle")))
	c.steps(t, "the account", chromedp.Click(chromedp.CSS(`#agent-menu a[href="/account"]`)))
	c.until(t, "the account page", `location.pathname === "/account" && document.querySelectorAll("#session-list .session-item").length > 0`)
	c.steps(t, "back to the dashboard", chromedp.Click(chromedp.ID("nav-agents")))
	c.until(t, "the dashboard again", `!!document.getElementById("own-agents") && [...document.querySelectorAll(".thumb-lines")].some(p => p.textContent.includes("quiet-42"))`)
	time.Sleep(time.Second) // anything late (the service worker installed, a socket's end) has its chance
	consoleSilent(t, d.url, "a normal visit", c.messages())
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
