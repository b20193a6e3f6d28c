package app

import (
	"context"
	"strconv"
	"strings"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// DashboardPage is the landing page: a live card for every agent the user may see (state,
// who is attached, open terminals, a thumbnail), kept current by one WebSocket
// (/api/dashboard, dashboard_wasm.go) that the gateway pushes changes on.
type DashboardPage struct {
	app.Compo

	ui       app.Context // the page's own context: async results land on it, not on a vanished button
	me       api.Me
	agents   []api.DashboardAgent
	backends []api.BackendHealth
	loaded   bool   // the first snapshot arrived
	live     string // "" while the WebSocket is up; else what the connection is doing
	err      error
	deleting string // id of the agent whose delete waits for confirmation
	busy     bool
	sess     dashDriver
}

// dashDriver is the browser session as the page uses it (dashboard_wasm.go).
type dashDriver interface {
	stop()
	reconnect()
}

// OnNav loads the user and opens the dashboard's WebSocket.
func (p *DashboardPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Agents · Porthole")
	if app.IsServer {
		return
	}
	var me api.Me
	load(ctx, func(c context.Context) (err error) {
		me, err = currentUser(c)
		return err
	}, func(ctx app.Context, err error) {
		p.me, p.err = me, err
	})
	if p.sess == nil {
		p.live = "connecting…"
		p.sess = newDashSession(ctx, p)
	}
}

// OnDismount closes the WebSocket.
func (p *DashboardPage) OnDismount() {
	if p.sess != nil {
		p.sess.stop()
		p.sess = nil
	}
}

// apply takes one message of the dashboard WebSocket (on the UI goroutine).
func (p *DashboardPage) apply(m api.DashboardMessage) {
	switch m.Type {
	case api.DashSnapshot:
		p.agents, p.loaded, p.live = m.Agents, true, ""
	case api.DashAgent:
		if m.Agent == nil {
			return
		}
		for i := range p.agents {
			if p.agents[i].ID == m.Agent.ID {
				p.agents[i] = *m.Agent
				return
			}
		}
		p.agents = append(p.agents, *m.Agent)
	case api.DashRemoved:
		for i := range p.agents {
			if p.agents[i].ID == m.ID {
				p.agents = append(p.agents[:i], p.agents[i+1:]...)
				break
			}
		}
		if p.deleting == m.ID {
			p.deleting = ""
		}
	case api.DashBackends:
		p.backends = m.Backends
	}
}

// Card handlers read their agent from the DOM (dataOf): a card's element shows another agent
// when one before it goes.
func (p *DashboardPage) askDelete(ctx app.Context, e app.Event) { p.deleting = dataOf(ctx, "agent-id") }

func (p *DashboardPage) cancelDelete(ctx app.Context, e app.Event) { p.deleting = "" }

func (p *DashboardPage) confirmDelete(ctx app.Context, e app.Event) {
	id := dataOf(ctx, "agent-id")
	if id == "" || id != p.deleting {
		return
	}
	p.busy = true
	load(p.ui, func(c context.Context) error {
		return apiClient.DeleteAgent(c, id)
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.apply(api.DashboardMessage{Type: api.DashRemoved, ID: id}) // the push follows
		}
	})
}

// Render draws the cards, the user's own first.
func (p *DashboardPage) Render() app.UI {
	var own, shared []api.DashboardAgent
	for _, a := range p.agents {
		if a.OwnerID == p.me.ID {
			own = append(own, a)
		} else {
			shared = append(shared, a)
		}
	}
	return app.Div().Class("page").Body(
		&TopBar{Active: "agents"},
		app.Main().Class("content", "dashboard").Body(
			app.Div().Class("page-head").Body(
				app.H1().Text("Agents"),
				app.If(p.live != "" && p.loaded, func() app.UI {
					return app.Span().ID("dash-live").Class("live-status").Role("status").Body(
						app.Text(p.live+" "),
						app.Button().Type("button").Class("ghost", "small").Text("Reconnect now").
							OnClick(func(ctx app.Context, e app.Event) {
								if p.sess != nil {
									p.sess.reconnect()
								}
							}),
					)
				}),
				app.A().ID("new-agent").Class("button", "primary").Href("/agents/new").Text("New agent"),
			),
			errorText(p.err),
			p.renderBackends(),
			app.If(!p.loaded && p.err == nil, func() app.UI {
				return app.P().Class("loading").Text(strings.TrimSuffix("Loading… "+p.live, " "))
			}),
			app.If(p.loaded, func() app.UI {
				return app.Div().Body(
					app.Section().ID("own-agents").Aria("label", "Your agents").Body(
						app.H2().Text("Your agents"),
						app.If(len(own) == 0, func() app.UI {
							return app.P().Class("empty").Body(
								app.Text("You have no agents yet. "),
								app.A().Href("/agents/new").Text("Create one"),
								app.Text(": a terminal, a desktop and a browser in a sandbox of their own."),
							)
						}),
						p.list(own, false),
					),
					app.If(len(shared) > 0 || p.me.Admin, func() app.UI {
						title := "Shared with you"
						if p.me.Admin {
							title = "Other users' agents"
						}
						return app.Section().ID("shared-agents").Aria("label", title).Body(
							app.H2().Text(title),
							app.If(len(shared) == 0, func() app.UI {
								return app.P().Class("empty").Text("Nothing here.")
							}),
							p.list(shared, true),
						)
					}),
				)
			}),
		),
	)
}

