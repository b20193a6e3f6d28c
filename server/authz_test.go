package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// principals of the authorization matrix, in the order of matrixRoute.want.
var principals = []string{"anonymous", "other", "watcher", "driver", "owner", "admin", "token"}

// fixture is what one (route, principal) row acts on: a fresh agent owned by "owner"
// (shared none, or watch for "watcher", drive for "driver"), a fresh victim user, and a
// fresh token of that agent (the "token" principal authenticates with it).
type fixture struct {
	agent  api.Agent
	victim api.User
	token  api.Token
	name   string
}

type matrixRoute struct {
	method, path string // {agent} {victim} {token} are substituted
	body         func(f fixture) any
	ws           bool
	want         [7]int
}

const (
	s101 = http.StatusSwitchingProtocols
	s200 = http.StatusOK
	s201 = http.StatusCreated
	s204 = http.StatusNoContent
	s401 = http.StatusUnauthorized
	s403 = http.StatusForbidden
	s404 = http.StatusNotFound
	s501 = http.StatusNotImplemented
)

var matrix = []matrixRoute{
	//                                                                         anon  other watch drive owner admin token
	{method: "POST", path: "/api/session", body: func(f fixture) any {
		return api.LoginRequest{Username: "owner", Password: userPassword}
	}, want: [7]int{s200, s200, s200, s200, s200, s200, s200}},
	{method: "DELETE", path: "/api/session", want: [7]int{s401, s204, s204, s204, s204, s204, s403}},
	{method: "GET", path: "/api/me", want: [7]int{s401, s200, s200, s200, s200, s200, s403}},
	{method: "GET", path: "/api/users", want: [7]int{s401, s403, s403, s403, s403, s200, s403}},
	{method: "POST", path: "/api/users", body: func(f fixture) any {
		return api.CreateUserRequest{Username: f.name, Password: "new-password-1"}
	}, want: [7]int{s401, s403, s403, s403, s403, s201, s403}},
	{method: "PATCH", path: "/api/users/{victim}", body: func(f fixture) any {
		return map[string]any{"permissions": api.Permissions{Terminal: "watch", Desktop: "none", Browser: "none"}}
	}, want: [7]int{s401, s403, s403, s403, s403, s200, s403}},
	{method: "DELETE", path: "/api/users/{victim}", want: [7]int{s401, s403, s403, s403, s403, s204, s403}},
	{method: "GET", path: "/api/agents", want: [7]int{s401, s200, s200, s200, s200, s200, s403}},
	{method: "POST", path: "/api/agents", body: func(f fixture) any {
		return api.CreateAgentRequest{Name: f.name, Backend: api.Backend{Type: "bwrap"}}
	}, want: [7]int{s401, s201, s201, s201, s201, s201, s403}},
	{method: "GET", path: "/api/agents/{agent}", want: [7]int{s401, s404, s200, s200, s200, s200, s200}},
	{method: "PATCH", path: "/api/agents/{agent}", body: func(f fixture) any {
		return map[string]any{"share": "watch"}
	}, want: [7]int{s401, s404, s403, s403, s200, s200, s403}},
	{method: "DELETE", path: "/api/agents/{agent}", want: [7]int{s401, s404, s403, s403, s204, s204, s403}},
	{method: "GET", path: "/api/agents/{agent}/tokens", want: [7]int{s401, s404, s403, s403, s200, s200, s403}},
	{method: "POST", path: "/api/agents/{agent}/tokens", want: [7]int{s401, s404, s403, s403, s201, s201, s403}},
	{method: "DELETE", path: "/api/agents/{agent}/tokens/{token}", want: [7]int{s401, s404, s403, s403, s204, s204, s403}},
	{method: "POST", path: "/api/agents/{agent}/exec", body: func(f fixture) any {
		return api.ExecRequest{Command: []string{"echo", "hi"}}
	}, want: [7]int{s401, s404, s403, s200, s200, s200, s200}},
	{method: "GET", path: "/api/audit", want: [7]int{s401, s200, s200, s200, s200, s200, s403}},
	{method: "GET", path: "/api/agents/{agent}/terminal", ws: true, want: [7]int{s401, s404, s101, s101, s101, s101, s101}},
	{method: "GET", path: "/api/agents/{agent}/desktop", ws: true, want: [7]int{s401, s404, s501, s501, s501, s501, s501}},
	{method: "GET", path: "/api/agents/{agent}/browser", ws: true, want: [7]int{s401, s404, s501, s501, s501, s501, s501}},
	{method: "GET", path: "/healthz", want: [7]int{s200, s200, s200, s200, s200, s200, s200}},
	{method: "GET", path: "/readyz", want: [7]int{s200, s200, s200, s200, s200, s200, s200}},
	{method: "GET", path: "/metrics", want: [7]int{s200, s200, s200, s200, s200, s200, s200}},
}

