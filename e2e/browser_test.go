package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/porthole/porthole/api"
	pbrowser "github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/server"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// The browser viewer end to end: a real gateway with the browser surface, the agent's
// Chromium inside its bwrap jail (network full: it reaches a page this test serves on the
// host's address), and the WASM app in headless Chromium driving it through the viewer.

// startBrowserGateway is startGateway with the browser surface registered too.
func startBrowserGateway(t *testing.T) *gateway {
	t.Helper()
	dataDir := t.TempDir()
	ts := serveGateway(t, server.Config{DataDir: dataDir, AdminPassword: adminPassword,
		Surfaces: []surface.Description{terminal.Surface, desktop.Surface, pbrowser.Surface}})
	jar, _ := cookiejar.New(nil)
	g := &gateway{URL: ts.URL, client: &http.Client{Jar: jar, Timeout: 60 * time.Second}, dataDir: dataDir}
	g.call(t, "POST", "/api/session", api.LoginRequest{Username: "admin", Password: adminPassword}, http.StatusOK, nil)
	return g
}

// e2ePage serves, on the host's non-loopback address (a jail with network full reaches it,
// not the host's loopback), a page whose big button reports each click to the test and
// shows it in the page's title.
func e2ePage(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var ip string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP.String()
			break
		}
	}
	if ip == "" {
		testenv.Missing(t, "a non-loopback IPv4 address for the agent's network to reach the test's page")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	var clicks atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><head><title>Porthole e2e page</title>
<meta name=viewport content="width=device-width">
<style>body{margin:0;background:#fff} button{position:absolute;left:0;top:0;width:400px;height:300px;font-size:40px;background:#0a0;color:#fff}</style></head>
<body><button onclick="fetch('/clicked',{method:'POST'});document.title='clicked '+(window.n=(window.n||0)+1)">click me</button>
<button id=c style="top:320px;height:60px;font-size:20px;background:#00a" onclick="document.title='confirm:'+confirm('Really?')">confirm</button>
<select style="position:absolute;left:0;top:400px;width:300px;height:50px;font-size:20px" onchange="document.title='select:'+this.value"><option>one<option>two<option>three</select>
<a download="report.txt" href="data:text/plain,made%20by%20the%20agent" style="position:absolute;left:320px;top:320px;width:200px;height:60px;font-size:20px;display:block;background:#ccc">download</a>
<input type=file style="position:absolute;left:320px;top:400px;width:200px;height:50px" onchange="const f=this.files[0]; f.text().then(t => document.title='file:'+f.name+':'+t)">
</body></html>`)
	})
	mux.HandleFunc("/clicked", func(w http.ResponseWriter, r *http.Request) { clicks.Add(1) })
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/", &clicks
}

// bvJS is the browser panel's canvas handle (desktop.js; one panel per tab).
const bvJS = `(window.porthole && porthole.desk && porthole.desk.all()[0])`

// bvPointJS maps a point of the agent's page (CSS px) to the viewer's page through the
// canvas's layout (what a person clicking there would hit).
func bvPointJS(px, py float64) string {
	return fmt.Sprintf(`(() => { const c = %s.canvas, r = c.getBoundingClientRect();
		return {X: r.left + %f * r.width / c.width, Y: r.top + %f * r.height / c.height}; })()`, bvJS, px, py)
}

// bvTitleJS is true when the active tab's title in the tab strip is s.
func bvTitleJS(s string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll(".browser-tab.active .browser-tab-title")).some(e => e.textContent === %q)`, s)
}

func openBrowserPanel(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	do(t, ctx, "open the agent's browser", 30*time.Second,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(".browser-panel .desktop-screen canvas.desktop-canvas")),
	)
	waitJS(t, ctx, "connected and a first frame drawn",
		`(h => !!h && h.stats().frames > 0)(`+bvJS+`) && !document.querySelector(".browser-panel .desktop-conn")`, 90*time.Second)
}

func takeBrowserControl(t *testing.T, ctx context.Context, tap bool) {
	t.Helper()
	click := chromedp.Click(chromedp.CSS(".browser-panel .desktop-take"))
	if tap {
		click = chromedp.Tap(chromedp.CSS(".browser-panel .desktop-take"))
	}
	do(t, ctx, "take control", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(".browser-panel .desktop-take")), click)
	waitJS(t, ctx, "holding control", `document.querySelector(".browser-panel").dataset.holding === "true"`, 20*time.Second)
}

