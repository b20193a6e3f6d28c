package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	pbrowser "github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/server"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// cdpConn is a raw CDP client on an agent's /browser/cdp route, as a person (cookie session).
type cdpConn struct {
	ws   *websocket.Conn
	next int
}

func dialAgentCDP(t *testing.T, g *gateway, agentID string) *cdpConn {
	t.Helper()
	wsURL := g.wsURL("/api/agents/" + agentID + "/browser/cdp")
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL, g.sessionHeader())
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (%d)", wsURL, err, code)
	}
	t.Cleanup(func() { ws.Close() })
	return &cdpConn{ws: ws}
}

// call sends one browser-level CDP command and returns its result (events are skipped).
func (c *cdpConn) call(t *testing.T, method string, params any) string {
	t.Helper()
	c.next++
	id := c.next
	if err := c.ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	c.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &m) != nil || m.ID != id {
			continue
		}
		if len(m.Error) > 0 {
			t.Fatalf("%s: %s", method, m.Error)
		}
		return string(m.Result)
	}
}

const profileCookieDomain = "porthole-profile.test"

// cookies is the browser's cookies of profileCookieDomain, as CDP says.
func agentCookies(t *testing.T, g *gateway, agentID string) string {
	t.Helper()
	c := dialAgentCDP(t, g, agentID)
	defer c.ws.Close()
	var res struct {
		Cookies []struct{ Name, Value, Domain string } `json:"cookies"`
	}
	json.Unmarshal([]byte(c.call(t, "Storage.getCookies", map[string]any{})), &res)
	var out []string
	for _, ck := range res.Cookies {
		if ck.Domain == profileCookieDomain {
			out = append(out, ck.Name+"="+ck.Value)
		}
	}
	return strings.Join(out, ";")
}

// inSandbox runs a shell script in the agent through the API as g.
func inSandbox(t *testing.T, g *gateway, agentID, script string) string {
	t.Helper()
	var res api.ExecResult
	g.call(t, "POST", "/api/agents/"+agentID+"/exec", sh(script), http.StatusOK, &res)
	return strings.TrimSpace(res.Stdout + res.Stderr)
}

