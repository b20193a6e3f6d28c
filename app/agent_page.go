package app

import (
	"context"
	"errors"
	"strconv"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// AgentPage shows one agent, surface first: one compact header row (the way back, the name,
// badges, the surface tabs; the terminal panel puts its tabs and who is attached in the same
// row) and the selected surface in all the rest of the viewport, with no page scroll. The
// menu (navigation, text size, theme, fullscreen, log out) opens over the surface.
type AgentPage struct {
	app.Compo

	ui       app.Context
	id       string
	agent    api.Agent
	me       api.Me
	tab      api.Surface
	term     uint32 // ?term=: the terminal to show first
	loaded   bool
	err      error
	menuOpen bool
	theme    string
	font     int
}

// layoutID is the agent page's root element (the fullscreen target).
const layoutID = "agent-layout"

// OnNav loads the agent named by the path; ?tab= picks the surface, ?term= the terminal.
func (p *AgentPage) OnNav(ctx app.Context) {
	p.ui = ctx
	u := ctx.Page().URL()
	id := agentIDFromPath(u.Path)
	if id != p.id {
		p.loaded, p.agent = false, api.Agent{}
	}
	p.id, p.err, p.menuOpen = id, nil, false
	p.tab = api.SurfaceTerminal
	for _, s := range api.Surfaces {
		if u.Query().Get("tab") == string(s) {
			p.tab = s
		}
	}
	if n, err := strconv.ParseUint(u.Query().Get("term"), 10, 32); err == nil {
		p.term = uint32(n)
	}
	p.theme = currentTheme()
	p.font = termFontSize()
	ctx.Page().SetTitle("Agent · Porthole")
	if app.IsServer {
		return
	}
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
			if p.agent.Access.Get(p.tab).AtLeast(api.LevelWatch) {
				localSet(surfaceKey(id), string(p.tab))
			}
		}
	})
}

func (p *AgentPage) selectTab(s api.Surface) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		p.tab, p.term, p.menuOpen = s, 0, false
		replaceURL(agentHref(p.id, s))
		localSet(surfaceKey(p.id), string(s))
	}
}

func (p *AgentPage) toggleMenu(ctx app.Context, e app.Event) { p.menuOpen = !p.menuOpen }

func (p *AgentPage) fontBy(delta int) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		p.font = clampFont(p.font + delta)
		setTermFontSize(p.font)
	}
}

func (p *AgentPage) toggleTheme(ctx app.Context, e app.Event) {
	if p.theme == "dark" {
		p.theme = "light"
	} else {
		p.theme = "dark"
	}
	setTheme(p.theme)
}

// Render draws the header row and the surface.
func (p *AgentPage) Render() app.UI {
	if !p.loaded {
		return app.Div().Class("page").Body(
			&TopBar{Active: "agents"},
			app.Main().Class("content").Body(
				app.If(p.err == nil, loading),
				p.renderError(),
			),
		)
	}
	a := p.agent
	tabs := make([]app.UI, len(api.Surfaces))
	for i, s := range api.Surfaces {
		tabs[i] = app.Button().Type("button").ID("tab-"+string(s)).Role("tab").
			Class("tab", activeClass(s == p.tab)).Aria("selected", s == p.tab).
			Title(surfaceTitle(s)).OnClick(p.selectTab(s)).Text(surfaceTitle(s))
	}
	return app.Div().ID(layoutID).Class("agent-layout").DataSet("surface", string(p.tab)).Body(
		app.Header().Class("agent-head").Body(
			app.A().ID("nav-agents").Class("agent-back").Href("/").Title("Dashboard").Aria("label", "Back to the dashboard").Body(
				app.Img().Src(iconURL()).Alt("Porthole").Class("brand-icon"),
			),
			app.H1().ID("agent-title").Class("agent-title").Title(a.Name).Text(a.Name),
			app.If(!a.Backend.Isolated(), func() app.UI {
				return app.Span().Class("badge", "badge-danger").
					Title("runs on the server itself, as the server's user: no sandbox").Text("not isolated")
			}),
			app.If(a.OwnerID != p.me.ID, func() app.UI {
				return app.Span().Class("owner", "agent-owner").Text("owner: " + a.Owner)
			}),
			app.Div().Class("tabs", "surface-tabs").Role("tablist").Aria("label", "Surfaces").Body(tabs...),
		),
		app.Div().Class("agent-tools").Body(
			app.If(p.tab == api.SurfaceBrowser && a.Backend.Isolated(), func() app.UI { return &BrowserProfileControl{Agent: a, Me: p.me} }),
			app.Button().Type("button").Class("ghost", "icon", "agent-fullscreen").Title("Fullscreen").
				Aria("label", "Fullscreen").OnClick(func(ctx app.Context, e app.Event) { toggleFullscreen(layoutID) }).Body(icon("fullscreen")),
			app.Button().Type("button").Class("ghost", "icon", "agent-menu-toggle").Aria("label", "Menu").Title("Menu").
				Aria("expanded", p.menuOpen).OnClick(p.toggleMenu).Body(icon("menu")),
			app.If(p.menuOpen, p.renderMenu),
		),
		app.Section().Class("tab-panel").Role("tabpanel").Aria("label", surfaceTitle(p.tab)).Body(p.renderTab()),
		&UpdateToast{},
	)
}

