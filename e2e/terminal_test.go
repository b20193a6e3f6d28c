// Package e2e holds Porthole's browser end-to-end tests: a real gateway in
// process, real sandboxes and a real headless Chromium running the WASM app.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/server"
)

// portholeBin is the porthole binary built once for the tests (the in-sandbox helper).
var portholeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "porthole-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	portholeBin = filepath.Join(dir, "porthole")
	build := exec.Command("go", "build", "-o", portholeBin, "github.com/porthole/porthole/cmd/porthole")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/porthole: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminPassword = "e2e-admin-password-7f3a"

// gateway is an in-process Porthole server on a loopback port.
type gateway struct {
	URL     string
	client  *http.Client // logged in as admin
	dataDir string       // the gateway's data dir (store, agents' homes)
}

// startGateway runs server.New with SQLite in a temporary directory behind
// httptest, logs an API client in as admin, and stops everything at cleanup.
func startGateway(t *testing.T) *gateway {
	t.Helper()
	dataDir := t.TempDir()
	ts := serveGateway(t, server.Config{DataDir: dataDir, AdminPassword: adminPassword})
	jar, _ := cookiejar.New(nil)
	g := &gateway{URL: ts.URL, client: &http.Client{Jar: jar, Timeout: 60 * time.Second}, dataDir: dataDir}
	g.call(t, "POST", "/api/session", api.LoginRequest{Username: "admin", Password: adminPassword}, http.StatusOK, nil)
	return g
}

// call does one JSON API request and decodes the answer into out.
func (g *gateway) call(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	apiCall(t, g.client, g.URL, method, path, body, want, out)
}

// createAgent makes a bwrap agent owned by admin.
func (g *gateway) createAgent(t *testing.T, name string) api.Agent {
	t.Helper()
	var a api.Agent
	g.call(t, "POST", "/api/agents", api.CreateAgentRequest{
		Name:    name,
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone},
		Share:   api.LevelNone,
	}, http.StatusCreated, &a)
	if a.ID == "" {
		t.Fatalf("created agent has no id: %+v", a)
	}
	return a
}

// browser is a headless Chromium; its console goes to the test log on failure.
type browser struct {
	ctx     context.Context
	mu      sync.Mutex
	console []string
}

// startBrowser launches headless Chromium; it ends at cleanup.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	ctx := launchChromium(t)
	b := &browser{ctx: ctx}
	b.watchConsole(t, ctx, "desktop")
	return b
}

// watchConsole records tab's console messages and shows them if the test fails.
// The goroutine ends when the tab's context ends.
func (b *browser) watchConsole(t *testing.T, ctx context.Context, tab string) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, tab+": "+m.String())
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Logf("browser console:\n%s", strings.Join(b.console, "\n"))
		}
	})
}

// do runs steps with a timeout, failing the test with what was being done.
func do(t *testing.T, ctx context.Context, what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript condition until it is true; on timeout it fails
// with the terminal screens' text, which is what a person would have seen.
func waitJS(t *testing.T, ctx context.Context, what, cond string, timeout time.Duration) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		screens := eval[string](t, ctx, screensJS)
		t.Fatalf("%s: %v\nterminal screens:\n%s", what, err, screens)
	}
}

// screensJS is the text of every xterm.js screen (terminal.js exposes the handles for tests).
const screensJS = `(window.porthole && porthole.term ? porthole.term.all().map(h => h.text().replace(/\n+$/, "")).join("\n----\n") : "(terminal.js not loaded)")`

// lineJS is true when some screen has a line that is exactly s (after trimming).
func lineJS(s string) string {
	q, _ := json.Marshal(s)
	return fmt.Sprintf(`window.porthole && porthole.term.all().some(h => h.text().split("\n").some(l => l.trim() === %s))`, q)
}

// connsJS is how many connections the panel has had (data-connections).
const connsJS = `document.querySelector(".terminal-panel").dataset.connections`

// promptJS is true once the active screen shows a shell prompt.
const promptJS = `window.porthole && porthole.term.all().some(h => /[$#] *$/m.test(h.text()))`

