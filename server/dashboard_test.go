package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/surface"
)

// statusTerms is a terminal gateway half that reports a Status the test sets, and keeps the
// Env so the test can say "changed" as a real surface does on output.
type statusTerms struct {
	fakeTerms
	env   surface.Env
	mu    sync.Mutex
	st    map[string]surface.Status
	calls atomic.Int64
}

func (f *statusTerms) Status(agentID string) surface.Status {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st[agentID]
}

func (f *statusTerms) set(agentID string, st surface.Status) {
	f.mu.Lock()
	f.st[agentID] = st
	f.mu.Unlock()
	f.env.Changed(agentID)
}

func withStatusTerms(f *statusTerms) envOption {
	return func(c *Config) {
		c.Surfaces = []surface.Description{{Name: api.SurfaceTerminal,
			Gateway: func(env surface.Env) (surface.Gateway, error) { f.env = env; return f, nil }}}
	}
}

// countingConn counts the bytes a client reads.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// dash is a dashboard client: it decodes every message into the agents it shows.
type dash struct {
	t      *testing.T
	ws     *websocket.Conn
	nbytes atomic.Int64
	mu     sync.Mutex
	cond   *sync.Cond
	agents map[string]api.DashboardAgent
	msgs   []api.DashboardMessage
	health []api.BackendHealth
	closed error
}

func (e *env) dialDash(t *testing.T, cookie string) *dash {
	t.Helper()
	d := &dash{t: t, agents: map[string]api.DashboardAgent{}}
	d.cond = sync.NewCond(&d.mu)
	h := http.Header{}
	auth{cookie: cookie}.apply(h)
	dialer := websocket.Dialer{HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, n: &d.nbytes}, nil
		}}
	ws, resp, err := dialer.Dial("ws"+strings.TrimPrefix(e.ts.URL, "http")+"/api/dashboard", h)
	if err != nil {
		t.Fatalf("dial the dashboard: %v (%v)", err, resp)
	}
	d.ws = ws
	t.Cleanup(func() { ws.Close() })
	go func() { // owner: this test; exits when the connection closes
		for {
			_, b, err := ws.ReadMessage()
			d.mu.Lock()
			if err != nil {
				d.closed = err
				d.cond.Broadcast()
				d.mu.Unlock()
				return
			}
			var m api.DashboardMessage
			if err := json.Unmarshal(b, &m); err != nil {
				d.closed = fmt.Errorf("decode %s: %w", b, err)
				d.cond.Broadcast()
				d.mu.Unlock()
				return
			}
			d.msgs = append(d.msgs, m)
			switch m.Type {
			case api.DashSnapshot:
				clear(d.agents)
				for _, a := range m.Agents {
					d.agents[a.ID] = a
				}
			case api.DashAgent:
				d.agents[m.Agent.ID] = *m.Agent
			case api.DashRemoved:
				delete(d.agents, m.ID)
			case api.DashBackends:
				d.health = m.Backends
			}
			d.cond.Broadcast()
			d.mu.Unlock()
		}
	}()
	return d
}

// wait waits until cond holds on the dashboard's state (under its lock).
func (d *dash) wait(what string, within time.Duration, cond func() bool) time.Duration {
	d.t.Helper()
	start := time.Now()
	stop := time.AfterFunc(within, func() { d.mu.Lock(); d.cond.Broadcast(); d.mu.Unlock() })
	defer stop.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for !cond() {
		if d.closed != nil {
			d.t.Fatalf("%s: the dashboard closed: %v", what, d.closed)
		}
		if time.Since(start) >= within {
			d.t.Fatalf("%s: not within %v; agents %+v", what, within, d.agents)
		}
		d.cond.Wait()
	}
	return time.Since(start)
}

func (d *dash) snapshot() {
	d.t.Helper()
	d.wait("the snapshot", 5*time.Second, func() bool { return len(d.msgs) > 0 })
}

func (d *dash) agent(id string) (api.DashboardAgent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.agents[id]
	return a, ok
}

