package app

import (
	"context"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// AgentPage shows one agent with a tab per surface: Terminal, Desktop, Browser.
type AgentPage struct {
	app.Compo

	id     string
	agent  api.Agent
	me     api.Me
	tab    api.Surface
	loaded bool
	err    error
}

// OnNav loads the agent named by the path; ?tab= picks the surface.
func (p *AgentPage) OnNav(ctx app.Context) {
	u := ctx.Page().URL()
	p.id = agentIDFromPath(u.Path)
	p.tab = api.SurfaceTerminal
	for _, s := range api.Surfaces {
		if u.Query().Get("tab") == string(s) {
			p.tab = s
		}
	}
	p.loaded, p.err = false, nil
	ctx.Page().SetTitle("Agent · Porthole")
	if app.IsServer {
		return
	}
	id := p.id
	var a api.Agent
	var me api.Me
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		a, err = apiClient.Agent(c, id)
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err == nil {
			p.agent, p.me, p.loaded = a, me, true
			ctx.Page().SetTitle("%s · Porthole", a.Name)
		}
	})
}

func (p *AgentPage) selectTab(s api.Surface) app.EventHandler {
	return func(ctx app.Context, e app.Event) { p.tab = s }
}

// Render draws the agent's header and the selected tab.
func (p *AgentPage) Render() app.UI {
	return app.Div().Class("page").Body(
		&TopBar{Active: "agents"},
		app.Main().Class("content", "agent-page").Body(
			errorText(p.err),
			app.If(!p.loaded && p.err == nil, loading),
			app.If(p.loaded, p.renderAgent),
		),
	)
}

func (p *AgentPage) renderAgent() app.UI {
	a := p.agent
	tabs := make([]app.UI, len(api.Surfaces))
	for i, s := range api.Surfaces {
		tabs[i] = app.Button().Type("button").ID("tab-"+string(s)).Role("tab").
			Class("tab", activeClass(s == p.tab)).Aria("selected", s == p.tab).
			OnClick(p.selectTab(s)).Text(surfaceTitle(s))
	}
	return app.Div().Body(
		app.Div().Class("page-head", "agent-head").Body(
			app.H1().ID("agent-title").Text(a.Name),
			backendBadges(a.Backend),
			app.If(a.OwnerID != p.me.ID, func() app.UI {
				return app.Span().Class("owner").Text("owner: " + a.Owner)
			}),
			app.If(a.OwnerID == p.me.ID || p.me.Admin, func() app.UI {
				return app.A().Class("button", "ghost").Href("/agents/%s/edit", pathEscape(a.ID)).Text("Edit")
			}),
			app.If(p.tab == api.SurfaceBrowser && a.Backend.Isolated(), func() app.UI { return &BrowserProfileControl{Agent: a, Me: p.me} }),
		),
		app.Div().Class("tabs").Role("tablist").Body(tabs...),
		app.Section().Class("tab-panel").Role("tabpanel").Body(p.renderTab()),
	)
}

func (p *AgentPage) renderTab() app.UI {
	level := p.agent.Access.Get(p.tab)
	if !level.AtLeast(api.LevelWatch) {
		return app.P().Class("empty").Text("You have no access to this agent's " + string(p.tab) + ".")
	}
	switch p.tab {
	case api.SurfaceTerminal:
		return &TerminalPanel{AgentID: p.agent.ID, Mode: level}
	case api.SurfaceDesktop:
		return &DesktopPanel{AgentID: p.agent.ID, Mode: level}
	case api.SurfaceBrowser:
		return &BrowserPanel{AgentID: p.agent.ID, Mode: level}
	default:
		return app.Div().Class("placeholder").Body(
			app.P().Text(surfaceTitle(p.tab)+" — coming soon."),
			app.P().Class("muted").Text("This surface will run inside the agent's own sandbox."),
		)
	}
}

func surfaceTitle(s api.Surface) string {
	switch s {
	case api.SurfaceTerminal:
		return "Terminal"
	case api.SurfaceDesktop:
		return "Desktop"
	case api.SurfaceBrowser:
		return "Browser"
	}
	return string(s)
}
