package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// fakeSurface is a gateway half registered under a surface name the gateway has no code for
// (desktop): a WebSocket that greets with its viewer, a watch route, a drive route that audits
// through the Env, and a drive WebSocket route.
type fakeSurface struct {
	env surface.Env

	mu           sync.Mutex
	viewers      []surface.Viewer
	closedAgents []string
	closed       bool
	served       int // Serve and WebSocket route calls that have returned
}

func (f *fakeSurface) description() surface.Description {
	return surface.Description{Name: api.SurfaceDesktop, Gateway: func(env surface.Env) (surface.Gateway, error) {
		f.env = env
		return f, nil
	}}
}

func (f *fakeSurface) Serve(ctx context.Context, ws *websocket.Conn, a api.Agent, v surface.Viewer) error {
	f.mu.Lock()
	f.viewers = append(f.viewers, v)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.served++; f.mu.Unlock() }()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	msg := fmt.Sprintf("viewer %s mode %s conn %d agent %s", v.Name, v.Mode, v.Conn, a.ID)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		return err
	}
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return err
		}
	}
}

func (f *fakeSurface) Routes() []surface.Route {
	return []surface.Route{
		{Method: http.MethodGet, Path: "state", Level: api.LevelWatch,
			HTTP: func(w http.ResponseWriter, r *http.Request, a api.Agent, v surface.Viewer) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]string{"agent": a.ID, "mode": string(v.Mode), "token": v.Token})
			}},
		{Method: http.MethodPost, Path: "actions", Level: api.LevelDrive,
			HTTP: func(w http.ResponseWriter, r *http.Request, a api.Agent, v surface.Viewer) {
				f.env.Audit(a, v, "action", "left_click")
				w.WriteHeader(http.StatusNoContent)
			}},
		{Method: http.MethodGet, Path: "cdp", Level: api.LevelDrive, WebSocket: f.Serve},
	}
}

func (f *fakeSurface) CloseAgent(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedAgents = append(f.closedAgents, id)
}

func (f *fakeSurface) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func (f *fakeSurface) state() (closedAgents []string, closed bool, served int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.closedAgents), f.closed, f.served
}

