package app

import (
	"context"
	"strings"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// People's browser profiles (docs/api.md, "Browser profiles"): a profile of one's own (logins,
// cookies) kept on the server and lent to one of one's agents at a time. BrowserProfileControl
// sits in the agent page's header on the Browser tab (which profile the agent's browser uses,
// lend one, take it back); ProfilesSection is the list on the account page.

// Profiles lists the caller's browser profiles (GET /api/profiles; an admin gets everyone's).
func (c *Client) Profiles(ctx context.Context) ([]api.BrowserProfile, error) {
	var list []api.BrowserProfile
	err := c.Do(ctx, methodGet, "/api/profiles", nil, &list)
	return list, err
}

// CreateProfile makes a new, empty browser profile (POST /api/profiles).
func (c *Client) CreateProfile(ctx context.Context, name string) (api.BrowserProfile, error) {
	var p api.BrowserProfile
	err := c.Do(ctx, methodPost, "/api/profiles", api.CreateProfileRequest{Name: name}, &p)
	return p, err
}

// DeleteProfile deletes a browser profile that is not lent (DELETE /api/profiles/:pid).
func (c *Client) DeleteProfile(ctx context.Context, id string) error {
	return c.Do(ctx, methodDelete, "/api/profiles/"+pathEscape(id), nil, nil)
}

// AgentProfile says which profile the agent's browser uses (GET /api/agents/:id/browser/profile).
func (c *Client) AgentProfile(ctx context.Context, agentID string) (api.AgentBrowserProfile, error) {
	var p api.AgentBrowserProfile
	err := c.Do(ctx, methodGet, "/api/agents/"+pathEscape(agentID)+"/browser/profile", nil, &p)
	return p, err
}

// LendProfile lends one of the caller's profiles to their agent (POST
// /api/agents/:id/browser/profile); the agent's sandbox restarts on it.
func (c *Client) LendProfile(ctx context.Context, agentID, profileID string) (api.AgentBrowserProfile, error) {
	var p api.AgentBrowserProfile
	err := c.Do(ctx, methodPost, "/api/agents/"+pathEscape(agentID)+"/browser/profile", api.LendProfileRequest{ProfileID: profileID}, &p)
	return p, err
}

// ReturnProfile takes the lent profile back from the agent (DELETE
// /api/agents/:id/browser/profile); the agent's sandbox restarts on its own profile.
func (c *Client) ReturnProfile(ctx context.Context, agentID string) (api.AgentBrowserProfile, error) {
	var p api.AgentBrowserProfile
	err := c.Do(ctx, methodDelete, "/api/agents/"+pathEscape(agentID)+"/browser/profile", nil, &p)
	return p, err
}

// profileLabel is how a profile is named for people.
func profileLabel(p api.BrowserProfile, me api.Me) string {
	if p.OwnerID == me.ID {
		return p.Name
	}
	return p.Name + " (" + p.Owner + "'s)"
}

// BrowserProfileControl shows which profile the agent's browser uses and, for the agent's
// owner, lends one of their profiles or takes it back. Every string from the server is
// rendered as text.
type BrowserProfileControl struct {
	app.Compo

	// Agent is the agent shown; Me the viewer.
	Agent api.Agent
	Me    api.Me

	ui      app.Context
	cur     api.AgentBrowserProfile
	mine    []api.BrowserProfile
	loaded  bool
	open    bool
	busy    bool
	err     error
	notice  string
	newName string
}

// OnMount loads which profile the agent uses.
func (p *BrowserProfileControl) OnMount(ctx app.Context) {
	p.ui = ctx
	if app.IsServer {
		return
	}
	p.refresh()
}

func (p *BrowserProfileControl) owner() bool { return p.Agent.OwnerID == p.Me.ID }

func (p *BrowserProfileControl) refresh() {
	id, owner, meID := p.Agent.ID, p.owner(), p.Me.ID
	var cur api.AgentBrowserProfile
	var mine []api.BrowserProfile
	load(p.ui, func(c context.Context) (err error) {
		if cur, err = apiClient.AgentProfile(c, id); err != nil || !owner {
			return err
		}
		all, err := apiClient.Profiles(c)
		for _, pr := range all {
			if pr.OwnerID == meID {
				mine = append(mine, pr)
			}
		}
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err == nil {
			p.cur, p.mine, p.loaded = cur, mine, true
		}
	})
}

func (p *BrowserProfileControl) toggle(ctx app.Context, e app.Event) {
	p.open = !p.open
	if p.open {
		p.notice = ""
		p.refresh()
	}
}

// act runs one change and shows what restarted.
func (p *BrowserProfileControl) act(do func(context.Context) (api.AgentBrowserProfile, error)) {
	p.busy, p.err, p.notice = true, nil, ""
	var res api.AgentBrowserProfile
	load(p.ui, func(c context.Context) (err error) {
		res, err = do(c)
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.notice = res.Restarted
		}
		p.refresh()
	})
}