// renderBackends says, in one line, which backends cannot start agents: for everyone when one
// of their agents uses it, for admins always, with the cause folded away.
func (p *DashboardPage) renderBackends() app.UI {
	var names []string
	var detail []app.UI
	for _, b := range p.backends {
		if b.OK {
			continue
		}
		used := false
		for _, a := range p.agents {
			used = used || a.Backend.Type == b.Backend
		}
		if !used && !p.me.Admin {
			continue
		}
		names = append(names, b.Backend)
		detail = append(detail, app.Li().Text(b.Backend+": "+b.Detail))
	}
	if len(names) == 0 {
		return nil
	}
	msg := "The " + strings.Join(names, " and ") + " backend cannot start agents right now: agents on it stay stopped."
	if len(names) > 1 {
		msg = "The " + strings.Join(names, " and ") + " backends cannot start agents right now: agents on them stay stopped."
	}
	return app.Div().ID("backend-warning").Class("warning", "backend-warning").Role("status").Body(
		app.Span().Text(msg),
		app.If(p.me.Admin, func() app.UI {
			return app.Details().Body(app.Summary().Text("Why"), app.Ul().Body(detail...),
				app.A().Href("/admin/users#health-panel").Text("Backend health"))
		}),
	)
}

func (p *DashboardPage) list(agents []api.DashboardAgent, showOwner bool) app.UI {
	if len(agents) == 0 {
		return nil
	}
	items := make([]app.UI, len(agents))
	for i, a := range agents {
		items[i] = p.card(a, showOwner)
	}
	return app.Ul().Class("agent-list").Body(items...)
}

// backendDown is why a's backend cannot start it, or "".
func (p *DashboardPage) backendDown(a api.DashboardAgent) bool {
	for _, b := range p.backends {
		if b.Backend == a.Backend.Type {
			return !b.OK
		}
	}
	return false
}

func (p *DashboardPage) card(a api.DashboardAgent, showOwner bool) app.UI {
	canManage := a.OwnerID == p.me.ID || p.me.Admin
	open := agentHref(a.ID, lastSurface(a.ID, a.Access))
	return app.Li().Class("agent-card", "card").DataSet("agent-id", a.ID).DataSet("state", a.State).Body(
		app.Div().Class("card-top").Body(
			app.A().Class("agent-open").Href(open).Title("Open "+a.Name).Body(
				app.Span().Class("state-dot", "state-"+a.State).Aria("hidden", true),
				app.Span().Class("agent-name").Text(a.Name),
			),
			app.Span().Class("agent-state", "state-"+a.State).Text(stateLabel(a.State)),
		),
		app.A().Class("thumb-link").Href(open).Aria("label", "Open "+a.Name).Body(p.thumb(a)),
		app.Div().Class("agent-main").Body(
			backendBadges(a.Backend),
			app.Div().Class("agent-meta").Body(
				app.If(showOwner, func() app.UI {
					return app.Span().Class("owner").Text("owner: " + a.Owner)
				}),
				app.Span().Class("share").Text("shared: "+string(a.Share)),
				app.If(sessionsText(a) != "", func() app.UI {
					return app.Span().Class("sessions").Text(sessionsText(a))
				}),
			),
			app.If(len(a.Viewers) > 0, func() app.UI { return p.viewers(a) }),
			app.If(a.Problem != "", func() app.UI {
				return app.P().Class("agent-problem").Role("alert").Text(a.Problem)
			}),
			app.If(a.Problem == "" && a.State == api.StateStopped && p.backendDown(a), func() app.UI {
				return app.P().Class("agent-health", "muted").Text("Its " + a.Backend.Type + " backend is unavailable: it cannot start until an admin fixes that.")
			}),
		),
		app.If(canManage, func() app.UI {
			if p.deleting == a.ID {
				return app.Div().Class("agent-actions").Body(
					app.Span().Class("confirm-text").Text("Delete this agent and its files?"),
					app.Button().Type("button").Class("danger", "confirm-delete").Disabled(p.busy).
						OnClick(p.confirmDelete).Text("Delete"),
					app.Button().Type("button").Class("ghost").OnClick(p.cancelDelete).Text("Cancel"),
				)
			}
			return app.Div().Class("agent-actions").Body(
				app.A().Class("button", "ghost", "edit-agent").Href("/agents/%s/edit", pathEscape(a.ID)).Text("Edit"),
				app.Button().Type("button").Class("ghost", "delete-agent").OnClick(p.askDelete).Text("Delete"),
			)
		}),
	)
}