// TestAuthorizationMatrix: every route × every principal → the expected status.
func TestAuthorizationMatrix(t *testing.T) {
	// Every row adds an agent for owner: lift the per-user agent quota out of the way.
	e := newEnv(t, func(c *Config) { c.Quotas.AgentsPerUser = 1 << 20 })
	for _, rt := range matrix {
		for i, who := range principals {
			t.Run(fmt.Sprintf("%s %s as %s", rt.method, rt.path, who), func(t *testing.T) {
				e.t = t
				share := api.LevelNone
				switch who {
				case "watcher":
					share = api.LevelWatch
				case "driver":
					share = api.LevelDrive
				}
				f := fixture{agent: e.addAgent("owner", share, api.BackendBwrap), victim: e.addUser(e.uniq("victim"), false), name: e.uniq("new")}
				tok, secret := e.addToken(f.agent.ID)
				f.token = tok
				var a auth
				switch who {
				case "anonymous":
				case "token":
					a.bearer = secret
				default:
					a.cookie = e.session(e.users[who].ID)
				}
				path := strings.NewReplacer("{agent}", f.agent.ID, "{victim}", f.victim.ID, "{token}", f.token.ID).Replace(rt.path)
				want := rt.want[i]
				if rt.ws {
					ws, got, body := e.dialWS(path, a)
					if got != want {
						t.Fatalf("WS %s as %s = %d (%s), want %d", rt.path, who, got, errMsg(body), want)
					}
					if ws == nil {
						if msg := errMsg(body); strings.HasPrefix(msg, "(not a JSON") {
							t.Errorf("WS %s as %s: refusal body %s", rt.path, who, msg)
						}
						return
					}
					_, msg, err := ws.ReadMessage()
					if err != nil {
						t.Fatalf("read greeting: %v", err)
					}
					wantMode := api.LevelDrive
					if who == "watcher" {
						wantMode = api.LevelWatch
					}
					if !strings.HasSuffix(string(msg), "mode "+string(wantMode)) {
						t.Errorf("WS %s as %s: terminal got viewer %q, want mode %s", rt.path, who, msg, wantMode)
					}
					ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
					return
				}
				var body any
				if rt.body != nil {
					body = rt.body(f)
				}
				resp, out := e.do(rt.method, path, body, a)
				if resp.StatusCode != want {
					t.Fatalf("%s %s as %s = %d (%s), want %d", rt.method, rt.path, who, resp.StatusCode, errMsg(out), want)
				}
				if resp.StatusCode >= 400 {
					if msg := errMsg(out); strings.HasPrefix(msg, "(not a JSON") || msg == "" {
						t.Errorf("%s %s as %s: error body %s, want {\"error\": ...}", rt.method, rt.path, who, msg)
					}
				}
			})
		}
	}
}