// TestBrowserProfileLentEndToEnd: through a real gateway and real bwrap jails with Chromium.
// Alice's personal profile lent to her agent A1 gets a cookie there (CDP through the gateway);
// it is absent from her agent A2 meanwhile, and from Bob's; it cannot be lent to A2 as well
// (409 naming A1) nor to Bob's agent (403); after it is taken back A1's browser no longer has
// it (nor the mount), the cookie is in the profile's directory on the gateway, and lent again
// (to A2, then to a container agent when an engine is there) it comes back with its cookie.
func TestBrowserProfileLentEndToEnd(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "chromium")
	if bridges.ProfileMountPath != pbrowser.LentProfileDir {
		t.Fatalf("bridges mount lent profiles at %s, the browser's helper looks at %s", bridges.ProfileMountPath, pbrowser.LentProfileDir)
	}
	g := startBrowserGateway(t)
	alice, bob := g.addUser(t, "alice"), g.addUser(t, "bob")
	mk := func(u *gateway, name string, b api.Backend) api.Agent {
		var a api.Agent
		u.call(t, "POST", "/api/agents", api.CreateAgentRequest{Name: name, Backend: b, Share: api.LevelNone}, http.StatusCreated, &a)
		return a
	}
	jail := api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}
	a1, a2, b1 := mk(alice, "a1", jail), mk(alice, "a2", jail), mk(bob, "b1", jail)
	var p api.BrowserProfile
	alice.call(t, "POST", "/api/profiles", api.CreateProfileRequest{Name: "Personal"}, http.StatusCreated, &p)
	prof := func(a api.Agent) string { return "/api/agents/" + a.ID + "/browser/profile" }
	mounted := `if [ -d ` + bridges.ProfileMountPath + ` ]; then stat -c 'mounted %u %a' ` + bridges.ProfileMountPath + `; else echo absent; fi`

	var lent api.AgentBrowserProfile
	alice.call(t, "POST", prof(a1), api.LendProfileRequest{ProfileID: p.ID}, http.StatusOK, &lent)
	if lent.Kind != api.ProfileLent || lent.Restarted == "" {
		t.Errorf("lend answer %+v", lent)
	}
	if out := inSandbox(t, alice, a1.ID, mounted); out != "mounted 1000 700" {
		t.Errorf("A1 with the lent profile: %q, want it mounted, the agent's, 0700", out)
	}
	c := dialAgentCDP(t, alice, a1.ID)
	c.call(t, "Storage.setCookies", map[string]any{"cookies": []map[string]any{{
		"name": "sid", "value": "alice-personal-cookie", "domain": profileCookieDomain, "path": "/",
		"expires": float64(time.Now().Add(24 * time.Hour).Unix()), "secure": true,
	}}})
	c.ws.Close()
	if got := agentCookies(t, alice, a1.ID); got != "sid=alice-personal-cookie" {
		t.Fatalf("A1's cookies with the lent profile: %q", got)
	}
	// Meanwhile: not in A2, not in Bob's agent.
	if got := agentCookies(t, alice, a2.ID); got != "" {
		t.Errorf("A2 has %q while the profile is lent to A1", got)
	}
	if out := inSandbox(t, alice, a2.ID, mounted); out != "absent" {
		t.Errorf("A2 sees %q at %s while the profile is lent to A1", out, bridges.ProfileMountPath)
	}
	if got := agentCookies(t, bob, b1.ID); got != "" {
		t.Errorf("Bob's agent has %q", got)
	}
	if out := inSandbox(t, bob, b1.ID, mounted); out != "absent" {
		t.Errorf("Bob's agent sees %q at %s", out, bridges.ProfileMountPath)
	}
	// Not to two agents at once; never to Bob's agent.
	var inUse api.ProfileInUse
	alice.call(t, "POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, http.StatusConflict, &inUse)
	if !strings.Contains(inUse.Error, "profile in use by agent a1") || inUse.LentTo != a1.ID {
		t.Errorf("second lend: %+v", inUse)
	}
	alice.call(t, "POST", prof(b1), api.LendProfileRequest{ProfileID: p.ID}, http.StatusForbidden, nil)
	bob.call(t, "POST", prof(b1), api.LendProfileRequest{ProfileID: p.ID}, http.StatusNotFound, nil)

	// Taken back: A1's sandbox restarts on its own profile; the cookie stays in Alice's.
	var back api.AgentBrowserProfile
	alice.call(t, "DELETE", prof(a1), nil, http.StatusOK, &back)
	if back.Kind != api.ProfileAgent || back.Restarted == "" {
		t.Errorf("take-back answer %+v", back)
	}
	if got := agentCookies(t, alice, a1.ID); got != "" {
		t.Errorf("A1 after the take-back still has %q", got)
	}
	if out := inSandbox(t, alice, a1.ID, mounted); out != "absent" {
		t.Errorf("A1 after the take-back sees %q at %s", out, bridges.ProfileMountPath)
	}
	cookieFile := filepath.Join(bridges.ProfileDir(g.dataDir, p.ID), "Default", "Cookies")
	if b, err := os.ReadFile(cookieFile); err != nil || !strings.Contains(string(b), profileCookieDomain) {
		t.Errorf("the profile's cookie file on the gateway after the take-back: %v, holds the cookie: %v", err, strings.Contains(string(b), profileCookieDomain))
	}
	// Lent again, to A2 this time: the cookie comes with it.
	alice.call(t, "POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, http.StatusOK, nil)
	if got := agentCookies(t, alice, a2.ID); got != "sid=alice-personal-cookie" {
		t.Errorf("A2 with the profile lent again: %q, want Alice's cookie", got)
	}
	if got := agentCookies(t, alice, a1.ID); got != "" {
		t.Errorf("A1 while the profile is in A2: %q", got)
	}
	alice.call(t, "DELETE", prof(a2), nil, http.StatusOK, nil)

	// The audit has each lend and take-back.
	var events []api.AuditEvent
	g.call(t, "GET", "/api/audit?limit=500", nil, http.StatusOK, &events)
	n := map[string]int{}
	for _, e := range events {
		if strings.HasPrefix(e.Action, "profile.") {
			n[e.Action+" "+e.AgentID]++
		}
	}
	if n["profile.lend "+a1.ID] != 1 || n["profile.return "+a1.ID] != 1 || n["profile.lend "+a2.ID] != 1 || n["profile.return "+a2.ID] != 1 {
		t.Errorf("audit of lends and returns: %v", n)
	}

	t.Run("container", func(t *testing.T) {
		eng := testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
		img := testenv.AgentImage(t, eng, repoRoot())
		cg := startBrowserGatewayWith(t, eng)
		carol := cg.addUser(t, "carol")
		var cp api.BrowserProfile
		carol.call(t, "POST", "/api/profiles", api.CreateProfileRequest{Name: "c"}, http.StatusCreated, &cp)
		j := mk(carol, "cj", jail)
		ct := mk(carol, "cc", api.Backend{Type: api.BackendContainer, Network: api.NetworkNone, Image: img})
		carol.call(t, "POST", prof(j), api.LendProfileRequest{ProfileID: cp.ID}, http.StatusOK, nil)
		cc := dialAgentCDP(t, carol, j.ID)
		cc.call(t, "Storage.setCookies", map[string]any{"cookies": []map[string]any{{
			"name": "sid", "value": "carol-cookie", "domain": profileCookieDomain, "path": "/",
			"expires": float64(time.Now().Add(24 * time.Hour).Unix()), "secure": true,
		}}})
		cc.ws.Close()
		carol.call(t, "DELETE", prof(j), nil, http.StatusOK, nil)
		carol.call(t, "POST", prof(ct), api.LendProfileRequest{ProfileID: cp.ID}, http.StatusOK, nil)
		uid := "1000"
		if os.Geteuid() != 0 {
			uid = fmt.Sprint(os.Geteuid())
		}
		if out := inSandbox(t, carol, ct.ID, mounted); out != "mounted "+uid+" 700" {
			t.Errorf("container agent with the lent profile: %q, want mounted %s 700", out, uid)
		}
		if got := agentCookies(t, carol, ct.ID); got != "sid=carol-cookie" {
			t.Errorf("container agent's cookies with the profile set in a jail: %q", got)
		}
		carol.call(t, "DELETE", prof(ct), nil, http.StatusOK, nil)
		if got := agentCookies(t, carol, ct.ID); got != "" {
			t.Errorf("container agent after the take-back: %q", got)
		}
	})
}

// startBrowserGatewayWith is startBrowserGateway with a container engine.
func startBrowserGatewayWith(t *testing.T, engine string) *gateway {
	t.Helper()
	dataDir := t.TempDir()
	ts := serveGateway(t, server.Config{DataDir: dataDir, AdminPassword: adminPassword, ContainerEngine: engine,
		Surfaces: []surface.Description{terminal.Surface, desktop.Surface, pbrowser.Surface}})
	jar, _ := cookiejar.New(nil)
	g := &gateway{URL: ts.URL, client: &http.Client{Jar: jar, Timeout: 60 * time.Second}, dataDir: dataDir}
	g.call(t, "POST", "/api/session", api.LoginRequest{Username: "admin", Password: adminPassword}, http.StatusOK, nil)
	return g
}