// thumb is the card's live thumbnail: the surface with the latest activity (an image, or the
// terminal's last lines, as text), or what the agent is doing when it shows nothing.
func (p *DashboardPage) thumb(a api.DashboardAgent) app.UI {
	var best *api.DashboardSurface
	for i := range a.Surfaces {
		s := &a.Surfaces[i]
		if s.Image == "" && len(s.Lines) == 0 {
			continue
		}
		if best == nil || s.Active.After(best.Active) {
			best = s
		}
	}
	switch {
	case best != nil && best.Image != "":
		return app.Div().Class("thumb").Body(
			app.Img().Class("thumb-image").Src(best.Image).Alt(surfaceTitle(best.Surface) + " of " + a.Name))
	case best != nil:
		return app.Div().Class("thumb").Body(
			app.Pre().Class("thumb-lines").Aria("label", "Last lines of "+a.Name+"'s terminal").Text(strings.Join(best.Lines, "\n")))
	}
	msg := "Stopped. Open it to start its sandbox."
	switch a.State {
	case api.StateStarting:
		msg = "Starting its sandbox…"
	case api.StateRunning, api.StateIdle:
		msg = "Running; nothing on screen yet."
	}
	return app.Div().Class("thumb", "thumb-empty").Body(app.P().Text(msg))
}

// viewers lists who is attached: "alice watching the terminal", "you driving the desktop".
func (p *DashboardPage) viewers(a api.DashboardAgent) app.UI {
	items := make([]app.UI, len(a.Viewers))
	for i, v := range a.Viewers {
		name := v.Name
		if v.You {
			name = "you"
		}
		how := "watching"
		if v.Mode == api.LevelDrive {
			how = "driving"
		}
		text := name + " " + how + " the " + string(v.Surface)
		if v.Count > 1 {
			text += " (" + strconv.Itoa(v.Count) + " tabs)"
		}
		items[i] = app.Li().Class("viewer", "viewer-"+string(v.Mode)).Text(text)
	}
	return app.Ul().Class("agent-viewers").Aria("label", "Attached now").Body(items...)
}

func sessionsText(a api.DashboardAgent) string {
	var parts []string
	for _, s := range a.Surfaces {
		if s.Surface == api.SurfaceTerminal && s.Sessions > 0 {
			if s.Sessions == 1 {
				parts = append(parts, "1 terminal")
			} else {
				parts = append(parts, strconv.Itoa(s.Sessions)+" terminals")
			}
		}
	}
	return strings.Join(parts, ", ")
}

func stateLabel(s string) string {
	switch s {
	case api.StateStarting:
		return "starting…"
	case api.StateRunning:
		return "running"
	case api.StateIdle:
		return "idle"
	}
	return "stopped"
}

// agentHref is the agent's page on a surface.
func agentHref(id string, sf api.Surface) string {
	return "/agents/" + pathEscape(id) + "?tab=" + string(sf)
}

// surfaceKey remembers, on this device, which surface of an agent was used last.
func surfaceKey(agentID string) string { return "porthole-surface:" + agentID }

// lastSurface is the surface of the agent used last on this device, if the user may still
// watch it; else the first surface they may watch (the terminal by default).
func lastSurface(agentID string, access api.Permissions) api.Surface {
	if s := api.Surface(localGet(surfaceKey(agentID))); access.Get(s).AtLeast(api.LevelWatch) {
		return s
	}
	for _, s := range api.Surfaces {
		if access.Get(s).AtLeast(api.LevelWatch) {
			return s
		}
	}
	return api.SurfaceTerminal
}