func TestDashboardSnapshotIsFilteredByPermission(t *testing.T) {
	f := &statusTerms{st: map[string]surface.Status{}}
	e := newEnv(t, withStatusTerms(f))
	private := e.addAgent("owner", api.LevelNone, "bwrap")
	shared := e.addAgent("owner", api.LevelWatch, "bwrap")
	f.st[shared.ID] = surface.Status{Sessions: 2, Lines: []string{"$ make", "ok"}}
	f.st[private.ID] = surface.Status{Sessions: 1, Lines: []string{"secret"}}
	// "other" may not see terminals at all.
	if _, err := e.srv.st.UpdateUser(e.ctx(), e.users["other"].ID, storeUserPerms(api.Permissions{
		Terminal: api.LevelNone, Desktop: api.LevelDrive, Browser: api.LevelDrive})); err != nil {
		t.Fatal(err)
	}

	owner := e.dialDash(t, e.session(e.users["owner"].ID))
	owner.snapshot()
	if _, ok := owner.agent(private.ID); !ok {
		t.Errorf("the owner's dashboard lacks their private agent")
	}
	a, ok := owner.agent(shared.ID)
	if !ok || a.State != api.StateStopped || len(a.Surfaces) != 1 || a.Surfaces[0].Sessions != 2 ||
		!slices.Equal(a.Surfaces[0].Lines, []string{"$ make", "ok"}) || a.Access.Terminal != api.LevelDrive {
		t.Errorf("owner's card of the shared agent = %+v, want stopped, 2 terminals with their lines, drive", a)
	}

	watcher := e.dialDash(t, e.session(e.users["watcher"].ID))
	watcher.snapshot()
	if _, ok := watcher.agent(private.ID); ok {
		t.Errorf("another user's dashboard shows a private agent")
	}
	if a, ok := watcher.agent(shared.ID); !ok || a.Access.Terminal != api.LevelWatch || len(a.Surfaces) != 1 {
		t.Errorf("watcher's card = %+v, %v; want the shared agent with watch and its terminal", a, ok)
	}

	other := e.dialDash(t, e.session(e.users["other"].ID))
	other.snapshot()
	if a, ok := other.agent(shared.ID); !ok || len(a.Surfaces) != 0 || a.Access.Terminal != api.LevelNone {
		t.Errorf("card for a user without terminal access = %+v, want the agent without its terminal's thumbnail", a)
	}

	// Agent tokens and anonymous callers get no dashboard.
	_, tok := e.addToken(shared.ID)
	if _, status, _ := e.dialWS("/api/dashboard", auth{bearer: tok}); status != http.StatusForbidden {
		t.Errorf("dashboard with an agent token: %d, want 403", status)
	}
	if _, status, _ := e.dialWS("/api/dashboard", auth{}); status != http.StatusUnauthorized {
		t.Errorf("dashboard without a session: %d, want 401", status)
	}
}

// TestDashboardShowsAttachWithinASecond: a second user starts watching; the owner's dashboard
// shows it (name, surface, level) well within a second, and shows them gone when they leave.
// A watcher with no terminal access sees neither.
func TestDashboardShowsAttachWithinASecond(t *testing.T) {
	f := &statusTerms{st: map[string]surface.Status{}}
	e := newEnv(t, withStatusTerms(f))
	a := e.addAgent("owner", api.LevelWatch, "bwrap")
	owner := e.dialDash(t, e.session(e.users["owner"].ID))
	owner.snapshot()

	ws, status, body := e.dialWS("/api/agents/"+a.ID+"/terminal", auth{cookie: e.session(e.users["watcher"].ID)})
	if ws == nil {
		t.Fatalf("watcher's terminal: %d %s", status, body)
	}
	took := owner.wait("the watcher on the owner's dashboard", time.Second, func() bool {
		c := owner.agents[a.ID]
		return len(c.Viewers) == 1 && c.Viewers[0].Name == "watcher" && c.Viewers[0].Mode == api.LevelWatch &&
			c.Viewers[0].Surface == api.SurfaceTerminal && c.Viewers[0].Count == 1 && !c.Viewers[0].You
	})
	t.Logf("the attach showed on the dashboard after %v", took)
	ws.Close()
	owner.wait("the watcher gone", 2*time.Second, func() bool { return len(owner.agents[a.ID].Viewers) == 0 })
}