// TestAgentTokenScope: a token acts on its own agent only, and stops working when revoked.
func TestAgentTokenScope(t *testing.T) {
	e := newEnv(t)
	mine := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	sibling := e.addAgent("owner", api.LevelDrive, api.BackendBwrap) // same owner, shared: still not the token's
	foreign := e.addAgent("other", api.LevelDrive, api.BackendBwrap)
	tok, secret := e.addToken(mine.ID)
	bearer := auth{bearer: secret}
	exec := api.ExecRequest{Command: []string{"id"}}

	cases := []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/api/agents/" + mine.ID + "/exec", exec, 200},
		{"GET", "/api/agents/" + mine.ID, nil, 200},
		{"POST", "/api/agents/" + sibling.ID + "/exec", exec, 404},
		{"POST", "/api/agents/" + foreign.ID + "/exec", exec, 404},
		{"GET", "/api/agents/" + foreign.ID, nil, 404},
		{"GET", "/api/users", nil, 403},
		{"POST", "/api/users", api.CreateUserRequest{Username: "evil", Password: "evil-password"}, 403},
		{"POST", "/api/agents/" + mine.ID + "/tokens", nil, 403},
		{"GET", "/api/agents/" + mine.ID + "/tokens", nil, 403},
		{"PATCH", "/api/agents/" + mine.ID, map[string]any{"share": "drive"}, 403},
		{"DELETE", "/api/agents/" + mine.ID, nil, 403},
		{"GET", "/api/agents", nil, 403},
		{"GET", "/api/audit", nil, 403},
	}
	for _, c := range cases {
		resp, out := e.do(c.method, c.path, c.body, bearer)
		if resp.StatusCode != c.want {
			t.Errorf("token %s %s = %d (%s), want %d", c.method, c.path, resp.StatusCode, errMsg(out), c.want)
		}
	}
	e.bridge.mu.Lock()
	execs := slices.Clone(e.bridge.execs)
	e.bridge.mu.Unlock()
	if !slices.Equal(execs, []string{mine.ID}) {
		t.Errorf("bridge ran exec on %v, want only the token's agent %s", execs, mine.ID)
	}
	if _, got, body := e.dialWS("/api/agents/"+sibling.ID+"/terminal", bearer); got != 404 {
		t.Errorf("token WS on another agent = %d (%s), want 404", got, errMsg(body))
	}

	// Revoked by the owner: the same secret is now refused.
	resp, out := e.do("DELETE", "/api/agents/"+mine.ID+"/tokens/"+tok.ID, nil, auth{cookie: e.session(e.users["owner"].ID)})
	if resp.StatusCode != 204 {
		t.Fatalf("revoke = %d (%s), want 204", resp.StatusCode, errMsg(out))
	}
	resp, out = e.do("POST", "/api/agents/"+mine.ID+"/exec", exec, bearer)
	if resp.StatusCode != 401 {
		t.Errorf("exec with revoked token = %d (%s), want 401", resp.StatusCode, errMsg(out))
	}
}

// TestTokenCreateShownOnce: the secret is in the create response only, and it works.
func TestTokenCreateShownOnce(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	owner := auth{cookie: e.session(e.users["owner"].ID)}
	resp, out := e.do("POST", "/api/agents/"+a.ID+"/tokens", nil, owner)
	if resp.StatusCode != 201 {
		t.Fatalf("create token = %d (%s)", resp.StatusCode, errMsg(out))
	}
	tok := decode[api.Token](t, out)
	if !strings.HasPrefix(tok.Secret, TokenPrefix) || len(tok.Secret) != len(TokenPrefix)+43 {
		t.Fatalf("token secret %q: want %s + 43 base64url chars (32 random bytes)", tok.Secret, TokenPrefix)
	}
	if _, out := e.do("GET", "/api/agents/"+a.ID+"/tokens", nil, owner); strings.Contains(string(out), tok.Secret) || strings.Contains(string(out), `"token"`) {
		t.Errorf("token list shows the secret: %s", out)
	}
	// Stored hashed: the store finds it by SHA-256, and the plain secret is nowhere in the listing.
	if got, err := e.srv.st.GetToken(e.ctx(), sha(tok.Secret)); err != nil || got.ID != tok.ID {
		t.Errorf("GetToken(sha256(secret)) = %v, %v; want token %s", got, err, tok.ID)
	}
	if resp, out := e.do("GET", "/api/agents/"+a.ID, nil, auth{bearer: tok.Secret}); resp.StatusCode != 200 {
		t.Errorf("GET agent with new token = %d (%s), want 200", resp.StatusCode, errMsg(out))
	}
}