// login logs the browser in through the login form.
func login(t *testing.T, ctx context.Context, baseURL, user, password string) {
	t.Helper()
	do(t, ctx, "log in as "+user, 60*time.Second,
		chromedp.Navigate(baseURL+"/login"),
	)
	waitJS(t, ctx, "the app's login form", appLoginFormJS, 60*time.Second)
	do(t, ctx, "log in as "+user, 60*time.Second,
		chromedp.SendKeys(chromedp.ID("username"), user),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")),
	)
	waitJS(t, ctx, "leave the login page", `location.pathname !== "/login"`, 30*time.Second)
}

// typeInto focuses the shown terminal and types: text arrives as a keyboard's
// text input (CDP insertText, as a soft keyboard or an IME delivers it) and
// each "\n" as an Enter key press. chromedp's KeyEvent would type letters
// twice into xterm.js: its synthetic char event repeats the keydown's text.
func typeInto(t *testing.T, ctx context.Context, keys string) {
	t.Helper()
	eval[chromedp.Void](t, ctx, `porthole.term.all().find(h => h.term.element.offsetParent !== null).focus()`)
	for i, part := range strings.Split(keys, "\n") {
		if i > 0 {
			do(t, ctx, "press Enter", 10*time.Second, pressEnter)
		}
		if part != "" {
			do(t, ctx, fmt.Sprintf("type %q", part), 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: part})
				return err
			}))
		}
	}
}

// pressEnter is one Enter key press with no char event (see chromedp's docs/API.md, example 20).
var pressEnter = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		})
		if err != nil {
			return err
		}
	}
	return nil
})

