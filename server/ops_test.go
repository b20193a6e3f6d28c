package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

// TestSurfaceAuditAndMetrics: attach and detach are audited with user, agent, surface and
// mode; the open-WebSockets gauge follows; /metrics counts requests by route and code.
func TestSurfaceAuditAndMetrics(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelWatch, api.BackendBwrap)
	ws, got, _ := e.dialWS("/api/agents/"+a.ID+"/terminal", auth{cookie: e.session(e.users["watcher"].ID)})
	if got != 101 {
		t.Fatalf("dial = %d", got)
	}
	if _, _, err := ws.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	gauge := func() string {
		_, m := e.do("GET", "/metrics", nil, auth{})
		return metricLine(string(m), `porthole_websockets_open{surface="terminal"}`)
	}
	if g := gauge(); g != "1" {
		t.Errorf("open terminal websockets gauge = %q while attached, want 1", g)
	}
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ws.Close()
	waitFor(t, "detach audited", func() bool {
		for _, ev := range e.audits() {
			if ev.Action == "surface.detach" {
				return true
			}
		}
		return false
	})
	if g := gauge(); g != "0" {
		t.Errorf("open terminal websockets gauge = %q after detach, want 0", g)
	}
	var seen []string
	for _, ev := range e.audits() {
		if strings.HasPrefix(ev.Action, "surface.") {
			seen = append(seen, fmt.Sprintf("%s %s %s %s %s", ev.Action, ev.Actor, ev.AgentID, ev.Surface, ev.Mode))
		}
	}
	want := []string{
		"surface.detach watcher " + a.ID + " terminal watch",
		"surface.attach watcher " + a.ID + " terminal watch",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("surface audit = %q, want %q", seen, want)
	}
	_, m := e.do("GET", "/metrics", nil, auth{})
	if l := metricLine(string(m), `porthole_http_requests_total{code="101",method="GET",route="/api/agents/:id/terminal"}`); l != "1" {
		t.Errorf("requests metric for the terminal upgrade = %q, want 1", l)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditVisibility: admins read everything; owners read their own agents' events only.
func TestAuditVisibility(t *testing.T) {
	e := newEnv(t)
	ownerCk := auth{cookie: e.session(e.users["owner"].ID)}
	otherCk := auth{cookie: e.session(e.users["other"].ID)}
	adminCk := auth{cookie: e.session(e.users["admin"].ID)}
	mk := func(a auth, name string) api.Agent {
		resp, out := e.do("POST", "/api/agents", api.CreateAgentRequest{Name: name, Backend: api.Backend{Type: "bwrap"}, Share: "watch"}, a)
		if resp.StatusCode != 201 {
			t.Fatalf("create %s = %d (%s)", name, resp.StatusCode, errMsg(out))
		}
		return decode[api.Agent](t, out)
	}
	mine := mk(ownerCk, "mine")
	theirs := mk(otherCk, "theirs")
	e.do("POST", "/api/agents/"+mine.ID+"/tokens", nil, ownerCk)
	e.do("PATCH", "/api/agents/"+theirs.ID, map[string]string{"share": "none"}, otherCk)

	list := func(a auth, q string) (int, []api.AuditEvent) {
		resp, out := e.do("GET", "/api/audit"+q, nil, a)
		if resp.StatusCode != 200 {
			return resp.StatusCode, nil
		}
		return 200, decode[[]api.AuditEvent](t, out)
	}
	actions := func(evs []api.AuditEvent) []string {
		var s []string
		for _, ev := range evs {
			s = append(s, ev.Action+":"+ev.AgentID)
		}
		return s
	}
	_, own := list(ownerCk, "")
	if want := []string{"token.create:" + mine.ID, "agent.create:" + mine.ID}; !slices.Equal(actions(own), want) {
		t.Errorf("owner's audit = %v, want %v", actions(own), want)
	}
	if st, _ := list(ownerCk, "?agent="+theirs.ID); st != 403 {
		t.Errorf("owner reading another's agent audit = %d, want 403", st)
	}
	_, all := list(adminCk, "")
	got := actions(all)
	for _, w := range []string{"agent.update:" + theirs.ID, "agent.create:" + theirs.ID, "token.create:" + mine.ID, "user.create:"} {
		if !slices.Contains(got, w) {
			t.Errorf("admin audit %v lacks %s", got, w)
		}
	}
	_, one := list(adminCk, "?agent="+theirs.ID+"&limit=1")
	if want := []string{"agent.update:" + theirs.ID}; !slices.Equal(actions(one), want) {
		t.Errorf("admin ?agent&limit=1 = %v, want %v", actions(one), want)
	}
	_, older := list(adminCk, fmt.Sprintf("?agent=%s&before=%d", theirs.ID, one[0].ID))
	if want := []string{"agent.create:" + theirs.ID}; !slices.Equal(actions(older), want) {
		t.Errorf("admin ?before = %v, want %v", actions(older), want)
	}
	if all[0].Actor != "other" || all[0].Remote != "127.0.0.1" {
		t.Errorf("newest event %+v: want actor other from 127.0.0.1", all[0])
	}
	for _, q := range []string{"?limit=0", "?limit=x", "?before=-1"} {
		if st, _ := list(adminCk, q); st != 400 {
			t.Errorf("audit %s = %d, want 400", q, st)
		}
	}
}

// TestDeleteStopsHelpers: deleting an agent ends its terminals and purges its helper; changing
// its backend stops the helper but keeps the home; deleting a user does both for their agents.
func TestDeleteStopsHelpers(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	b := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	c := e.addAgent("other", api.LevelNone, api.BackendBwrap)
	ck := auth{cookie: e.session(e.users["owner"].ID)}
	if resp, _ := e.do("PATCH", "/api/agents/"+b.ID, map[string]any{"backend": map[string]string{"type": "container"}}, ck); resp.StatusCode != 200 {
		t.Fatalf("patch backend = %d", resp.StatusCode)
	}
	if resp, _ := e.do("DELETE", "/api/agents/"+a.ID, nil, ck); resp.StatusCode != 204 {
		t.Fatalf("delete = %d", resp.StatusCode)
	}
	if resp, _ := e.do("GET", "/api/agents/"+a.ID, nil, ck); resp.StatusCode != 404 {
		t.Errorf("GET deleted agent = %d, want 404", resp.StatusCode)
	}
	if resp, _ := e.do("DELETE", "/api/users/"+e.users["other"].ID, nil, auth{cookie: e.session(e.users["admin"].ID)}); resp.StatusCode != 204 {
		t.Fatalf("delete user = %d", resp.StatusCode)
	}
	e.bridge.mu.Lock()
	forgot := slices.Clone(e.bridge.forgot)
	e.bridge.mu.Unlock()
	want := []string{b.ID + " purge=false", a.ID + " purge=true", c.ID + " purge=true"}
	if !slices.Equal(forgot, want) {
		t.Errorf("bridge.Forget calls = %v, want %v", forgot, want)
	}
	e.terms.mu.Lock()
	closed := slices.Clone(e.terms.closedAgents)
	e.terms.mu.Unlock()
	if !slices.Equal(closed, []string{b.ID, a.ID, c.ID}) {
		t.Errorf("terminals.CloseAgent calls = %v, want %v", closed, []string{b.ID, a.ID, c.ID})
	}
}

// TestLastAdminKept: the last admin can be neither deleted nor demoted.
func TestLastAdminKept(t *testing.T) {
	e := newEnv(t)
	adm := auth{cookie: e.session(e.users["admin"].ID)}
	no := false
	if resp, out := e.do("DELETE", "/api/users/"+e.users["admin"].ID, nil, adm); resp.StatusCode != 409 {
		t.Errorf("delete last admin = %d (%s), want 409", resp.StatusCode, errMsg(out))
	}
	if resp, out := e.do("PATCH", "/api/users/"+e.users["admin"].ID, api.UpdateUserRequest{Admin: &no}, adm); resp.StatusCode != 409 {
		t.Errorf("demote last admin = %d (%s), want 409", resp.StatusCode, errMsg(out))
	}
	if resp, out := e.do("POST", "/api/users", api.CreateUserRequest{Username: "owner", Password: "whatever-123"}, adm); resp.StatusCode != 409 {
		t.Errorf("create a taken username = %d (%s), want 409", resp.StatusCode, errMsg(out))
	}
	if resp, out := e.do("POST", "/api/users", api.CreateUserRequest{Username: "short", Password: "123"}, adm); resp.StatusCode != 400 {
		t.Errorf("create with a 3-char password = %d (%s), want 400", resp.StatusCode, errMsg(out))
	}
}

// TestReadyz: store and backend probes reported; 503 once the store is gone.
func TestReadyz(t *testing.T) {
	e := newEnv(t)
	resp, out := e.do("GET", "/readyz", nil, auth{})
	r := decode[Readiness](t, out)
	if resp.StatusCode != 200 || !r.Ready || !r.Store.OK || r.Store.Kind != "sqlite" || len(r.Backends) != 2 ||
		r.Backends[1].OK || r.Backends[1].Detail != "engine down (fake)" {
		t.Errorf("readyz = %d %s", resp.StatusCode, out)
	}
	if resp, out := e.do("GET", "/healthz", nil, auth{}); resp.StatusCode != 200 || string(out) != "ok\n" {
		t.Errorf("healthz = %d %q", resp.StatusCode, out)
	}
	e.srv.st.Close()
	resp, out = e.do("GET", "/readyz", nil, auth{})
	if r := decode[Readiness](t, out); resp.StatusCode != 503 || r.Ready || r.Store.OK || r.Store.Error == "" {
		t.Errorf("readyz with the store closed = %d %s, want 503 with the store error", resp.StatusCode, out)
	}
}

// TestFirstStartAdmin: an empty store gets user admin with a generated password printed once.
func TestFirstStartAdmin(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Server, string) {
		var out bytes.Buffer
		s, err := New(context.Background(), Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler),
			Bridge: &fakeBridge{}, Surfaces: fakeTerminal(&fakeTerms{}), AdminPasswordOut: &out})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s, out.String()
	}
	s, printed := start()
	m := regexp.MustCompile(`user "admin" with password (\S+) `).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("first start printed %q, want the generated admin password", printed)
	}
	u, err := s.Store().GetUserByName(context.Background(), "admin")
	if err != nil || !u.Admin {
		t.Fatalf("admin user = %+v, %v", u, err)
	}
	if ok, _ := verifyPassword(u.PasswordHash, m[1]); !ok {
		t.Errorf("the printed password does not log in as admin")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, printed2 := start()
	defer s2.Shutdown(context.Background())
	if printed2 != "" {
		t.Errorf("second start printed %q, want nothing (the password is shown once)", printed2)
	}
	if n, _ := s2.Store().CountUsers(context.Background()); n != 1 {
		t.Errorf("users after second start = %d, want 1", n)
	}
}