// TestEffectiveAccess: owner → own permissions; others → min(permission, share); admin → drive.
func TestEffectiveAccess(t *testing.T) {
	owner := api.User{ID: "u1", Permissions: api.Permissions{Terminal: "drive", Desktop: "watch", Browser: "none"}}
	other := api.User{ID: "u2", Permissions: api.Permissions{Terminal: "watch", Desktop: "drive", Browser: "drive"}}
	admin := api.User{ID: "u3", Admin: true, Permissions: api.Permissions{Terminal: "none", Desktop: "none", Browser: "none"}}
	cases := []struct {
		who   string
		u     api.User
		share api.Level
		want  api.Permissions
	}{
		{"owner", owner, "none", owner.Permissions},
		{"owner", owner, "drive", owner.Permissions},
		{"other", other, "none", api.Permissions{Terminal: "none", Desktop: "none", Browser: "none"}},
		{"other", other, "watch", api.Permissions{Terminal: "watch", Desktop: "watch", Browser: "watch"}},
		{"other", other, "drive", api.Permissions{Terminal: "watch", Desktop: "drive", Browser: "drive"}},
		{"admin", admin, "none", api.Permissions{Terminal: "drive", Desktop: "drive", Browser: "drive"}},
	}
	for _, c := range cases {
		a := api.Agent{ID: "a", OwnerID: "u1", Share: c.share}
		if got := effectiveAccess(c.u, a); got != c.want {
			t.Errorf("effectiveAccess(%s, share=%q) = %+v, want %+v", c.who, c.share, got, c.want)
		}
	}
}

// TestUserPermissionsLimitSharees: a sharee whose own terminal level is watch only watches,
// even on an agent shared for drive; the owner's own "none" on desktop blocks the owner too.
func TestUserPermissionsLimitSharees(t *testing.T) {
	e := newEnv(t)
	lim, err := e.srv.st.UpdateUser(e.ctx(), e.users["driver"].ID, storeUserPerms(api.Permissions{Terminal: "watch", Desktop: "none", Browser: "drive"}))
	if err != nil {
		t.Fatal(err)
	}
	a := e.addAgent("owner", api.LevelDrive, api.BackendBwrap)
	drv := auth{cookie: e.session(lim.ID)}
	if resp, out := e.do("POST", "/api/agents/"+a.ID+"/exec", api.ExecRequest{Command: []string{"true"}}, drv); resp.StatusCode != 403 {
		t.Errorf("exec by watch-only sharee = %d (%s), want 403", resp.StatusCode, errMsg(out))
	}
	ws, got, body := e.dialWS("/api/agents/"+a.ID+"/terminal", drv)
	if got != 101 {
		t.Fatalf("terminal WS by watch-only sharee = %d (%s), want 101", got, errMsg(body))
	}
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.HasSuffix(string(msg), "mode watch") {
		t.Errorf("terminal viewer = %q, %v; want mode watch", msg, err)
	}
	if _, got, body := e.dialWS("/api/agents/"+a.ID+"/desktop", drv); got != 403 {
		t.Errorf("desktop WS with desktop=none = %d (%s), want 403", got, errMsg(body))
	}
	resp, out := e.do("GET", "/api/agents/"+a.ID, nil, drv)
	if got := decode[api.Agent](t, out).Access; resp.StatusCode != 200 || got != (api.Permissions{Terminal: "watch", Desktop: "none", Browser: "drive"}) {
		t.Errorf("GET agent access = %d %+v, want 200 with terminal=watch desktop=none browser=drive", resp.StatusCode, got)
	}
}

// TestAgentListVisibility: own + shared agents (admin: all), each with the caller's access.
func TestAgentListVisibility(t *testing.T) {
	e := newEnv(t)
	private := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	shared := e.addAgent("owner", api.LevelWatch, api.BackendBwrap)
	others := e.addAgent("other", api.LevelNone, api.BackendContainer)
	cases := []struct {
		who  string
		want []string
	}{
		{"owner", []string{private.ID, shared.ID}},
		{"other", []string{shared.ID, others.ID}},
		{"watcher", []string{shared.ID}},
		{"admin", []string{private.ID, shared.ID, others.ID}},
	}
	for _, c := range cases {
		resp, out := e.do("GET", "/api/agents", nil, auth{cookie: e.session(e.users[c.who].ID)})
		if resp.StatusCode != 200 {
			t.Fatalf("list as %s = %d", c.who, resp.StatusCode)
		}
		var ids []string
		for _, a := range decode[[]api.Agent](t, out) {
			ids = append(ids, a.ID)
			want := effectiveAccess(e.users[c.who], a)
			if a.Access != want {
				t.Errorf("list as %s: agent %s access %+v, want %+v", c.who, a.Name, a.Access, want)
			}
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("list as %s = %v, want %v", c.who, ids, c.want)
		}
	}
}
