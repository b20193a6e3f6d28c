//go:build !js

package app

import (
	"strings"
	"testing"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TestBrowserProfileControlRender: the agent page's control says which profile the agent's
// browser uses, offers the owner a take-back or a lend of their own profiles (naming the agent
// that has one in use), shows only the state to others, and renders every name as text.
func TestBrowserProfileControlRender(t *testing.T) {
	me := api.Me{ID: "alice-id", Username: "alice"}
	agent := api.Agent{ID: "a1", Name: "a1", OwnerID: me.ID, Owner: "alice"}
	now := time.Now()
	lent := &api.BrowserProfile{ID: "p1", Name: `<img src=x onerror=alert(1)>`, OwnerID: me.ID, Owner: "alice", LentTo: "a1", LentToName: "a1", LentAt: &now}

	c := &BrowserProfileControl{Agent: agent, Me: me, loaded: true, open: true,
		cur: api.AgentBrowserProfile{Kind: api.ProfileLent, Profile: lent}}
	html := app.HTMLString(c)
	for _, want := range []string{"Profile: &lt;img", "browser-profile-take-back", "alice&#39;s profile", "restarts the agent&#39;s sandbox"} {
		if !strings.Contains(html, want) {
			t.Errorf("lent, owner: %q not in\n%s", want, html)
		}
	}
	if strings.Contains(html, "><img") || strings.Contains(html, "\n<img") {
		t.Errorf("a profile's name became HTML:\n%s", html)
	}

	c = &BrowserProfileControl{Agent: agent, Me: me, loaded: true, open: true, notice: "The agent's sandbox was stopped",
		cur:  api.AgentBrowserProfile{Kind: api.ProfileAgent},
		mine: []api.BrowserProfile{{ID: "p1", Name: "Personal", OwnerID: me.ID}, {ID: "p2", Name: "Work", OwnerID: me.ID, LentTo: "a2", LentToName: "a2"}}}
	html = app.HTMLString(c)
	for _, want := range []string{"Profile: agent&#39;s", "its own profile", `data-profile="p1"`, ">Lend<", "Work — in use by agent a2", ">Take back<", "browser-profile-new", "The agent&#39;s sandbox was stopped"} {
		if !strings.Contains(html, want) {
			t.Errorf("own profile, owner: %q not in\n%s", want, html)
		}
	}

	// Lending into a shared agent: the owner is told who else gets the logins.
	c.Agent.Share = api.LevelDrive
	if html = app.HTMLString(c); !strings.Contains(html, "shared with others (drive)") {
		t.Errorf("no warning that a drive-shared agent exposes the profile:\n%s", html)
	}

	// A sharee sees which profile is used, and nothing to change.
	other := api.Me{ID: "bob-id", Username: "bob"}
	c = &BrowserProfileControl{Agent: agent, Me: other, loaded: true, open: true,
		cur: api.AgentBrowserProfile{Kind: api.ProfileLent, Profile: &api.BrowserProfile{ID: "p1", Name: "Personal", OwnerID: me.ID, Owner: "alice"}}}
	html = app.HTMLString(c)
	if !strings.Contains(html, "Profile: Personal (alice&#39;s)") || strings.Contains(html, "take-back") || strings.Contains(html, ">Lend<") {
		t.Errorf("sharee's view:\n%s", html)
	}
}

// TestProfilesSectionRender: the account page's list says where each profile is lent, offers a
// take-back there and no delete while lent.
func TestProfilesSectionRender(t *testing.T) {
	s := &ProfilesSection{loaded: true, me: api.Me{ID: "alice-id"}, list: []api.BrowserProfile{
		{ID: "p1", Name: "Personal", OwnerID: "alice-id", LentTo: "a1", LentToName: "a1"},
		{ID: "p2", Name: "Work", OwnerID: "alice-id"},
	}}
	html := app.HTMLString(s)
	for _, want := range []string{"lent to agent a1", "profile-take-back", "not lent", `id="profiles"`} {
		if !strings.Contains(html, want) {
			t.Errorf("%q not in\n%s", want, html)
		}
	}
	// The lent profile's delete button: the test encoder writes a true boolean as a bare
	// attribute, a false one as ="false", attributes in any order.
	li := html[strings.Index(html, `data-profile="p1"`):]
	li = li[:strings.Index(li, "</li>")]
	del := li[strings.Index(li, "<button"):]
	for strings.Contains(del, "<button") && !strings.Contains(del[:strings.Index(del, ">")], "profile-delete") {
		del = del[strings.Index(del, ">")+1:]
		del = del[strings.Index(del, "<button"):]
	}
	tag := del[:strings.Index(del, ">")]
	if !strings.Contains(tag+" ", " disabled ") {
		t.Errorf("the lent profile's delete is not disabled:\n%s", html)
	}
}