// TestDashboardIdleSendsNothing: with 20 idle agents the gateway sends no dashboard bytes and
// computes nothing between keep-alives; a flood of surface changes gives at most about one
// update a second per agent.
func TestDashboardIdleSendsNothing(t *testing.T) {
	f := &statusTerms{st: map[string]surface.Status{}}
	e := newEnv(t, withStatusTerms(f))
	var agents []api.Agent
	for i := 0; i < 20; i++ {
		a := e.addAgent("owner", api.LevelNone, "bwrap")
		f.st[a.ID] = surface.Status{Sessions: 1, Lines: []string{"$ "}}
		e.srv.dash.onHelper(a.ID, bridges.HelperState{State: bridges.HelperRunning, Streams: 1})
		agents = append(agents, a)
	}
	d := e.dialDash(t, e.session(e.users["owner"].ID))
	d.snapshot()
	d.wait("20 agents and the backends", 5*time.Second, func() bool { return len(d.agents) == 20 && d.health != nil })
	if got := d.agents[agents[3].ID].State; got != api.StateRunning {
		t.Errorf("state = %q, want running", got)
	}
	time.Sleep(200 * time.Millisecond) // anything in flight lands
	bytes0, updates0, calls0 := d.nbytes.Load(), e.dashMetric(t, "porthole_dashboard_updates_total"), f.calls.Load()
	const idle = 3 * time.Second
	time.Sleep(idle)
	bytes1, updates1, calls1 := d.nbytes.Load(), e.dashMetric(t, "porthole_dashboard_updates_total"), f.calls.Load()
	t.Logf("20 idle agents over %v: %d bytes, %v cards computed, %d surface Status calls", idle, bytes1-bytes0, updates1-updates0, calls1-calls0)
	if bytes1 != bytes0 || updates1 != updates0 || calls1 != calls0 {
		t.Errorf("idle dashboard: %d bytes, %v updates, %d Status calls in %v; want none (keep-alive every %v)",
			bytes1-bytes0, updates1-updates0, calls1-calls0, idle, dashPing)
	}

	// A flood of output on one agent: the thumbnail follows at most about once a second.
	stop := time.Now().Add(2500 * time.Millisecond)
	n := 0
	for time.Now().Before(stop) {
		n++
		f.set(agents[0].ID, surface.Status{Sessions: 1, Lines: []string{"line " + strconv.Itoa(n)}})
		time.Sleep(time.Millisecond)
	}
	last := "line " + strconv.Itoa(n)
	d.wait("the last line", 3*time.Second, func() bool {
		l := d.agents[agents[0].ID].Surfaces
		return len(l) == 1 && slices.Equal(l[0].Lines, []string{last})
	})
	updates2 := e.dashMetric(t, "porthole_dashboard_updates_total")
	t.Logf("%d changes in 2.5 s gave %v updates", n, updates2-updates1)
	if updates2-updates1 > 5 || updates2-updates1 < 2 {
		t.Errorf("%d changes in 2.5 s gave %v updates, want about one a second", n, updates2-updates1)
	}
}

