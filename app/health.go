package app

import (
	"context"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// HealthPanel shows the gateway's readiness for admins (/readyz): the store and each
// isolation backend, with what is in force or why it cannot start agents.
type HealthPanel struct {
	app.Compo

	ui     app.Context
	ready  Readiness
	loaded bool
	err    error
	busy   bool
}

// OnMount asks /readyz.
func (p *HealthPanel) OnMount(ctx app.Context) {
	p.ui = ctx
	if app.IsServer {
		return
	}
	p.check(ctx, app.Event{})
}

func (p *HealthPanel) check(ctx app.Context, e app.Event) {
	var r Readiness
	p.busy = true
	load(p.ui, func(c context.Context) (err error) {
		r, err = apiClient.Ready(c)
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.ready, p.loaded = r, true
		}
	})
}

// Render draws the panel.
func (p *HealthPanel) Render() app.UI {
	return app.Section().ID("health-panel").Class("card").Body(
		app.Div().Class("page-head").Body(
			app.H2().Text("Backend health"),
			app.Button().ID("health-check").Type("button").Class("ghost").Disabled(p.busy).OnClick(p.check).Text("Check again"),
		),
		errorText(p.err),
		app.If(!p.loaded && p.err == nil, loading),
		app.If(p.loaded, func() app.UI {
			r := p.ready
			store := "reachable (" + r.Store.Kind + ")"
			if !r.Store.OK {
				store = "UNREACHABLE: " + r.Store.Error
			}
			rows := []app.UI{healthRow("store", r.Store.OK, store)}
			for _, b := range r.Backends {
				rows = append(rows, healthRow(b.Backend, b.OK, b.Detail))
			}
			return app.Ul().Class("health-list").Body(rows...)
		}),
	)
}

func healthRow(name string, ok bool, detail string) app.UI {
	state, cls := "ok", "health-ok"
	if !ok {
		state, cls = "unavailable", "health-down"
	}
	return app.Li().Class("health-item", cls).DataSet("backend", name).Body(
		app.Strong().Text(name),
		app.Span().Class("badge", cls).Text(state),
		app.Span().Class("muted").Text(detail),
	)
}