func (p *BrowserProfileControl) lend(profileID string) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		id := p.Agent.ID
		p.act(func(c context.Context) (api.AgentBrowserProfile, error) {
			return apiClient.LendProfile(c, id, profileID)
		})
	}
}

func (p *BrowserProfileControl) takeBack(agentID string) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		p.act(func(c context.Context) (api.AgentBrowserProfile, error) { return apiClient.ReturnProfile(c, agentID) })
	}
}

func (p *BrowserProfileControl) create(ctx app.Context, e app.Event) {
	e.PreventDefault()
	name := strings.TrimSpace(p.newName)
	if name == "" {
		return
	}
	p.busy, p.err = true, nil
	load(p.ui, func(c context.Context) error {
		_, err := apiClient.CreateProfile(c, name)
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.newName = ""
		}
		p.refresh()
	})
}

// Render draws the header button and, open, the popover.
func (p *BrowserProfileControl) Render() app.UI {
	label, title := "Profile: agent's", "The agent's browser uses its own profile, in its home"
	if p.cur.Kind == api.ProfileLent && p.cur.Profile != nil {
		label = "Profile: " + profileLabel(*p.cur.Profile, p.Me)
		title = "The agent's browser uses " + p.cur.Profile.Owner + "'s profile " + p.cur.Profile.Name
	}
	return app.Span().ID("browser-profile").Class("browser-profile").Body(
		app.Button().Type("button").ID("browser-profile-toggle").Class("ghost", "browser-profile-toggle").
			Title(title).Aria("expanded", p.open).OnClick(p.toggle).Text(label),
		app.If(p.open, p.renderPopover),
	)
}

func (p *BrowserProfileControl) renderPopover() app.UI {
	var current app.UI
	if p.cur.Kind == api.ProfileLent && p.cur.Profile != nil {
		pr := *p.cur.Profile
		since := ""
		if pr.LentAt != nil {
			since = ", lent " + pr.LentAt.Local().Format(time.DateTime)
		}
		current = app.P().ID("browser-profile-current").Text("This agent's browser uses " + pr.Owner + "'s profile “" + pr.Name + "”" + since + ".")
	} else {
		current = app.P().ID("browser-profile-current").Text("This agent's browser uses its own profile (in its home).")
	}
	canTakeBack := p.cur.Kind == api.ProfileLent && (p.owner() || p.Me.Admin)
	return app.Div().ID("browser-profile-popover").Class("menu-popover", "browser-profile-popover").Body(
		app.Strong().Text("Browser profile"),
		current,
		app.If(canTakeBack, func() app.UI {
			return app.Button().Type("button").ID("browser-profile-take-back").Disabled(p.busy).
				OnClick(p.takeBack(p.Agent.ID)).Text("Take the profile back")
		}),
		app.If(p.owner() && p.cur.Kind != api.ProfileLent, p.renderMine),
		app.If(p.notice != "", func() app.UI {
			return app.P().ID("browser-profile-notice").Class("notice").Role("status").Text(p.notice)
		}),
		errorText(p.err),
		app.If(p.owner(), func() app.UI {
			return app.P().Class("muted").Text("Lending or taking back restarts the agent's sandbox: its terminals, desktop and browser close.")
		}),
		app.A().Href("/account#profiles").Text("Your browser profiles"),
	)
}

// renderMine lists the owner's profiles to lend (one in use elsewhere names where, with a take-back).
func (p *BrowserProfileControl) renderMine() app.UI {
	items := make([]app.UI, 0, len(p.mine))
	for _, pr := range p.mine {
		row := app.Div().Class("menu-row", "browser-profile-row").DataSet("profile", pr.ID)
		switch {
		case pr.LentTo == "":
			items = append(items, row.Body(app.Span().Text(pr.Name),
				app.Button().Type("button").Class("browser-profile-lend").Disabled(p.busy).OnClick(p.lend(pr.ID)).Text("Lend")))
		default:
			items = append(items, row.Body(app.Span().Text(pr.Name+" — in use by agent "+pr.LentToName),
				app.Button().Type("button").Class("browser-profile-take-back-other").Disabled(p.busy).OnClick(p.takeBack(pr.LentTo)).Text("Take back")))
		}
	}
	if len(items) == 0 {
		items = append(items, app.P().Class("empty").Text("You have no browser profile of your own yet."))
	} else if sh := p.Agent.Share; sh == api.LevelWatch || sh == api.LevelDrive {
		what := "see this browser with your logins"
		if sh == api.LevelDrive {
			what += ", use it, and read the profile from its terminal"
		}
		items = append(items, app.P().ID("browser-profile-shared").Class("error").
			Text("This agent is shared with others ("+string(sh)+"): they would "+what+"."))
	}
	items = append(items, app.Form().Class("inline-row").OnSubmit(p.create).Body(
		app.Input().ID("browser-profile-new").Type("text").Attr("maxlength", 64).Attr("autocomplete", "off").
			Aria("label", "New profile's name").Placeholder("New profile").Value(p.newName).OnInput(p.ValueTo(&p.newName)),
		app.Button().Type("submit").Disabled(p.busy).Text("Create"),
	))
	return app.Div().Class("browser-profile-mine").Body(items...)
}