// dashMetric reads one counter from /metrics.
func (e *env) dashMetric(t *testing.T, name string) float64 {
	t.Helper()
	resp, body := e.do("GET", "/metrics", nil, auth{})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDashboardFollowsAgents: created, shared, unshared and deleted agents appear and go on
// the dashboards of whoever may (no longer) see them.
func TestDashboardFollowsAgents(t *testing.T) {
	e := newEnv(t)
	ownerCookie := e.session(e.users["owner"].ID)
	owner := e.dialDash(t, ownerCookie)
	other := e.dialDash(t, e.session(e.users["other"].ID))
	owner.snapshot()
	other.snapshot()

	resp, body := e.do("POST", "/api/agents", api.CreateAgentRequest{Name: "fresh", Backend: api.Backend{Type: "bwrap"}}, auth{cookie: ownerCookie})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	a := decode[api.Agent](t, body)
	owner.wait("the new agent on the owner's dashboard", time.Second, func() bool { _, ok := owner.agents[a.ID]; return ok })

	share := api.LevelWatch
	e.do("PATCH", "/api/agents/"+a.ID, api.UpdateAgentRequest{Share: &share}, auth{cookie: ownerCookie})
	other.wait("the shared agent on another dashboard", time.Second, func() bool {
		c, ok := other.agents[a.ID]
		return ok && c.Access.Terminal == api.LevelWatch && c.Owner == "owner"
	})
	share = api.LevelNone
	e.do("PATCH", "/api/agents/"+a.ID, api.UpdateAgentRequest{Share: &share}, auth{cookie: ownerCookie})
	other.wait("the unshared agent gone", time.Second, func() bool { _, ok := other.agents[a.ID]; return !ok })

	if resp, body := e.do("DELETE", "/api/agents/"+a.ID, nil, auth{cookie: ownerCookie}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	owner.wait("the deleted agent gone", time.Second, func() bool { _, ok := owner.agents[a.ID]; return !ok })
}

// TestDashboardHelperProblems: helper states show as they change; a backend that cannot start
// and a crash are sentences for people, never the internal error.
func TestDashboardHelperProblems(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, "container")
	d := e.dialDash(t, e.session(e.users["owner"].ID))
	d.snapshot()
	state := func(want string) func() bool {
		return func() bool { return d.agents[a.ID].State == want }
	}
	e.srv.dash.onHelper(a.ID, bridges.HelperState{State: bridges.HelperStarting})
	d.wait("starting", time.Second, state(api.StateStarting))
	internal := fmt.Errorf("agent %s: container engine unix:///run/secret/podman.sock: dial: %w", a.ID, bridges.ErrBackendUnavailable)
	e.srv.dash.onHelper(a.ID, bridges.HelperState{State: bridges.HelperStopped, Err: internal})
	d.wait("stopped with a problem", time.Second, func() bool { return d.agents[a.ID].Problem != "" })
	p := d.agents[a.ID].Problem
	if strings.Contains(p, "/run/secret") || strings.Contains(p, "dial") || !strings.Contains(p, "backend is unavailable") {
		t.Errorf("problem %q: want a sentence about the backend, without internals", p)
	}
	e.srv.dash.onHelper(a.ID, bridges.HelperState{State: bridges.HelperIdle})
	d.wait("idle, the problem cleared", time.Second, func() bool { return d.agents[a.ID].State == api.StateIdle && d.agents[a.ID].Problem == "" })
	crash := fmt.Errorf("agent %s: %w: signal: killed", a.ID, bridges.ErrHelperGone)
	e.srv.dash.onHelper(a.ID, bridges.HelperState{State: bridges.HelperStopped, Err: crash})
	d.wait("a crash", time.Second, func() bool { return strings.Contains(d.agents[a.ID].Problem, "stopped unexpectedly") })
	if b := d.health; len(b) != 2 || b[0].Backend != "bwrap" || !b[0].OK || b[1].OK {
		t.Errorf("backends = %+v, want the probes (bwrap ok, container down)", b)
	}
}

// TestDashboardClosesOnLogout: the dashboard is a session's WebSocket like any other.
func TestDashboardClosesOnLogout(t *testing.T) {
	e := newEnv(t)
	cookie := e.session(e.users["owner"].ID)
	d := e.dialDash(t, cookie)
	d.snapshot()
	e.do("DELETE", "/api/session", nil, auth{cookie: cookie})
	d.mu.Lock()
	for d.closed == nil {
		d.cond.Wait()
	}
	err := d.closed
	d.mu.Unlock()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
		t.Errorf("dashboard after logout: %v, want close 1008", err)
	}
}

