package server

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

// TestProfileLendRules: Alice (user "owner") lends her profile to her agent A1; it is not in A2
// meanwhile; it cannot be lent to A2 as well (409 naming A1), nor to Bob's agent, shared with her
// or not (403), nor by anyone but her (404 for a profile they cannot see, 403 for an admin or
// an agent token); only its lender's side may take it back; each lend and take-back stops the
// agent's helper (it restarts on the new profile) and is audited.
func TestProfileLendRules(t *testing.T) {
	e := newEnv(t)
	alice, bob, admin := auth{cookie: e.session(e.users["owner"].ID)}, auth{cookie: e.session(e.users["other"].ID)}, auth{cookie: e.session(e.users["admin"].ID)}
	a1 := e.addAgent("owner", api.LevelDrive, api.BackendBwrap)
	a2 := e.addAgent("owner", api.LevelNone, api.BackendContainer)
	bobShared := e.addAgent("other", api.LevelDrive, api.BackendBwrap)
	bobPrivate := e.addAgent("other", api.LevelNone, api.BackendBwrap)
	prof := func(a api.Agent) string { return "/api/agents/" + a.ID + "/browser/profile" }

	resp, body := e.do("POST", "/api/profiles", api.CreateProfileRequest{Name: " Personal "}, alice)
	if resp.StatusCode != 201 {
		t.Fatalf("create profile = %d %s", resp.StatusCode, body)
	}
	p := decode[api.BrowserProfile](t, body)
	if p.Name != "Personal" || p.Owner != "owner" || p.LentTo != "" {
		t.Errorf("created %+v", p)
	}
	dir := bridges.ProfileDir(e.srv.profilesDataDir(), p.ID)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("profile dir %s: %v %v, want a 0700 directory", dir, fi, err)
	}
	for _, c := range []struct {
		body any
		want int
	}{
		{api.CreateProfileRequest{Name: "personal"}, 409},
		{api.CreateProfileRequest{Name: "  "}, 400},
		{api.CreateProfileRequest{Name: strings.Repeat("x", 65)}, 400},
		{api.CreateProfileRequest{Name: "a\nb"}, 400},
		{`{"name":"x","extra":1}`, 400},
	} {
		if resp, body := e.do("POST", "/api/profiles", c.body, alice); resp.StatusCode != c.want {
			t.Errorf("create %v = %d %s, want %d", c.body, resp.StatusCode, body, c.want)
		}
	}
	bobs := decode[api.BrowserProfile](t, must2(t, e, "POST", "/api/profiles", api.CreateProfileRequest{Name: "bob's"}, bob, 201))
	if l := decode[[]api.BrowserProfile](t, must2(t, e, "GET", "/api/profiles", nil, alice, 200)); len(l) != 1 || l[0].ID != p.ID {
		t.Errorf("Alice's list = %+v, want her one profile", l)
	}
	if l := decode[[]api.BrowserProfile](t, must2(t, e, "GET", "/api/profiles", nil, admin, 200)); len(l) != 2 {
		t.Errorf("admin's list = %+v, want both", l)
	}

	// Nothing lent: every agent's browser uses its own profile.
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "GET", prof(a1), nil, alice, 200)); got.Kind != api.ProfileAgent || got.Profile != nil {
		t.Errorf("A1's profile before the lend = %+v", got)
	}

	// Lend to A1: the helper is stopped, to restart on it.
	forgot := len(e.bridge.forgot)
	got := decode[api.AgentBrowserProfile](t, must2(t, e, "POST", prof(a1), api.LendProfileRequest{ProfileID: p.ID}, alice, 200))
	if got.Kind != api.ProfileLent || got.Profile == nil || got.Profile.ID != p.ID || got.Profile.LentTo != a1.ID || got.Restarted == "" {
		t.Errorf("lend answer = %+v", got)
	}
	if f := e.bridge.forgot[forgot:]; !slices.Equal(f, []string{a1.ID + " purge=false"}) {
		t.Errorf("bridge calls on lend = %v, want A1's helper stopped (not purged)", f)
	}
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "GET", prof(a1), nil, alice, 200)); got.Kind != api.ProfileLent || got.Profile.Name != "Personal" || got.Profile.Owner != "owner" {
		t.Errorf("A1's profile = %+v, want Alice's Personal", got)
	}
	// A sharee sees which profile A1 uses; A2 still uses its own.
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "GET", prof(a1), nil, bob, 200)); got.Kind != api.ProfileLent {
		t.Errorf("A1's profile seen by a sharee = %+v", got)
	}
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "GET", prof(a2), nil, alice, 200)); got.Kind != api.ProfileAgent {
		t.Errorf("A2's profile while A1 has Personal = %+v, want its own", got)
	}
	if got, err := e.srv.lentProfileID(e.ctx(), a1.ID); err != nil || got != p.ID {
		t.Errorf("the bridges are told A1 has %q, %v; want %s", got, err, p.ID)
	}
	if got, err := e.srv.lentProfileID(e.ctx(), a2.ID); err != nil || got != "" {
		t.Errorf("the bridges are told A2 has %q, %v; want none", got, err)
	}

	// Not to two agents at once: 409 naming A1, with the way to take it back.
	resp, body = e.do("POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, alice)
	inUse := decode[api.ProfileInUse](t, body)
	if resp.StatusCode != 409 || !strings.Contains(inUse.Error, "profile in use by agent "+a1.Name) || inUse.LentTo != a1.ID ||
		!strings.Contains(inUse.Error, "DELETE /api/agents/"+a1.ID+"/browser/profile") {
		t.Errorf("lend to A2 while A1 has it = %d %s, want 409 naming A1 and the take-back", resp.StatusCode, body)
	}
	// Never to Bob's agent, shared with Alice or not; nobody but Alice lends it.
	refused := []struct {
		name string
		path string
		body any
		who  auth
		want int
	}{
		{"Alice's profile to Bob's shared agent", prof(bobShared), api.LendProfileRequest{ProfileID: p.ID}, alice, 403},
		{"Alice's profile to Bob's private agent", prof(bobPrivate), api.LendProfileRequest{ProfileID: p.ID}, alice, 403},
		{"Bob's own profile to Alice's agent", prof(a2), api.LendProfileRequest{ProfileID: bobs.ID}, bob, 403},
		{"Bob lends Alice's profile to his agent", prof(bobShared), api.LendProfileRequest{ProfileID: p.ID}, bob, 404},
		{"an admin lends Alice's profile", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, admin, 403},
		{"an admin lends Alice's profile to Bob's agent", prof(bobShared), api.LendProfileRequest{ProfileID: p.ID}, admin, 403},
		{"Alice's profile to an unknown agent", "/api/agents/nope/browser/profile", api.LendProfileRequest{ProfileID: p.ID}, alice, 404},
		{"an unknown profile", prof(a2), api.LendProfileRequest{ProfileID: "nope"}, alice, 404},
		{"no profile id", prof(a2), api.LendProfileRequest{}, alice, 400},
		{"Bob takes it back from Alice's agent he may drive", prof(a1), nil, bob, 403},
		{"Bob deletes Alice's profile", "/api/profiles/" + p.ID, nil, bob, 404},
	}
	for _, r := range refused {
		method := "POST"
		if r.body == nil {
			method = "DELETE"
		}
		if resp, body := e.do(method, r.path, r.body, r.who); resp.StatusCode != r.want {
			t.Errorf("%s = %d %s, want %d", r.name, resp.StatusCode, body, r.want)
		}
	}
	_, tokSecret := e.addToken(a1.ID)
	if resp, body := e.do("POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, auth{bearer: tokSecret}); resp.StatusCode != 403 {
		t.Errorf("an agent token lends = %d %s, want 403", resp.StatusCode, body)
	}
	if resp, body := e.do("DELETE", prof(a1), nil, auth{bearer: tokSecret}); resp.StatusCode != 403 {
		t.Errorf("an agent token takes back = %d %s, want 403", resp.StatusCode, body)
	}
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "GET", prof(a1), nil, auth{bearer: tokSecret}, 200)); got.Kind != api.ProfileLent {
		t.Errorf("the agent's token reads its profile: %+v", got)
	}
	// Not deleted while lent.
	resp, body = e.do("DELETE", "/api/profiles/"+p.ID, nil, alice)
	if resp.StatusCode != 409 || !strings.Contains(errMsg(body), "profile in use by agent "+a1.Name) {
		t.Errorf("delete while lent = %d %s, want 409 naming A1", resp.StatusCode, body)
	}

	// Taken back: A1's helper stops, its browser uses its own again; now A2 may have it.
	forgot = len(e.bridge.forgot)
	got = decode[api.AgentBrowserProfile](t, must2(t, e, "DELETE", prof(a1), nil, alice, 200))
	if got.Kind != api.ProfileAgent || got.Restarted == "" {
		t.Errorf("take-back answer = %+v", got)
	}
	if f := e.bridge.forgot[forgot:]; !slices.Equal(f, []string{a1.ID + " purge=false"}) {
		t.Errorf("bridge calls on take-back = %v, want A1's helper stopped", f)
	}
	if got := decode[api.AgentBrowserProfile](t, must2(t, e, "DELETE", prof(a1), nil, alice, 200)); got.Restarted != "" {
		t.Errorf("a second take-back = %+v, want nothing restarted", got)
	}
	must2(t, e, "POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, alice, 200)
	// An admin may take it back (it only stops the lend).
	must2(t, e, "DELETE", prof(a2), nil, admin, 200)
	must2(t, e, "POST", prof(a2), api.LendProfileRequest{ProfileID: p.ID}, alice, 200)

	// A host agent has no sandbox to mount it in.
	host := e.addAgent("owner", api.LevelNone, api.BackendHost)
	if resp, body := e.do("POST", prof(host), api.LendProfileRequest{ProfileID: bobs.ID}, bob); resp.StatusCode != 403 {
		t.Errorf("Bob's profile to Alice's host agent = %d %s, want 403", resp.StatusCode, body)
	}
	p2 := decode[api.BrowserProfile](t, must2(t, e, "POST", "/api/profiles", api.CreateProfileRequest{Name: "second"}, alice, 201))
	if resp, body := e.do("POST", prof(host), api.LendProfileRequest{ProfileID: p2.ID}, alice); resp.StatusCode != 409 || !strings.Contains(errMsg(body), "host") {
		t.Errorf("lend to a host agent = %d %s, want 409", resp.StatusCode, body)
	}
	// One profile per agent.
	if resp, body := e.do("POST", prof(a2), api.LendProfileRequest{ProfileID: p2.ID}, alice); resp.StatusCode != 409 || !strings.Contains(errMsg(body), "already uses") {
		t.Errorf("a second profile to A2 = %d %s, want 409", resp.StatusCode, body)
	}

	// Deleting A2 returns the profile (audited); deleting the profile removes its directory.
	must2(t, e, "DELETE", "/api/agents/"+a2.ID, nil, alice, 204)
	if got := decode[[]api.BrowserProfile](t, must2(t, e, "GET", "/api/profiles", nil, alice, 200)); len(got) != 2 || got[0].LentTo != "" {
		t.Errorf("profiles after A2's deletion = %+v, want Personal returned", got)
	}
	os.WriteFile(filepath.Join(dir, "Cookies"), []byte("c"), 0o600)
	must2(t, e, "DELETE", "/api/profiles/"+p.ID, nil, alice, 204)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile dir after delete: %v, want gone", err)
	}

	var lends, returns []string
	for _, ev := range e.audits() {
		switch ev.Action {
		case "profile.lend":
			lends = append(lends, ev.AgentID+" "+ev.Actor)
		case "profile.return":
			returns = append(returns, ev.AgentID+" "+ev.Actor+" "+ev.Detail)
		}
	}
	if len(lends) != 3 || len(returns) != 3 {
		t.Errorf("audit: lends %v, returns %v; want 3 of each", lends, returns)
	}
	if len(returns) > 0 && (!strings.HasPrefix(returns[0], a2.ID+" owner") || !strings.Contains(returns[0], "the agent was deleted")) {
		t.Errorf("latest return = %q, want A2's on its deletion", returns[0])
	}
}

