package app

import (
	"context"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// AgentsPage lists the agents the user owns and those shared with them.
type AgentsPage struct {
	app.Compo

	ui       app.Context // the page's own context: async results land on it, not on a vanished button
	me       api.Me
	agents   []api.Agent
	loaded   bool
	err      error
	deleting string // id of the agent whose delete waits for confirmation
	busy     bool
}

// OnNav loads the user and the agents.
func (p *AgentsPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Agents · Porthole")
	if app.IsServer {
		return
	}
	p.refresh(ctx)
}

func (p *AgentsPage) refresh(ctx app.Context) {
	var me api.Me
	var agents []api.Agent
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		agents, err = apiClient.Agents(c)
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err == nil {
			p.me, p.agents, p.loaded = me, agents, true
		}
	})
}

func (p *AgentsPage) askDelete(id string) app.EventHandler {
	return func(ctx app.Context, e app.Event) { p.deleting = id }
}

func (p *AgentsPage) cancelDelete(ctx app.Context, e app.Event) { p.deleting = "" }

func (p *AgentsPage) confirmDelete(id string) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		p.busy = true
		load(p.ui, func(c context.Context) error {
			return apiClient.DeleteAgent(c, id)
		}, func(ctx app.Context, err error) {
			p.busy, p.deleting, p.err = false, "", err
			p.refresh(ctx)
		})
	}
}

// Render draws both lists.
func (p *AgentsPage) Render() app.UI {
	var own, shared []api.Agent
	for _, a := range p.agents {
		if a.OwnerID == p.me.ID {
			own = append(own, a)
		} else {
			shared = append(shared, a)
		}
	}
	return app.Div().Class("page").Body(
		&TopBar{Active: "agents"},
		app.Main().Class("content").Body(
			app.Div().Class("page-head").Body(
				app.H1().Text("Agents"),
				app.A().ID("new-agent").Class("button", "primary").Href("/agents/new").Text("New agent"),
			),
			errorText(p.err),
			app.If(!p.loaded && p.err == nil, loading),
			app.If(p.loaded, func() app.UI {
				return app.Div().Body(
					app.Section().ID("own-agents").Body(
						app.H2().Text("Your agents"),
						app.If(len(own) == 0, func() app.UI {
							return app.P().Class("empty").Text("You have no agents yet.")
						}),
						p.list(own, false),
					),
					app.If(len(shared) > 0 || p.me.Admin, func() app.UI {
						title := "Shared with you"
						if p.me.Admin {
							title = "Other users' agents"
						}
						return app.Section().ID("shared-agents").Body(
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

func (p *AgentsPage) list(agents []api.Agent, showOwner bool) app.UI {
	if len(agents) == 0 {
		return nil
	}
	items := make([]app.UI, len(agents))
	for i, a := range agents {
		items[i] = p.item(a, showOwner)
	}
	return app.Ul().Class("agent-list").Body(items...)
}

func (p *AgentsPage) item(a api.Agent, showOwner bool) app.UI {
	canManage := a.OwnerID == p.me.ID || p.me.Admin
	return app.Li().Class("agent-card", "card").DataSet("agent-id", a.ID).Body(
		app.Div().Class("agent-main").Body(
			app.A().Class("agent-name").Href("/agents/%s", pathEscape(a.ID)).Text(a.Name),
			backendBadges(a.Backend),
			app.Div().Class("agent-meta").Body(
				app.If(showOwner, func() app.UI {
					return app.Span().Class("owner").Text("owner: " + a.Owner)
				}),
				app.Span().Class("share").Text("shared: "+string(a.Share)),
			),
		),
		app.If(canManage, func() app.UI {
			if p.deleting == a.ID {
				return app.Div().Class("agent-actions").Body(
					app.Span().Class("confirm-text").Text("Delete this agent?"),
					app.Button().Type("button").Class("danger", "confirm-delete").Disabled(p.busy).
						OnClick(p.confirmDelete(a.ID)).Text("Delete"),
					app.Button().Type("button").Class("ghost").OnClick(p.cancelDelete).Text("Cancel"),
				)
			}
			return app.Div().Class("agent-actions").Body(
				app.A().Class("button", "ghost", "edit-agent").Href("/agents/%s/edit", pathEscape(a.ID)).Text("Edit"),
				app.Button().Type("button").Class("ghost", "delete-agent").OnClick(p.askDelete(a.ID)).Text("Delete"),
			)
		}),
	)
}