func TestTerminalInBrowser(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-terminal")
	b := startBrowser(t)
	ctx := b.ctx

	login(t, ctx, g.URL, "admin", adminPassword)
	do(t, ctx, "open the agent's terminal", 30*time.Second,
		chromedp.Navigate(g.URL+"/agents/"+agent.ID+"?tab=terminal"),
		chromedp.WaitVisible(chromedp.CSS(".terminal-screens .porthole-xterm .xterm-screen")),
	)
	waitJS(t, ctx, "a shell prompt on the screen", promptJS, 60*time.Second)

	typeInto(t, ctx, "echo porthole-$((6*7))\n")
	waitJS(t, ctx, "read porthole-42 from the xterm.js screen", lineJS("porthole-42"), 20*time.Second)

	// The screen fits its container: more than xterm.js's default 80×24 at 1280×800.
	size := eval[struct{ Cols, Rows int }](t, ctx, `(s => ({Cols: s.cols, Rows: s.rows}))(porthole.term.all()[0].size())`)
	if size.Cols <= 80 || size.Rows < 10 {
		t.Errorf("terminal size at 1280x800 = %dx%d, want fitted to the container (more than 80 columns)", size.Cols, size.Rows)
	}
	// The PTY got that size: stty reports it.
	typeInto(t, ctx, "stty size\n")
	waitJS(t, ctx, "stty size reports the fitted size", lineJS(fmt.Sprintf("%d %d", size.Rows, size.Cols)), 20*time.Second)

	screenshot(t, ctx, "terminal-desktop")
	// A desktop has no special-keys bar.
	if visible := eval[bool](t, ctx, keysBarVisibleJS); visible {
		t.Errorf("special-keys bar visible at 1280x800 with a mouse, want hidden")
	}

	t.Run("title and search", func(t *testing.T) {
		// A window title from OSC 0 is shown as text, never as HTML.
		typeInto(t, ctx, `printf '\033]0;build <b>x</b> & y\007'`+"\n")
		waitJS(t, ctx, "the title is shown as text",
			`(el => el && el.textContent === "build <b>x</b> & y" && !el.querySelector("b"))(document.querySelector(".terminal-title"))`, 20*time.Second)
		if tab := eval[string](t, ctx, `document.querySelector(".terminal-tab.active .terminal-tab-name").textContent`); tab != "build <b>x</b> & y" {
			t.Errorf("tab label = %q, want the window title", tab)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll(".terminal-panel b").length`); n != 0 {
			t.Errorf("the panel has %d <b> elements: an agent-controlled string became HTML", n)
		}
		// Search in the scrollback finds the earlier output.
		do(t, ctx, "search the scrollback", 10*time.Second, chromedp.SendKeys(chromedp.CSS(".terminal-search"), "porthole-42"))
		waitJS(t, ctx, "a search result", `/^1 of 1$/.test(document.querySelector(".terminal-found").textContent)`, 10*time.Second)
		do(t, ctx, "clear the search", 10*time.Second, chromedp.SendKeys(chromedp.CSS(".terminal-search"), "\x1b"))
	})

	t.Run("tabs", func(t *testing.T) {
		do(t, ctx, "open a second terminal", 10*time.Second, chromedp.Click(chromedp.CSS(".terminal-new")))
		waitJS(t, ctx, "a second tab, active", `document.querySelectorAll(".terminal-tab").length === 2 && document.querySelectorAll(".terminal-tab")[1].classList.contains("active")`, 20*time.Second)
		waitJS(t, ctx, "a prompt in the second terminal", `(h => h && /[$#] *$/m.test(h.text()))(porthole.term.all().find(h => h.term.element.offsetParent !== null))`, 60*time.Second)
		typeInto(t, ctx, "echo second-$((1+1))\n")
		waitJS(t, ctx, "output in the second terminal", lineJS("second-2"), 20*time.Second)
		if eval[bool](t, ctx, `porthole.term.all()[0].text().includes("second-2")`) {
			t.Errorf("the first terminal shows the second one's output")
		}
		// Close it: it asks first (a program may be running), then the shell is hung up, the
		// tab shows it ended, then goes.
		do(t, ctx, "close the second terminal", 10*time.Second, chromedp.Click(chromedp.CSS(".terminal-tab.active .terminal-tab-close")))
		if eval[bool](t, ctx, `!!document.querySelector(".terminal-tab.active.exited")`) {
			t.Fatalf("the terminal ended without asking")
		}
		do(t, ctx, "confirm", 10*time.Second, chromedp.Click(chromedp.CSS(".terminal-close-confirm")))
		waitJS(t, ctx, "the tab shows the terminal ended", `!!document.querySelector(".terminal-tab.active.exited") && /closed/.test(document.querySelector(".terminal-ended").textContent)`, 20*time.Second)
		do(t, ctx, "remove the ended tab", 10*time.Second, chromedp.Click(chromedp.CSS(".terminal-tab.active .terminal-tab-close")))
		waitJS(t, ctx, "back to one tab", `document.querySelectorAll(".terminal-tab").length === 1 && porthole.term.all().length === 1`, 10*time.Second)
		typeInto(t, ctx, "echo first-$((2+2))\n")
		waitJS(t, ctx, "the first terminal still works", lineJS("first-4"), 20*time.Second)
	})

	t.Run("watcher", func(t *testing.T) {
		// A second user who may only watch this agent, in a browser context of their own.
		g.call(t, "POST", "/api/users", api.CreateUserRequest{Username: "viewer", Password: "viewer-password-5d1e",
			Permissions: &api.Permissions{Terminal: api.LevelDrive, Desktop: api.LevelDrive, Browser: api.LevelDrive}}, http.StatusCreated, nil)
		share := api.LevelWatch
		g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)

		wctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
		defer cancel()
		if err := chromedp.Do(wctx); err != nil {
			t.Fatalf("open a new browser context: %v", err)
		}
		b.watchConsole(t, wctx, "watcher")
		login(t, wctx, g.URL, "viewer", "viewer-password-5d1e")
		do(t, wctx, "open the agent's terminal as a watcher", 30*time.Second,
			chromedp.Navigate(g.URL+"/agents/"+agent.ID+"?tab=terminal"),
			chromedp.WaitVisible(chromedp.CSS(".terminal-screens .porthole-xterm .xterm-screen")),
		)
		waitJS(t, wctx, "the watcher sees the scrollback", lineJS("porthole-42"), 30*time.Second)
		waitJS(t, wctx, "the watching badge", `(el => el && el.textContent === "watching" && el.offsetParent !== null)(document.querySelector(".terminal-watching"))`, 10*time.Second)
		if eval[bool](t, wctx, `!!document.querySelector(".terminal-new")`) {
			t.Errorf("a watcher is offered the new-terminal button")
		}
		waitJS(t, ctx, "the driver sees who watches", `/viewer \(watching\)/.test((document.querySelector(".terminal-viewers") || {}).textContent)`, 20*time.Second)
		waitJS(t, wctx, "the watcher sees who drives", `/admin \(driving\)/.test((document.querySelector(".terminal-viewers") || {}).textContent)`, 20*time.Second)

		// The watcher's keystrokes go nowhere; the driver's output reaches the watcher.
		typeInto(t, wctx, "echo hacked-$((5*5))\n")
		typeInto(t, ctx, "echo done-$((3+3))\n")
		waitJS(t, wctx, "the watcher sees the driver's command run", lineJS("done-6"), 20*time.Second)
		for _, c := range []context.Context{ctx, wctx} {
			if eval[bool](t, c, `porthole.term.all().some(h => h.text().includes("hacked"))`) {
				t.Errorf("a watcher's keystrokes reached the terminal:\n%s", eval[string](t, c, screensJS))
			}
		}
		// Watchers scale: the watcher's grid is the PTY's size, the driver's.
		sizeJS := `(s => s.cols + "x" + s.rows)(porthole.term.all()[0].size())`
		waitJS(t, wctx, "the watcher's grid is the driver's size",
			fmt.Sprintf(`%s === %q`, sizeJS, eval[string](t, ctx, sizeJS)), 10*time.Second)

		// Unsharing drops the watcher's connection; it keeps retrying, and once
		// the agent is shared again it resumes after the last byte it had: the
		// output it missed appears, and nothing twice.
		// (A settings change also drops the driver's connection: it reconnects.)
		conns := eval[string](t, ctx, connsJS)
		share = api.LevelNone
		g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
		waitJS(t, wctx, "the watcher shows it is disconnected", `!!document.querySelector(".terminal-conn")`, 20*time.Second)
		waitJS(t, ctx, "the driver reconnected", fmt.Sprintf(`%s !== %q && !document.querySelector(".terminal-conn")`, connsJS, conns), 30*time.Second)
		typeInto(t, ctx, "echo missed-$((7*7))\n")
		waitJS(t, ctx, "the driver ran a command", lineJS("missed-49"), 20*time.Second)
		share = api.LevelWatch
		g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
		do(t, wctx, "reconnect now", 10*time.Second, chromedp.Click(chromedp.CSS(".terminal-reconnect")))
		waitJS(t, wctx, "the watcher reconnected", `!document.querySelector(".terminal-conn")`, 30*time.Second)
		waitJS(t, wctx, "the watcher got the missed output", lineJS("missed-49"), 20*time.Second)
		waitJS(t, wctx, "after the reconnect the watcher sees who drives", `/admin \(driving\)/.test((document.querySelector(".terminal-viewers") || {}).textContent)`, 20*time.Second)
		screenshot(t, wctx, "terminal-watcher")
		for _, line := range []string{"porthole-42", "done-6", "missed-49"} {
			if n := eval[int](t, wctx, fmt.Sprintf(`porthole.term.all()[0].text().split("\n").filter(l => l.trim() === %q).length`, line)); n != 1 {
				t.Errorf("after the reconnect the watcher shows %q %d times, want once:\n%s", line, n, eval[string](t, wctx, screensJS))
			}
		}
		conns = eval[string](t, ctx, connsJS)
		share = api.LevelNone
		g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
		waitJS(t, ctx, "the driver reconnected", fmt.Sprintf(`%s !== %q && !document.querySelector(".terminal-conn")`, connsJS, conns), 30*time.Second)
	})

	t.Run("phone", func(t *testing.T) {
		// A second tab of the same browser (same session cookie) as a phone.
		pctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		if err := chromedp.Do(pctx); err != nil { // opens the tab, with no timeout
			t.Fatalf("open a second tab: %v", err)
		}
		b.watchConsole(t, pctx, "phone")
		do(t, pctx, "open the terminal as a phone", 30*time.Second,
			chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch),
			chromedp.Navigate(g.URL+"/agents/"+agent.ID+"?tab=terminal"),
			chromedp.WaitVisible(chromedp.CSS(".terminal-keys .terminal-key")),
		)
		if !eval[bool](t, pctx, keysBarVisibleJS) {
			t.Fatalf("special-keys bar not visible at 390x844 with touch")
		}
		labels := eval[[]string](t, pctx, `[...document.querySelectorAll(".terminal-keys .terminal-key")].map(b => b.textContent)`)
		want := []string{"Esc", "Tab", "Ctrl", "Alt", "←", "↑", "↓", "→", "|", "~", "/"}
		if !reflect.DeepEqual(labels, want) {
			t.Errorf("special keys = %q, want %q", labels, want)
		}
		// The late joiner sees the scrollback.
		waitJS(t, pctx, "the phone sees earlier output", lineJS("porthole-42"), 30*time.Second)

		// Sticky Ctrl: tap it, then the next key from the keyboard is Ctrl+key.
		// If ^C did not reach the shell, sleep would hold the prompt for 10 minutes.
		typeInto(t, pctx, "sleep 600\n")
		do(t, pctx, "tap Ctrl", 10*time.Second, chromedp.Tap(chromedp.CSS(`.terminal-key[data-key="ctrl"]`)))
		waitJS(t, pctx, "Ctrl is armed", `!!document.querySelector('.terminal-key.armed[data-key="ctrl"]')`, 10*time.Second)
		focused := eval[bool](t, pctx, `document.activeElement && document.activeElement.classList.contains("xterm-helper-textarea")`)
		if !focused {
			t.Errorf("after tapping Ctrl the terminal lost the focus (the soft keyboard would close)")
		}
		typeInto(t, pctx, "c")
		waitJS(t, pctx, "Ctrl is released after one key", `!document.querySelector('.terminal-key.armed')`, 10*time.Second)
		typeInto(t, pctx, "echo after-$((1+1))\n")
		waitJS(t, pctx, "Ctrl+C interrupted sleep and the next command ran", lineJS("after-2"), 20*time.Second)
		screenshot(t, pctx, "terminal-phone")

		// The bar's arrow key recalls the last command.
		do(t, pctx, "tap ↑ then Enter", 10*time.Second, chromedp.Tap(chromedp.CSS(`.terminal-key[data-key="up"]`)))
		typeInto(t, pctx, "\n")
		waitJS(t, pctx, "↑ recalled the command", `porthole.term.all()[0].text().split("\n").filter(l => l.trim() === "after-2").length >= 2`, 20*time.Second)
	})

	t.Run("flow control", func(t *testing.T) {
		// 1.9 MB of output, 7× the server's window: it only all arrives if the
		// screen acknowledges what it has written.
		typeInto(t, ctx, "seq 1 300000\n")
		waitJS(t, ctx, "the last line of a long output", lineJS("300000"), 120*time.Second)
		typeInto(t, ctx, "echo end-$((9*9))\n")
		waitJS(t, ctx, "the terminal answers after the flood", lineJS("end-81"), 20*time.Second)
	})
}

// screenshot saves the tab's screen to $PORTHOLE_E2E_SCREENSHOTS/name.png when
// that variable names a directory (to look at the layout; off by default).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("PORTHOLE_E2E_SCREENSHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
	}
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}

// keysBarVisibleJS is true when the special-keys bar is laid out and on screen.
const keysBarVisibleJS = `(() => {
	const el = document.querySelector(".terminal-keys");
	if (!el || el.hidden) return false;
	const r = el.getBoundingClientRect();
	return getComputedStyle(el).display !== "none" && r.width > 0 && r.height > 0 && r.bottom <= innerHeight + 1;
})()`