// TestShutdownClosesWebSockets: Shutdown sends close 1001 to every open WebSocket, stops the
// terminals and helpers, closes the store, and leaves no goroutine behind.
func TestShutdownClosesWebSockets(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelDrive, api.BackendBwrap)
	var socks []*websocket.Conn
	for _, who := range []string{"owner", "driver"} {
		ws, got, _ := e.dialWS("/api/agents/"+a.ID+"/terminal", auth{cookie: e.session(e.users[who].ID)})
		if got != 101 {
			t.Fatalf("dial as %s = %d", who, got)
		}
		if _, _, err := ws.ReadMessage(); err != nil {
			t.Fatal(err)
		}
		socks = append(socks, ws)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i, ws := range socks {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := ws.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("socket %d after Shutdown: %v, want close 1001 (going away)", i, err)
		}
		ws.Close()
	}
	e.bridge.mu.Lock()
	bc := e.bridge.closed
	e.bridge.mu.Unlock()
	e.terms.mu.Lock()
	tc := e.terms.closed
	e.terms.mu.Unlock()
	if !bc || !tc {
		t.Errorf("after Shutdown: bridge closed %v, terminals closed %v; want both", bc, tc)
	}
	if err := e.srv.st.Ping(context.Background()); err == nil {
		t.Errorf("store still open after Shutdown")
	}
	e.ts.Close()
}