// renderError says in a sentence what went wrong loading the agent, with the way on.
func (p *AgentPage) renderError() app.UI {
	switch {
	case p.err == nil:
		return nil
	case errors.Is(p.err, ErrNotFound):
		return app.Div().ID("agent-missing").Class("card", "notice-card").Body(
			app.H1().Text("This agent is not here"),
			app.P().Text("It was deleted, or it is no longer shared with you."),
			app.A().Class("button", "primary").Href("/").Text("Back to your agents"),
		)
	}
	return errorText(p.err)
}

// renderMenu is the header's menu, drawn over the surface.
func (p *AgentPage) renderMenu() app.UI {
	a := p.agent
	themeLabel := "Dark theme"
	if p.theme == "dark" {
		themeLabel = "Light theme"
	}
	return app.Div().ID("agent-menu").Class("menu-popover").Role("menu").Body(
		app.A().Role("menuitem").Href("/").Text("Dashboard"),
		app.If(a.OwnerID == p.me.ID || p.me.Admin, func() app.UI {
			return app.A().ID("edit-agent").Role("menuitem").Href("/agents/%s/edit", pathEscape(a.ID)).Text("Settings and tokens")
		}),
		app.A().Role("menuitem").Href("/account").Text("Account"),
		app.A().Role("menuitem").Href("/audit?agent="+pathEscape(a.ID)).Text("Audit log"),
		app.If(p.me.Admin, func() app.UI { return app.A().Role("menuitem").Href("/admin/users").Text("Users") }),
		app.Div().Class("menu-row").Body(
			app.Span().Text("Terminal text"),
			app.Button().Type("button").Class("ghost", "font-smaller").Aria("label", "Smaller terminal text").OnClick(p.fontBy(-1)).Text("A−"),
			app.Span().ID("font-size").Class("muted").Text(strconv.Itoa(p.font)+" px"),
			app.Button().Type("button").Class("ghost", "font-larger").Aria("label", "Larger terminal text").OnClick(p.fontBy(1)).Text("A+"),
		),
		app.Button().ID("theme-toggle").Type("button").Class("ghost").Role("menuitem").OnClick(p.toggleTheme).Text(themeLabel),
		app.Button().Type("button").Class("ghost", "menu-fullscreen").Role("menuitem").
			OnClick(func(ctx app.Context, e app.Event) { p.menuOpen = false; toggleFullscreen(layoutID) }).Text("Fullscreen"),
		app.Button().Type("button").Class("ghost").Role("menuitem").ID("menu-logout").
			OnClick(func(ctx app.Context, e app.Event) { logout(p.ui, func(err error) { p.err = err }) }).Text("Log out"),
	)
}

func (p *AgentPage) renderTab() app.UI {
	level := p.agent.Access.Get(p.tab)
	if !level.AtLeast(api.LevelWatch) {
		return app.Div().Class("placeholder").Body(
			app.P().Text("You have no access to this agent's "+string(p.tab)+"."),
			app.P().Class("muted").Text("Its owner or an admin can share it with you."),
		)
	}
	// One panel component per surface; each fills the panel area below the header.
	switch p.tab {
	case api.SurfaceTerminal:
		return &TerminalPanel{AgentID: p.agent.ID, Mode: level, Term: p.term, Admin: p.me.Admin}
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