func TestPagesRedirectWithoutSession(t *testing.T) {
	e := newEnv(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
		auth{cookie: cookie}.apply(req.Header)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	cookie := e.session(e.users["owner"].ID)
	for _, tt := range []struct {
		path, cookie string
		status       int
		location     string
	}{
		{"/", "", http.StatusFound, "/login"},
		{"/agents/abc?tab=desktop", "", http.StatusFound, "/login?next=%2Fagents%2Fabc%3Ftab%3Ddesktop"},
		{"/account", "stale-cookie", http.StatusFound, "/login?next=%2Faccount"},
		{"/login", cookie, http.StatusFound, "/"},
		{"/login?next=/audit", cookie, http.StatusFound, "/audit"},
		{"/login?next=//evil.example", cookie, http.StatusFound, "/"},
		{"/login", "", 0, ""},
		{"/", cookie, 0, ""},
		{"/web/app.css", "", 0, ""},
		{"/manifest.webmanifest", "", 0, ""},
	} {
		resp := get(tt.path, tt.cookie)
		if tt.status == 0 {
			if resp.StatusCode == http.StatusFound {
				t.Errorf("GET %s (cookie %v) redirected to %s, want it served", tt.path, tt.cookie != "", resp.Header.Get("Location"))
			}
			continue
		}
		if resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.location {
			t.Errorf("GET %s = %d → %q, want %d → %q", tt.path, resp.StatusCode, resp.Header.Get("Location"), tt.status, tt.location)
		}
	}
}

func TestSessionsListAndLogoutOthers(t *testing.T) {
	e := newEnv(t)
	login := func(ua string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", e.ts.URL+"/api/session", strings.NewReader(`{"username":"admin","password":"`+adminPassword+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", ua)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == SessionCookie {
				return c.Value
			}
		}
		t.Fatalf("login: %d, no cookie", resp.StatusCode)
		return ""
	}
	laptop, phone, tablet := login("Laptop Browser"), login("Phone Browser"), login("Tablet Browser")
	resp, body := e.do("GET", "/api/sessions", nil, auth{cookie: laptop})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	list := decode[[]api.Session](t, body)
	if len(list) != 3 || strings.Contains(string(body), laptop) {
		t.Fatalf("sessions = %s, want 3 without cookie values", body)
	}
	var current, phoneID string
	for _, s := range list {
		if s.Current {
			current = s.UserAgent
		}
		if s.UserAgent == "Phone Browser" {
			phoneID = s.ID
		}
		if s.Remote == "" || s.ID == "" || s.ExpiresAt.IsZero() {
			t.Errorf("session %+v lacks its address, id or expiry", s)
		}
	}
	if current != "Laptop Browser" || phoneID == "" {
		t.Fatalf("current %q, phone id %q", current, phoneID)
	}
	// Log out the phone: its open WebSockets close, its cookie stops working.
	d := e.dialDash(t, phone)
	d.snapshot()
	if resp, body := e.do("DELETE", "/api/sessions/"+phoneID, nil, auth{cookie: laptop}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete the phone's session: %d %s", resp.StatusCode, body)
	}
	d.mu.Lock()
	for d.closed == nil {
		d.cond.Wait()
	}
	d.mu.Unlock()
	if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: phone}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the phone's cookie after its logout: %d, want 401", resp.StatusCode)
	}
	// The current session cannot be ended this way.
	for _, s := range list {
		if s.Current {
			if resp, _ := e.do("DELETE", "/api/sessions/"+s.ID, nil, auth{cookie: laptop}); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("deleting the current session: %d, want 400", resp.StatusCode)
			}
		}
	}
	// Log out every other session: the tablet goes, the laptop stays.
	if resp, body := e.do("DELETE", "/api/sessions", nil, auth{cookie: laptop}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("log out others: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: tablet}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the tablet after 'log out other sessions': %d, want 401", resp.StatusCode)
	}
	resp, body = e.do("GET", "/api/sessions", nil, auth{cookie: laptop})
	if list := decode[[]api.Session](t, body); resp.StatusCode != http.StatusOK || len(list) != 1 || !list[0].Current {
		t.Errorf("sessions after: %s, want the current one only", body)
	}
	// Someone else's session id is not found.
	other := e.session(e.users["other"].ID)
	if resp, _ := e.do("DELETE", "/api/sessions/"+list[0].ID, nil, auth{cookie: other}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleting another user's session: %d, want 404", resp.StatusCode)
	}
	var actions []string
	for _, ev := range e.audits() {
		actions = append(actions, ev.Action)
	}
	if !slices.Contains(actions, "session.revoke") || !slices.Contains(actions, "session.revoke_others") {
		t.Errorf("audit %v lacks session.revoke and session.revoke_others", actions)
	}
}

func TestTokenNamesAndAuditFilters(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, "bwrap")
	cookie := e.session(e.users["owner"].ID)
	resp, body := e.do("POST", "/api/agents/"+a.ID+"/tokens", api.CreateTokenRequest{Name: "claude on the laptop"}, auth{cookie: cookie})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a named token: %d %s", resp.StatusCode, body)
	}
	tok := decode[api.Token](t, body)
	if tok.Name != "claude on the laptop" || !strings.HasPrefix(tok.Secret, TokenPrefix) {
		t.Errorf("token = %+v", tok)
	}
	if resp, body := e.do("POST", "/api/agents/"+a.ID+"/tokens", nil, auth{cookie: cookie}); resp.StatusCode != http.StatusCreated {
		t.Errorf("create a token without a body: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("POST", "/api/agents/"+a.ID+"/tokens", api.CreateTokenRequest{Name: "bad\x1bname"}, auth{cookie: cookie}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a name with a control character: %d, want 400", resp.StatusCode)
	}
	resp, body = e.do("GET", "/api/agents/"+a.ID+"/tokens", nil, auth{cookie: cookie})
	list := decode[[]api.Token](t, body)
	if len(list) != 2 || list[0].Name != "claude on the laptop" || list[0].Secret != "" {
		t.Errorf("tokens = %s", body)
	}

	// Filters: by user, surface, action prefix and time; bad values are 400.
	for _, ev := range []api.AuditEvent{
		{Actor: "owner", Action: "surface.attach", AgentID: a.ID, Surface: api.SurfaceDesktop},
		{Actor: "watcher", Action: "surface.attach", AgentID: a.ID, Surface: api.SurfaceTerminal},
	} {
		e.srv.appendAudit(e.ctx(), ev)
	}
	query := func(q string) []api.AuditEvent {
		t.Helper()
		resp, body := e.do("GET", "/api/audit?"+q, nil, auth{cookie: cookie})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("audit?%s: %d %s", q, resp.StatusCode, body)
		}
		return decode[[]api.AuditEvent](t, body)
	}
	if evs := query("user=watcher"); len(evs) != 1 || evs[0].Actor != "watcher" {
		t.Errorf("user=watcher: %+v", evs)
	}
	if evs := query("surface=desktop"); len(evs) != 1 || evs[0].Surface != api.SurfaceDesktop {
		t.Errorf("surface=desktop: %+v", evs)
	}
	if evs := query("action=token."); len(evs) != 2 {
		t.Errorf("action=token.: %+v, want the two token creations", evs)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if evs := query("since=" + future); len(evs) != 0 {
		t.Errorf("since the future: %+v", evs)
	}
	if evs := query("limit=1"); len(evs) != 1 {
		t.Errorf("limit=1: %d events", len(evs))
	} else if next := query("limit=10&before=" + strconv.FormatInt(evs[0].ID, 10)); len(next) == 0 || next[0].ID >= evs[0].ID {
		t.Errorf("the next page: %+v", next)
	}
	for _, q := range []string{"surface=kitchen", "since=yesterday", "until=2026-13-01"} {
		if resp, _ := e.do("GET", "/api/audit?"+q, nil, auth{cookie: cookie}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("audit?%s: %d, want 400", q, resp.StatusCode)
		}
	}
}