// ProfilesSection lists the caller's browser profiles on the account page: where each is
// lent (with a take-back), delete, create.
type ProfilesSection struct {
	app.Compo

	ui      app.Context
	me      api.Me
	list    []api.BrowserProfile
	loaded  bool
	busy    bool
	err     error
	notice  string
	newName string
	confirm string // the profile whose delete awaits a second click
}

// OnMount loads the profiles.
func (s *ProfilesSection) OnMount(ctx app.Context) {
	s.ui = ctx
	if app.IsServer {
		return
	}
	s.refresh()
}

func (s *ProfilesSection) refresh() {
	var me api.Me
	var list []api.BrowserProfile
	load(s.ui, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		list, err = apiClient.Profiles(c)
		return err
	}, func(ctx app.Context, err error) {
		s.err = err
		if err == nil {
			s.me, s.list, s.loaded = me, list, true
		}
	})
}

func (s *ProfilesSection) run(do func(context.Context) (string, error)) {
	s.busy, s.err, s.notice = true, nil, ""
	var notice string
	load(s.ui, func(c context.Context) (err error) {
		notice, err = do(c)
		return err
	}, func(ctx app.Context, err error) {
		s.busy, s.err, s.notice = false, err, notice
		s.refresh()
	})
}

func (s *ProfilesSection) create(ctx app.Context, e app.Event) {
	e.PreventDefault()
	name := strings.TrimSpace(s.newName)
	if name == "" {
		return
	}
	s.newName = ""
	s.run(func(c context.Context) (string, error) {
		_, err := apiClient.CreateProfile(c, name)
		return "", err
	})
}

// Render draws the section.
func (s *ProfilesSection) Render() app.UI {
	return app.Section().ID("profiles").Class("card", "form").Body(
		app.H2().Text("Browser profiles"),
		app.P().Class("muted").Text("A profile of your own keeps your logins and cookies on the server. Lend it to one of your agents at a time: "+
			"its browser then uses it, and no other agent has it. Lending or taking back restarts that agent's sandbox."),
		errorText(s.err),
		app.If(s.notice != "", func() app.UI { return app.P().Class("notice").Role("status").Text(s.notice) }),
		app.If(s.loaded, s.renderList),
		app.Form().ID("profile-form").Class("inline-form").OnSubmit(s.create).Body(
			app.Label().For("profile-name").Text("New profile's name"),
			app.Div().Class("inline-row").Body(
				app.Input().ID("profile-name").Type("text").Attr("maxlength", 64).Attr("autocomplete", "off").
					Placeholder("e.g. Personal").Value(s.newName).OnInput(s.ValueTo(&s.newName)),
				app.Button().ID("profile-create").Type("submit").Class("primary").Disabled(s.busy).Text("Create profile"),
			),
		),
	)
}

func (s *ProfilesSection) renderList() app.UI {
	if len(s.list) == 0 {
		return app.P().ID("profiles-none").Class("empty").Text("No browser profiles yet.")
	}
	rows := make([]app.UI, len(s.list))
	for i, pr := range s.list {
		id, agent := pr.ID, pr.LentTo
		where := "not lent"
		if agent != "" {
			where = "lent to agent " + pr.LentToName
		}
		rows[i] = app.Li().Class("profile-row").DataSet("profile", id).Body(
			app.Strong().Text(profileLabel(pr, s.me)),
			app.Span().Class("muted").Text(" · "+where),
			app.If(agent != "", func() app.UI {
				return app.Button().Type("button").Class("ghost", "profile-take-back").Disabled(s.busy).
					OnClick(func(ctx app.Context, e app.Event) {
						s.run(func(c context.Context) (string, error) {
							res, err := apiClient.ReturnProfile(c, agent)
							return res.Restarted, err
						})
					}).Text("Take back")
			}),
			app.If(s.confirm != id, func() app.UI {
				return app.Button().Type("button").Class("ghost", "profile-delete").Disabled(s.busy || agent != "").
					Title("Deletes its cookies and logins on the server").
					OnClick(func(ctx app.Context, e app.Event) { s.confirm = id }).Text("Delete")
			}).Else(func() app.UI {
				return app.Span().Class("inline-row").Body(
					app.Span().Text("Delete its logins and cookies?"),
					app.Button().Type("button").Class("danger", "profile-delete-confirm").Disabled(s.busy).
						OnClick(func(ctx app.Context, e app.Event) {
							s.confirm = ""
							s.run(func(c context.Context) (string, error) { return "", apiClient.DeleteProfile(c, id) })
						}).Text("Delete"),
					app.Button().Type("button").Class("ghost").OnClick(func(ctx app.Context, e app.Event) { s.confirm = "" }).Text("Cancel"),
				)
			}),
		)
	}
	return app.Ul().ID("profiles-list").Class("list").Body(rows...)
}