// TestProfileOwnerDeleted: deleting Alice's account takes back her profile lent to her agent
// and deletes it, directory included; a stopped agent (backend changed) returns its profile.
func TestProfileOwnerDeleted(t *testing.T) {
	e := newEnv(t)
	alice, admin := auth{cookie: e.session(e.users["owner"].ID)}, auth{cookie: e.session(e.users["admin"].ID)}
	a1 := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	p := decode[api.BrowserProfile](t, must2(t, e, "POST", "/api/profiles", api.CreateProfileRequest{Name: "p"}, alice, 201))
	must2(t, e, "POST", "/api/agents/"+a1.ID+"/browser/profile", api.LendProfileRequest{ProfileID: p.ID}, alice, 200)

	// A backend change stops the agent: the profile comes back.
	must2(t, e, "PATCH", "/api/agents/"+a1.ID, map[string]any{"backend": map[string]any{"type": "bwrap", "network": "full"}}, alice, 200)
	if got, _ := e.srv.st.GetProfile(e.ctx(), p.ID); got.LentTo != "" {
		t.Errorf("profile after its agent was stopped (backend change) = %+v, want returned", got)
	}
	must2(t, e, "POST", "/api/agents/"+a1.ID+"/browser/profile", api.LendProfileRequest{ProfileID: p.ID}, alice, 200)

	dir := bridges.ProfileDir(e.srv.profilesDataDir(), p.ID)
	must2(t, e, "DELETE", "/api/users/"+e.users["owner"].ID, nil, admin, 204)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile dir after its owner's deletion: %v, want gone", err)
	}
	if ps, _ := e.srv.st.ListProfiles(e.ctx(), ""); len(ps) != 0 {
		t.Errorf("profiles after the owner's deletion: %+v", ps)
	}
	found := false
	for _, ev := range e.audits() {
		found = found || (ev.Action == "profile.delete" && strings.Contains(ev.Detail, "its owner was deleted") && strings.Contains(ev.Detail, "taken back from agent "+a1.Name))
	}
	if !found {
		t.Error("no audit event for the profile deleted with its owner")
	}
}