// TestSurfacePlugIn: a surface the gateway has no code for, registered in Config.Surfaces,
// gets its WebSocket and its extra routes with their level enforced (watch vs drive vs another
// user vs an agent token), audits through its Env, loses its sockets when the agent's share
// changes, gets CloseAgent when the agent is deleted and Close on shutdown; a surface that is
// not registered answers 501.
func TestSurfacePlugIn(t *testing.T) {
	fake := &fakeSurface{}
	e := newEnv(t, func(c *Config) { c.Surfaces = append(c.Surfaces, fake.description()) })
	if fake.env.Open == nil || fake.env.Audit == nil || fake.env.Logger == nil {
		t.Fatalf("surface Env = %+v, want Open, Audit and Logger", fake.env)
	}
	watchA := e.addAgent("owner", api.LevelWatch, api.BackendBwrap)
	driveA := e.addAgent("owner", api.LevelDrive, api.BackendBwrap)
	privateA := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	_, secret := e.addToken(driveA.ID)
	as := func(who string) auth { return auth{cookie: e.session(e.users[who].ID)} }
	token := auth{bearer: secret}

	// The surface's WebSocket: watcher and driver get their level, another user's agent is hidden.
	greet := func(path string, a auth) (string, *websocket.Conn) {
		t.Helper()
		ws, code, body := e.dialWS(path, a)
		if code != http.StatusSwitchingProtocols {
			t.Fatalf("WS %s = %d (%s), want 101", path, code, errMsg(body))
		}
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("WS %s: read greeting: %v", path, err)
		}
		return string(msg), ws
	}
	w1, _ := greet("/api/agents/"+watchA.ID+"/desktop", as("watcher"))
	w2, _ := greet("/api/agents/"+watchA.ID+"/desktop", as("watcher"))
	d1, _ := greet("/api/agents/"+driveA.ID+"/desktop", as("driver"))
	if !strings.Contains(w1, "mode watch") || !strings.Contains(d1, "mode drive") || !strings.Contains(d1, driveA.ID) {
		t.Errorf("greetings %q, %q: want watch for the watcher, drive for the driver", w1, d1)
	}
	if w1 == w2 {
		t.Errorf("two connections of one user got the same viewer %q: want distinct connection ids", w1)
	}
	if _, code, body := e.dialWS("/api/agents/"+privateA.ID+"/desktop", as("other")); code != http.StatusNotFound {
		t.Errorf("WS of an agent not shared with other = %d (%s), want 404", code, errMsg(body))
	}

	// Extra routes: each with its level.
	routes := []struct {
		method, path string
		who          auth
		name         string
		want         int
	}{
		{"GET", "/api/agents/" + watchA.ID + "/desktop/state", as("watcher"), "watcher", 200},
		{"GET", "/api/agents/" + privateA.ID + "/desktop/state", as("other"), "other user", 404},
		{"GET", "/api/agents/" + watchA.ID + "/desktop/state", as("other"), "other user, shared to watch", 200},
		{"POST", "/api/agents/" + watchA.ID + "/desktop/actions", as("watcher"), "watcher", 403},
		{"POST", "/api/agents/" + privateA.ID + "/desktop/actions", as("other"), "other user", 404},
		{"POST", "/api/agents/" + watchA.ID + "/desktop/actions", as("other"), "other user, shared to watch", 403},
		{"POST", "/api/agents/" + watchA.ID + "/desktop/actions", token, "another agent's token", 404},
		{"POST", "/api/agents/" + driveA.ID + "/desktop/actions", as("driver"), "driver", 204},
		{"POST", "/api/agents/" + driveA.ID + "/desktop/actions", token, "its agent's token", 204},
		{"POST", "/api/agents/" + watchA.ID + "/desktop/actions", as("owner"), "owner", 204},
		{"GET", "/api/agents/" + driveA.ID + "/desktop/nope", as("driver"), "driver, unknown route", 404},
	}
	for _, r := range routes {
		var body any
		if r.method == "POST" {
			body = map[string]any{}
		}
		resp, out := e.do(r.method, r.path, body, r.who)
		if resp.StatusCode != r.want {
			t.Errorf("%s %s as %s = %d (%s), want %d", r.method, r.path, r.name, resp.StatusCode, errMsg(out), r.want)
		}
	}
	resp, out := e.do("GET", "/api/agents/"+driveA.ID+"/desktop/state", nil, token)
	if st := decode[map[string]string](t, out); resp.StatusCode != 200 || st["mode"] != "drive" || st["token"] == "" {
		t.Errorf("GET state with the agent's token = %d %v, want 200 with mode drive and the token's id", resp.StatusCode, st)
	}
	if _, code, body := e.dialWS("/api/agents/"+watchA.ID+"/desktop/cdp", as("watcher")); code != http.StatusForbidden {
		t.Errorf("drive WebSocket route as watcher = %d (%s), want 403", code, errMsg(body))
	}
	cdp, cdpWS := greet("/api/agents/"+driveA.ID+"/desktop/cdp", as("driver"))
	if !strings.Contains(cdp, "mode drive") {
		t.Errorf("drive WebSocket route greeting %q, want mode drive", cdp)
	}

	// The audit hook: the surface's events carry its name, the viewer and the agent.
	var actions []string
	for _, ev := range e.audits() {
		if ev.Action == "desktop.action" {
			actions = append(actions, ev.Actor+"@"+ev.AgentID+"/"+string(ev.Mode))
		}
	}
	if want := []string{"owner@" + watchA.ID + "/drive", "token:" + tokenIDOf(t, e, driveA.ID) + "@" + driveA.ID + "/drive",
		"driver@" + driveA.ID + "/drive"}; !slices.Equal(actions, want) {
		t.Errorf("desktop.action audit events (newest first) = %v, want %v", actions, want)
	}

	// A share change ends the agent's sockets (the surface's Serve returns), routes included.
	_, _, before := fake.state()
	if resp, out := e.do("PATCH", "/api/agents/"+driveA.ID, map[string]any{"share": "watch"}, as("owner")); resp.StatusCode != 200 {
		t.Fatalf("PATCH share = %d (%s)", resp.StatusCode, errMsg(out))
	}
	cdpWS.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := cdpWS.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("drive route WebSocket after a share change: %v, want close 1008", err)
	}
	waitFor(t, "the surface's sockets of the agent to end", func() bool { _, _, n := fake.state(); return n >= before+2 })

	// Deleting the agent: CloseAgent.
	if resp, out := e.do("DELETE", "/api/agents/"+driveA.ID, nil, as("owner")); resp.StatusCode != 204 {
		t.Fatalf("DELETE agent = %d (%s)", resp.StatusCode, errMsg(out))
	}
	if closed, _, _ := fake.state(); !slices.Equal(closed, []string{driveA.ID}) {
		t.Errorf("CloseAgent calls = %v, want [%s]", closed, driveA.ID)
	}

	// Not registered: 501 with a message naming the surface; the registered ones still answer.
	_, code, body := e.dialWS("/api/agents/"+watchA.ID+"/browser", as("watcher"))
	if code != http.StatusNotImplemented || !strings.Contains(errMsg(body), "browser surface is not available") {
		t.Errorf("WS of an unregistered surface = %d (%s), want 501 naming it", code, errMsg(body))
	}
	if resp, out := e.do("GET", "/api/agents/"+watchA.ID+"/browser/state", nil, as("watcher")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a route of an unregistered surface = %d (%s), want 404", resp.StatusCode, errMsg(out))
	}

	// Shutdown closes the surface.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, closed, _ := fake.state(); !closed {
		t.Errorf("surface not closed by Shutdown")
	}
}

func tokenIDOf(t *testing.T, e *env, agentID string) string {
	t.Helper()
	ts, err := e.srv.st.ListTokens(e.ctx(), agentID)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tokens of %s: %v %v", agentID, ts, err)
	}
	return ts[0].ID
}

// TestSurfaceRegistryRefusesBadLists: a surface the API does not know, or one listed twice,
// stops the gateway at start with a clear error.
func TestSurfaceRegistryRefusesBadLists(t *testing.T) {
	f := &fakeSurface{}
	for _, c := range []struct {
		name string
		list []surface.Description
		want string
	}{
		{"unknown", []surface.Description{{Name: "hologram", Gateway: f.description().Gateway}}, `surface "hologram": not one of the API's surfaces`},
		{"twice", []surface.Description{f.description(), f.description()}, `surface "desktop" is listed twice`},
	} {
		_, err := New(context.Background(), Config{DataDir: t.TempDir(), Bridge: &fakeBridge{}, Surfaces: c.list})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestServerImportsNoSurface: package server (its non-test build, with everything it imports)
// depends on no surface package: surfaces reach it only through Config.Surfaces.
func TestServerImportsNoSurface(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, sf := range []string{"terminal", "desktop", "browser"} {
			if dep == "github.com/porthole/porthole/"+sf || strings.HasPrefix(dep, "github.com/porthole/porthole/"+sf+"/") {
				t.Errorf("server depends on the surface package %s", dep)
			}
		}
	}
}
