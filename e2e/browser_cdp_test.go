package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	pbrowser "github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/internal/testenv"
)

// servePage serves the test's form page on a non-loopback address of this host (what a jail
// with network full reaches) until the test ends.
func servePage(t *testing.T) string {
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
		t.Fatal("no non-loopback IPv4 address on this host")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>porthole form</title>
<form id="f" onsubmit="event.preventDefault(); document.getElementById('result').textContent = 'Hello, ' + document.getElementById('name').value + '!'">
<input id="name"><button id="go">Go</button></form><p id="result"></p>`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// playwrightScript connects with playwright-core over CDP (the endpoint's /json/version,
// then its WebSocket) with the agent token, opens the page, fills the form and prints the result.
const playwrightScript = `
const { chromium } = require('playwright-core');
(async () => {
  const [endpoint, token, url] = process.argv.slice(2);
  const browser = await chromium.connectOverCDP(endpoint, { headers: { Authorization: 'Bearer ' + token }, timeout: 30000 });
  const context = browser.contexts()[0] || await browser.newContext();
  const page = await context.newPage();
  await page.goto(url);
  console.error('PAGE-OPEN');
  await page.fill('#name', 'Porthole');
  // Give the watcher a moment to attach before the result appears.
  await new Promise(r => setTimeout(r, 1500));
  await page.click('#go');
  await page.waitForFunction(() => document.getElementById('result').textContent !== '');
  const result = await page.textContent('#result');
  console.log(JSON.stringify({ result, title: await page.title() }));
  await new Promise(r => setTimeout(r, 1500));
  await browser.close();
})().catch(e => { console.error('PLAYWRIGHT-ERROR', e && e.stack || e); process.exit(1); });
`

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// TestBrowserPlaywrightOverCDP: a real Playwright client (playwright-core, connectOverCDP, no
// browser download) drives the agent's Chromium through the agent-token endpoint: it opens a
// page served by the test, fills a form and reads the result, while a chromedp client on the
// same route (the owner's automation) watches the same page and sees the result. Without a
// valid token the route answers 401; another user gets 404 (or 403 when the agent is shared
// with them: they may drive the live view, not attach automation). Connections are audited.
func TestBrowserPlaywrightOverCDP(t *testing.T) {
	node := testenv.LookPath(t, "node")
	modules := filepath.Join(repoRoot(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "playwright-core", "package.json")); err != nil {
		testenv.Missing(t, "playwright-core in node_modules: run npm ci (build/scripts/deps.sh)")
	}
	testenv.LookPath(t, "slirp4netns")
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "chromium")
	g := startBrowserGateway(t)
	pageURL := servePage(t)
	var agent api.Agent
	g.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: "e2e-playwright",
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkFull}, Share: api.LevelNone},
		http.StatusCreated, &agent)
	var tok api.Token
	g.call(t, "POST", "/api/agents/"+agent.ID+"/tokens", nil, http.StatusCreated, &tok)
	endpoint := g.URL + "/api/agents/" + agent.ID + "/browser"
	bearer := http.Header{"Authorization": {"Bearer " + tok.Secret}}

	// Discovery: the /json/version shape, pointing at the cdp route on the same host.
	var ver map[string]string
	code, body := getWith(t, endpoint+"/json/version", bearer)
	if code != http.StatusOK || json.Unmarshal(body, &ver) != nil {
		t.Fatalf("json/version = %d %s", code, body)
	}
	wsURL := "ws" + strings.TrimPrefix(endpoint, "http") + "/cdp"
	if ver["webSocketDebuggerUrl"] != wsURL {
		t.Errorf("webSocketDebuggerUrl = %q, want %q", ver["webSocketDebuggerUrl"], wsURL)
	}

	// A person watches the agent's browser in the live view (the owner's session) meanwhile:
	// frames of the page Playwright fills, its tab's title, and "agent automating".
	live := watchLiveView(t, g, agent.ID)

	// The watcher: chromedp on the same route (the token), attached to the page Playwright opens.
	actx, acancel := remote.NewAllocator(context.Background(), wsURL, remote.NoModifyURL, remote.WithDialHTTPHeader(bearer))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("chromedp over the cdp route: %v", err)
	}

	script := filepath.Join(t.TempDir(), "connect.js")
	os.WriteFile(script, []byte(playwrightScript), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, endpoint, tok.Secret, pageURL)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stdout strings.Builder
	stderrR, stderrW := io.Pipe()
	cmd.Stdout, cmd.Stderr = &stdout, stderrW
	var stderr strings.Builder
	pageOpen := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: the test; ends when the script's stderr closes
		defer wg.Done()
		buf := make([]byte, 4096)
		once := sync.Once{}
		for {
			n, err := stderrR.Read(buf)
			stderr.Write(buf[:n])
			if strings.Contains(stderr.String(), "PAGE-OPEN") {
				once.Do(func() { close(pageOpen) })
			}
			if err != nil {
				return
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watched := make(chan string, 1)
	go func() { // owner: the test; ends within its timeout
		select {
		case <-pageOpen:
		case <-ctx.Done():
			watched <- "page never opened"
			return
		}
		targets, err := chromedp.Targets(bctx)
		if err != nil {
			watched <- "targets: " + err.Error()
			return
		}
		for _, ti := range targets {
			if ti.Type == "page" && ti.URL == pageURL {
				tctx, tcancel := chromedp.NewContext(bctx, chromedp.WithTargetID(ti.TargetID), chromedp.WithDetachOnCancel())
				defer tcancel()
				res, err := chromedp.Run(tctx, chromedp.Poll[string](`(() => { const r = document.getElementById('result'); return r && r.textContent !== '' ? r.textContent : null })()`, chromedp.WithPollingTimeout(30*time.Second)))
				if err != nil {
					watched <- "watch: " + err.Error()
					return
				}
				watched <- res
				return
			}
		}
		watched <- fmt.Sprintf("no page target on %s among %d targets", pageURL, len(targets))
	}()
	err := cmd.Wait()
	stderrW.Close()
	wg.Wait()
	if err != nil {
		t.Fatalf("playwright script: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out struct{ Result, Title string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &out); err != nil {
		t.Fatalf("playwright output %q: %v", stdout.String(), err)
	}
	if out.Result != "Hello, Porthole!" || out.Title != "porthole form" {
		t.Errorf("playwright read %+v, want Hello, Porthole! on 'porthole form'", out)
	}
	select {
	case w := <-watched:
		if w != "Hello, Porthole!" {
			t.Errorf("the chromedp watcher saw %q, want the form's result", w)
		}
	case <-time.After(30 * time.Second):
		t.Error("the chromedp watcher saw nothing")
	}
	// The person's live view showed it all: the agent automating, the form's tab, its frames.
	live.wait(t, "the live view: agent automating, the form's tab and frames of it", 30*time.Second, func() bool {
		return live.sawAutomating && live.sawTitle["porthole form"] && live.framesAfterTitle > 0
	})

	// The browser is still there for the watcher after Playwright's browser.close().
	if two, err := chromedp.Run(bctx, chromedp.Evaluate[int](`1+1`)); err != nil || two != 2 {
		t.Errorf("after Playwright closed: 1+1 = %d, %v", two, err)
	}
	bcancel()

	// Refusals.
	if code, b := getWith(t, endpoint+"/json/version", nil); code != http.StatusUnauthorized {
		t.Errorf("json/version without credentials = %d %s, want 401", code, b)
	}
	if code, b := getWith(t, endpoint+"/json/version", http.Header{"Authorization": {"Bearer not-a-token"}}); code != http.StatusUnauthorized {
		t.Errorf("json/version with an invalid token = %d %s, want 401", code, b)
	}
	if code := dialCode(t, wsURL, nil); code != http.StatusUnauthorized {
		t.Errorf("cdp WebSocket without credentials = %d, want 401", code)
	}
	if code := dialCode(t, wsURL, http.Header{"Authorization": {"Bearer not-a-token"}}); code != http.StatusUnauthorized {
		t.Errorf("cdp WebSocket with an invalid token = %d, want 401", code)
	}
	// Cross-site WebSocket hijacking: a page of another site in the owner's browser opens the
	// cdp route with the owner's cookie (browsers always send the page's Origin): refused
	// before the upgrade. json/version answers no cross-origin reader (no CORS header).
	ownerCookie := g.sessionHeader()
	ownerCookie.Set("Origin", "https://evil.example")
	if code := dialCode(t, wsURL, ownerCookie); code != http.StatusForbidden {
		t.Errorf("the owner's cookie from a foreign Origin on the cdp WebSocket = %d, want 403", code)
	}
	ownerCookie.Set("Origin", g.URL)
	if code := dialCode(t, wsURL, ownerCookie); code != http.StatusSwitchingProtocols {
		t.Errorf("the owner's cookie from the gateway's own Origin on the cdp WebSocket = %d, want 101", code)
	}
	for _, origin := range []string{"https://evil.example", "null"} {
		req, _ := http.NewRequest("GET", endpoint+"/json/version", nil)
		req.Header.Set("Origin", origin)
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "" {
			t.Errorf("json/version from Origin %s with the owner's cookie: Access-Control-Allow-Origin %q, want none", origin, acao)
		}
	}

	// Bob: his own agent's token does not reach Alice's (admin's) agent; his session neither.
	bob := g.addUser(t, "bob")
	var bobAgent api.Agent
	bob.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: "bob-agent",
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}}, http.StatusCreated, &bobAgent)
	var bobTok api.Token
	bob.call(t, "POST", "/api/agents/"+bobAgent.ID+"/tokens", nil, http.StatusCreated, &bobTok)
	bobBearer := http.Header{"Authorization": {"Bearer " + bobTok.Secret}}
	if code, b := getWith(t, endpoint+"/json/version", bobBearer); code != http.StatusForbidden && code != http.StatusNotFound {
		t.Errorf("another agent's token on json/version = %d %s, want 403/404", code, b)
	}
	if code := dialCode(t, wsURL, bobBearer); code != http.StatusForbidden && code != http.StatusNotFound {
		t.Errorf("another agent's token on the cdp WebSocket = %d, want 403/404", code)
	}
	if code, b := getWithClient(t, bob.client, endpoint+"/json/version", g.URL); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Errorf("another user's session on json/version = %d %s, want 404/403", code, b)
	}
	// Shared with Bob for driving: he may drive the live view, not attach automation.
	share := api.LevelDrive
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
	if code, b := getWithClient(t, bob.client, endpoint+"/json/version", g.URL); code != http.StatusForbidden {
		t.Errorf("a drive sharee on json/version = %d %s, want 403", code, b)
	}
	if bws, _, err := websocket.DefaultDialer.Dial(wsURL, bob.sessionHeader()); err != nil {
		t.Errorf("a drive sharee's cdp WebSocket: %v, want it upgraded then closed 1008", err)
	} else {
		bws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := bws.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Errorf("a drive sharee's cdp WebSocket: %v, want close 1008", err)
		}
		bws.Close()
	}

	// Revoking the token ends its open automation connection.
	rws, _, err := websocket.DefaultDialer.Dial(wsURL, bearer)
	if err != nil {
		t.Fatalf("dial with the token: %v", err)
	}
	rws.WriteJSON(map[string]any{"id": 1, "method": "Browser.getVersion"})
	rws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, _, err := rws.ReadMessage(); err != nil {
		t.Fatalf("Browser.getVersion with the token: %v", err)
	}
	g.call(t, "DELETE", "/api/agents/"+agent.ID+"/tokens/"+tok.ID, nil, http.StatusNoContent, nil)
	for {
		if _, _, err := rws.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
				t.Errorf("after the token was revoked the connection ended with %v, want close 1008", err)
			}
			break
		}
	}
	rws.Close()

	// Audit: automation.open and automation.close for the token's connections.
	var events []api.AuditEvent
	g.call(t, "GET", "/api/audit?agent="+agent.ID+"&limit=500", nil, http.StatusOK, &events)
	var opens, closes int
	for _, e := range events {
		if e.Actor == "token:"+tok.ID && strings.HasSuffix(e.Action, "automation.open") {
			opens++
		}
		if e.Actor == "token:"+tok.ID && strings.HasSuffix(e.Action, "automation.close") {
			closes++
		}
	}
	if opens < 2 || closes < 1 {
		t.Errorf("audit: %d automation.open and %d automation.close by the token, want ≥2 and ≥1", opens, closes)
	}
}

func getWith(t *testing.T, url string, h http.Header) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func getWithClient(t *testing.T, hc *http.Client, url, origin string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Origin", origin)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// dialCode dials a WebSocket and returns the HTTP status of the refusal (101 when it opened).
func dialCode(t *testing.T, url string, h http.Header) int {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err == nil {
		ws.Close()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode
}

// TestBrowserHeadedOnAgentDesktop: when the agent's desktop runs, its browser starts headed on
// that display: a page the agent's automation opens (chromedp on the cdp route, the agent's
// token) is not headless and appears in the desktop's screenshot.
func TestBrowserHeadedOnAgentDesktop(t *testing.T) {
	testenv.LookPath(t, "Xvfb")
	g := startBrowserGateway(t)
	agent := g.createAgent(t, "e2e-headed")
	var tok api.Token
	g.call(t, "POST", "/api/agents/"+agent.ID+"/tokens", nil, http.StatusCreated, &tok)

	// The owner opens the desktop: the agent's display starts.
	dws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/agents/"+agent.ID+"/desktop"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the desktop: %v", err)
	}
	defer dws.Close()
	go func() { // owner: the test; drains the desktop's frames until the socket closes
		for {
			if _, _, err := dws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res api.ExecResult
		g.call(t, "POST", "/api/agents/"+agent.ID+"/exec", sh("test -S /tmp/.X11-unix/X0 && echo up"), http.StatusOK, &res)
		if strings.Contains(res.Stdout, "up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent's display did not come up")
		}
		time.Sleep(200 * time.Millisecond)
	}

	wsURL := "ws" + strings.TrimPrefix(g.URL, "http") + "/api/agents/" + agent.ID + "/browser/cdp"
	actx, acancel := remote.NewAllocator(context.Background(), wsURL, remote.NoModifyURL,
		remote.WithDialHTTPHeader(http.Header{"Authorization": {"Bearer " + tok.Secret}}))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	ua, err := chromedp.Run(bctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ua, "Headless") {
		t.Errorf("with the desktop up the browser is headless: %s", ua)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(`data:text/html,<body style="margin:0;background:%23ff00ff"><h1>on the desktop</h1>`)); err != nil {
		t.Fatal(err)
	}
	var n int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if _, n = magentaBox(pngShot(t, g, tok.Secret, agent.ID)); n > 20000 {
			break
		}
	}
	if n <= 20000 {
		t.Errorf("the desktop shows %d magenta pixels, want the agent's browser page on it", n)
	}
}

// liveView is a person's viewer of an agent's browser (its live view WebSocket), reduced to
// what the Playwright test checks: whether it was told the agent automates, the tab titles it
// saw, and the frames it got once a tab had a title (acknowledged, as the app does).
type liveView struct {
	mu               sync.Mutex
	cond             *sync.Cond
	sawAutomating    bool
	sawTitle         map[string]bool
	framesAfterTitle int
}

func watchLiveView(t *testing.T, g *gateway, agentID string) *liveView {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/agents/"+agentID+"/browser"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the live view: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	v := &liveView{sawTitle: map[string]bool{}}
	v.cond = sync.NewCond(&v.mu)
	var wmu sync.Mutex
	send := func(m pbrowser.Message) {
		wmu.Lock()
		defer wmu.Unlock()
		ws.WriteMessage(websocket.BinaryMessage, pbrowser.Encode(m))
	}
	send(pbrowser.Resize{W: 1280, H: 800})
	go func() { // owner: this test; ends when the connection closes (cleanup)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				v.mu.Lock()
				v.cond.Broadcast()
				v.mu.Unlock()
				return
			}
			m, err := pbrowser.Decode(b)
			if err != nil {
				continue
			}
			v.mu.Lock()
			switch m := m.(type) {
			case pbrowser.Control:
				v.sawAutomating = v.sawAutomating || m.Automating
			case pbrowser.Tabs:
				for _, tab := range m.Tabs {
					v.sawTitle[tab.Title] = true
				}
			case pbrowser.Frame:
				if v.sawTitle["porthole form"] {
					v.framesAfterTitle++
				}
			}
			v.cond.Broadcast()
			v.mu.Unlock()
			if f, ok := m.(pbrowser.Frame); ok {
				send(pbrowser.Ack{Seq: f.Seq})
			}
		}
	}()
	return v
}

// wait waits until cond (called with mu held) holds, or fails the test after d.
func (v *liveView) wait(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	timer := time.AfterFunc(d, func() { v.mu.Lock(); v.cond.Broadcast(); v.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(d)
	v.mu.Lock()
	defer v.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: automating %v, titles %v, frames after the form's title %d", what, v.sawAutomating, v.sawTitle, v.framesAfterTitle)
		}
		v.cond.Wait()
	}
}