// TestProfileDirsReconciled: a profile directory without a profile (its owner removed with
// `porthole user rm` while the gateway was down) is removed at the next start; the rest stay.
func TestProfileDirsReconciled(t *testing.T) {
	var data string
	e := newEnv(t, func(c *Config) {
		data = c.DataDir
		for _, id := range []string{"leftover1", "leftover2"} {
			os.MkdirAll(filepath.Join(bridges.ProfileDir(data, id), "Default"), 0o700)
		}
	})
	for _, id := range []string{"leftover1", "leftover2"} {
		if _, err := os.Stat(bridges.ProfileDir(data, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover profile dir %s: %v, want removed at start", id, err)
		}
	}
	alice := auth{cookie: e.session(e.users["owner"].ID)}
	p := decode[api.BrowserProfile](t, must2(t, e, "POST", "/api/profiles", api.CreateProfileRequest{Name: "kept"}, alice, 201))
	e.srv.reconcileProfiles(e.ctx())
	if _, err := os.Stat(bridges.ProfileDir(data, p.ID)); err != nil {
		t.Errorf("a live profile's dir after reconcile: %v", err)
	}
}

// must2 does a request and fails the test unless it answers want; it returns the body.
func must2(t *testing.T, e *env, method, path string, body any, a auth, want int) []byte {
	t.Helper()
	resp, out := e.do(method, path, body, a)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, out, want)
	}
	return out
}