// waitBV is waitJS showing the panel's text (status, tabs, errors) when it times out.
func waitBV(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		panel := eval[string](t, ctx, `(p => p ? p.innerText + " | url=" + (document.querySelector(".browser-url")||{}).value : "(no panel)")(document.querySelector(".browser-panel"))`)
		t.Fatalf("%s: %v\nthe panel shows: %s", what, err, panel)
	}
}

func waitClicks(t *testing.T, clicks *atomic.Int32, n int32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for clicks.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the page recorded %d clicks, want %d", clicks.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBrowserInBrowser(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "slirp4netns")
	testenv.LookPath(t, "chromium")
	page, clicks := e2ePage(t)
	g := startBrowserGateway(t)
	var agent api.Agent
	g.call(t, "POST", "/api/agents", api.CreateAgentRequest{
		Name: "e2e-browser", Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkFull}, Share: api.LevelNone,
	}, http.StatusCreated, &agent)
	b := startBrowser(t)
	ctx := b.ctx

	login(t, ctx, g.URL, "admin", adminPassword)
	bvURL := g.URL + "/agents/" + agent.ID + "?tab=browser"
	openBrowserPanel(t, ctx, bvURL)
	if eval[bool](t, ctx, `!!document.querySelector(".browser-panel .desktop-view-only")`) {
		t.Errorf("the owner (drive) is shown the view-only badge")
	}
	takeBrowserControl(t, ctx, false)

	// The address bar: type the test's page and go.
	do(t, ctx, "navigate", 20*time.Second,
		chromedp.Click(chromedp.CSS(".browser-url")),
		chromedp.SendKeys(chromedp.CSS(".browser-url"), page),
		chromedp.Click(chromedp.CSS(".browser-go")),
	)
	waitBV(t, ctx, "the page's title in the tab strip", bvTitleJS("Porthole e2e page"), 30*time.Second)
	waitJS(t, ctx, "the address bar shows the page", fmt.Sprintf(`document.querySelector(".browser-url").value === %q`, page), 10*time.Second)
	// The page's green button is drawn on the canvas.
	waitJS(t, ctx, "the page's button on the canvas", `(h => { const c = h.canvas; if (c.width < 100) return false;
		const d = c.getContext("2d").getImageData(100, 100, 1, 1).data; return d[1] > 120 && d[0] < 60 && d[2] < 60; })(`+bvJS+`)`, 20*time.Second)
	st := eval[struct{ Worker bool }](t, ctx, `(s => ({Worker: s.worker}))(`+bvJS+`.stats())`)
	if !st.Worker {
		t.Errorf("frames were decoded on the main thread, want the decoder worker")
	}

	pt := eval[struct{ X, Y float64 }](t, ctx, bvPointJS(150, 150))
	do(t, ctx, "click the page's button", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	waitClicks(t, clicks, 1)
	waitJS(t, ctx, "the page's new title", bvTitleJS("clicked 1"), 20*time.Second)

	// A JavaScript confirm: shown in the panel (as text), answered there.
	pt = eval[struct{ X, Y float64 }](t, ctx, bvPointJS(150, 350))
	do(t, ctx, "click the confirm button", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	waitBV(t, ctx, "the page's dialog in the panel", `(d => !!d && d.textContent.includes("Really?"))(document.querySelector(".browser-dialog"))`, 20*time.Second)
	screenshot(t, ctx, "browser-dialog")
	do(t, ctx, "answer OK", 10*time.Second, chromedp.Click(chromedp.CSS(".browser-dialog-ok")))
	waitBV(t, ctx, "the page's answer", bvTitleJS("confirm:true"), 20*time.Second)

	// A <select>: its options in the panel; the choice reaches the page.
	pt = eval[struct{ X, Y float64 }](t, ctx, bvPointJS(150, 425))
	do(t, ctx, "click the select", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	waitBV(t, ctx, "the select's options in the panel", `document.querySelectorAll(".browser-select .browser-option").length === 3`, 20*time.Second)
	screenshot(t, ctx, "browser-select")
	do(t, ctx, "choose three", 10*time.Second, chromedp.Click(chromedp.CSS(".browser-select .browser-option:nth-child(3)")))
	waitBV(t, ctx, "the page's change", bvTitleJS("select:three"), 20*time.Second)

	// A download: saved in the agent's ~/Downloads, listed, and fetched to this device
	// through the panel's link (the drive-level download route of the real gateway).
	pt = eval[struct{ X, Y float64 }](t, ctx, bvPointJS(420, 350))
	do(t, ctx, "click the download link", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	waitBV(t, ctx, "the download's link in the panel", `!!document.querySelector(".browser-downloads a.browser-download")`, 30*time.Second)
	href := eval[string](t, ctx, `document.querySelector(".browser-downloads a.browser-download").href`)
	resp, err := g.client.Get(href)
	if err != nil {
		t.Fatalf("GET %s: %v", href, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "made by the agent" {
		t.Errorf("GET %s = %d %q, want the file", href, resp.StatusCode, body)
	}
	var out api.ExecResult
	g.call(t, "POST", "/api/agents/"+agent.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", `cat "$HOME/Downloads/report.txt"`}}, http.StatusOK, &out)
	if out.Stdout != "made by the agent" {
		t.Errorf("~/Downloads/report.txt in the sandbox: %q", out.Stdout)
	}

	// An upload from this device: the page's file chooser shows in the panel; the file
	// chosen there reaches the page in the sandbox.
	local := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(local, []byte("from the device"), 0o644); err != nil {
		t.Fatal(err)
	}
	pt = eval[struct{ X, Y float64 }](t, ctx, bvPointJS(420, 425))
	do(t, ctx, "click the page's file input", 10*time.Second, chromedp.MouseClickXY(pt.X, pt.Y))
	waitBV(t, ctx, "the file chooser in the panel", `!!document.querySelector(".browser-chooser input.browser-file")`, 20*time.Second)
	do(t, ctx, "choose a file", 10*time.Second, chromedp.SetUploadFiles(chromedp.CSS(".browser-chooser input.browser-file"), []string{local}))
	waitBV(t, ctx, "the page read the upload", bvTitleJS("file:notes.txt:from the device"), 30*time.Second)
	screenshot(t, ctx, "browser-viewer")

	t.Run("phone", func(t *testing.T) {
		pctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		if err := chromedp.Do(pctx); err != nil {
			t.Fatalf("open a second tab: %v", err)
		}
		b.watchConsole(t, pctx, "phone")
		do(t, pctx, "emulate a phone", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
		openBrowserPanel(t, pctx, bvURL)
		waitJS(t, pctx, "the page's title (phone)", bvTitleJS("file:notes.txt:from the device"), 20*time.Second)
		takeBrowserControl(t, pctx, true) // the owner takes control from the other tab
		waitJS(t, ctx, "the first tab sees it lost control", `document.querySelector(".browser-panel").dataset.holding === "false"`, 20*time.Second)
		// A tap is a left click where the finger lands.
		pt := eval[struct{ X, Y float64 }](t, pctx, bvPointJS(150, 150))
		do(t, pctx, "tap the page's button", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			p := []*input.TouchPoint{{X: pt.X, Y: pt.Y}}
			if _, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchStart, TouchPoints: p}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, input.DispatchTouchEvent, input.DispatchTouchEventParams{Type: input.DispatchTouchEventTypeTouchEnd, TouchPoints: []*input.TouchPoint{}})
			return err
		}))
		waitClicks(t, clicks, 2)
		waitJS(t, pctx, "the page's new title (phone)", bvTitleJS("clicked 2"), 20*time.Second)
		if !eval[bool](t, pctx, `(el => !!el && el.offsetParent !== null)(document.querySelector(".browser-panel .desktop-keys-wrap .terminal-keys .terminal-key"))`) {
			t.Errorf("the special-keys bar is not shown on a phone holding control")
		}
		screenshot(t, pctx, "browser-phone")
	})
	if s := strings.TrimSpace(eval[string](t, ctx, `document.querySelector(".browser-panel .desktop-error") ? document.querySelector(".browser-panel .desktop-error").textContent : ""`)); s != "" {
		t.Logf("the panel shows an error: %s", s)
	}
}