// TestNewFailsClosed: when the real backend manager cannot start, New fails (no gateway
// without backends, no silent fallback).
func TestNewFailsClosed(t *testing.T) {
	dir := t.TempDir()
	// A file where the agents' homes must go: the manager cannot prepare them.
	if err := os.WriteFile(filepath.Join(dir, "agents"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Config{DataDir: dir, AdminPassword: adminPassword, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		s.Shutdown(context.Background())
		t.Fatal("New with an unusable agents dir succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "start backends") {
		t.Errorf("New error = %v, want it to say the backends could not start", err)
	}
}

// TestNewWithRealBackends: with no test seams, New builds the real manager and terminal
// service, /readyz reports each backend's probe, and Shutdown stops them.
func TestNewWithRealBackends(t *testing.T) {
	dir := t.TempDir()
	s, err := New(context.Background(), Config{DataDir: dir, AdminPassword: adminPassword,
		ContainerEngine: "unix://" + filepath.Join(dir, "no-engine.sock"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := newHTTPTestServer(s.Handler())
	resp, err := ts.Client().Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var r Readiness
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	byName := map[string]bridges.ProbeResult{}
	for _, p := range r.Backends {
		byName[p.Backend] = p
	}
	if resp.StatusCode != 200 || !r.Store.OK {
		t.Errorf("readyz = %d %+v, want 200 with the store ok", resp.StatusCode, r)
	}
	if c, ok := byName["container"]; !ok || c.OK || c.Detail == "" {
		t.Errorf("container probe with no engine = %+v, want not OK with the cause", c)
	}
	if h, ok := byName["host"]; ok && h.OK {
		t.Errorf("host probe without --allow-host-backend = %+v, want not OK", h)
	}
	ts.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestAccessChangeClosesWebSockets: an open WebSocket was authorized once; when that access
// changes (share lowered, token revoked, password changed, logout, user deleted) the gateway
// closes it with 1008, and a reconnect is authorized afresh.
func TestAccessChangeClosesWebSockets(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelWatch, api.BackendBwrap)
	path := "/api/agents/" + a.ID + "/terminal"
	ownerCk := e.session(e.users["owner"].ID)
	open := func(who string, au auth) *websocket.Conn {
		t.Helper()
		ws, got, b := e.dialWS(path, au)
		if got != 101 {
			t.Fatalf("dial as %s = %d (%s)", who, got, errMsg(b))
		}
		if _, _, err := ws.ReadMessage(); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	closedWith := func(ws *websocket.Conn) error {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := ws.ReadMessage()
		return err
	}
	// stillOpen: the gateway still holds the session's socket (reading on the client side
	// with a deadline would break the connection).
	stillOpen := func(who, cookie string) {
		t.Helper()
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		n := 0
		for _, i := range e.srv.sockets {
			if i.session == hex.EncodeToString(sha(cookie)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s's sockets open on the gateway = %d, want 1", who, n)
		}
	}

	// Share lowered to none: the watcher is cut off and cannot come back.
	watcherCk := e.session(e.users["watcher"].ID)
	w := open("watcher", auth{cookie: watcherCk})
	if resp, _ := e.do("PATCH", "/api/agents/"+a.ID, map[string]string{"share": "none"}, auth{cookie: ownerCk}); resp.StatusCode != 200 {
		t.Fatalf("patch share = %d", resp.StatusCode)
	}
	if err := closedWith(w); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("watcher's socket after share=none: %v, want close 1008", err)
	}
	if _, got, _ := e.dialWS(path, auth{cookie: watcherCk}); got != 404 {
		t.Errorf("watcher reconnect after share=none = %d, want 404", got)
	}

	// Token revoked.
	tok, secret := e.addToken(a.ID)
	tw := open("token", auth{bearer: secret})
	o := open("owner", auth{cookie: ownerCk})
	if resp, _ := e.do("DELETE", "/api/agents/"+a.ID+"/tokens/"+tok.ID, nil, auth{cookie: ownerCk}); resp.StatusCode != 204 {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if err := closedWith(tw); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("token socket after revoke: %v, want close 1008", err)
	}
	stillOpen("owner", ownerCk)

	// Password change: the owner's other session is cut, the changing one stays.
	other := e.session(e.users["owner"].ID)
	o2 := open("owner (2nd session)", auth{cookie: other})
	pw, cur := "changed-password-1", userPassword
	if resp, _ := e.do("PATCH", "/api/users/"+e.users["owner"].ID, api.UpdateUserRequest{Password: &pw, CurrentPassword: &cur}, auth{cookie: ownerCk}); resp.StatusCode != 200 {
		t.Fatalf("password change = %d", resp.StatusCode)
	}
	if err := closedWith(o2); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("other session's socket after a password change: %v, want close 1008", err)
	}
	stillOpen("owner", ownerCk)

	// Logout ends the session's sockets.
	if resp, _ := e.do("DELETE", "/api/session", nil, auth{cookie: ownerCk}); resp.StatusCode != 204 {
		t.Fatalf("logout = %d", resp.StatusCode)
	}
	if err := closedWith(o); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("socket after logout: %v, want close 1008", err)
	}

	// A deleted user's sockets on someone else's agent end too.
	b := e.addAgent("other", api.LevelDrive, api.BackendBwrap)
	dws, got, _ := e.dialWS("/api/agents/"+b.ID+"/terminal", auth{cookie: e.session(e.users["driver"].ID)})
	if got != 101 {
		t.Fatalf("driver dial = %d", got)
	}
	dws.ReadMessage()
	if resp, _ := e.do("DELETE", "/api/users/"+e.users["driver"].ID, nil, auth{cookie: e.session(e.users["admin"].ID)}); resp.StatusCode != 204 {
		t.Fatalf("delete user = %d", resp.StatusCode)
	}
	if err := closedWith(dws); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("deleted user's socket: %v, want close 1008", err)
	}
}
