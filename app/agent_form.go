package app

import (
	"context"
	"errors"
	"strings"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// AgentFormPage creates an agent (/agents/new) or edits one (/agents/:id/edit).
type AgentFormPage struct {
	app.Compo

	ui      app.Context // the page's own context, for async results
	id      string      // "" when creating
	me      api.Me
	name    string
	backend string
	network string
	image   string
	share   string
	loaded  bool
	busy    bool
	err     error
	health  map[string]api.BackendHealth // /readyz, by backend: down ones are offered disabled
}

// OnNav resets the form and, when editing, loads the agent.
func (p *AgentFormPage) OnNav(ctx app.Context) {
	p.ui = ctx
	path := ctx.Page().URL().Path
	p.id = ""
	if path != "/agents/new" {
		p.id = agentIDFromPath(path)
	}
	p.name, p.backend, p.network, p.image, p.share = "", api.BackendBwrap, api.NetworkNone, "", string(api.LevelNone)
	p.loaded, p.err = false, nil
	if p.id == "" {
		ctx.Page().SetTitle("New agent · Porthole")
	} else {
		ctx.Page().SetTitle("Edit agent · Porthole")
	}
	if app.IsServer {
		return
	}
	var ready Readiness
	load(ctx, func(c context.Context) (err error) {
		ready, err = apiClient.Ready(c)
		return err
	}, func(ctx app.Context, err error) {
		if err != nil {
			return // the form works without it; creating on a down backend fails with a clear error
		}
		p.health = map[string]api.BackendHealth{}
		for _, b := range ready.Backends {
			p.health[b.Backend] = b
		}
		// A new agent starts on a backend that works.
		if p.id == "" && !p.backendOK(p.backend) {
			for _, b := range []string{api.BackendBwrap, api.BackendContainer} {
				if p.backendOK(b) {
					p.backend = b
					break
				}
			}
		}
	})
	id := p.id
	var me api.Me
	var a api.Agent
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil || id == "" {
			return err
		}
		a, err = apiClient.Agent(c, id)
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err != nil {
			return
		}
		p.me, p.loaded = me, true
		if id != "" {
			p.name, p.backend, p.network, p.image, p.share = a.Name, a.Backend.Type, a.Backend.Network, a.Backend.Image, string(a.Share)
			ctx.Page().SetTitle("Edit %s · Porthole", a.Name)
		}
	})
}

func (p *AgentFormPage) submit(ctx app.Context, e app.Event) {
	e.PreventDefault()
	if p.busy {
		return
	}
	name := strings.TrimSpace(p.name)
	if name == "" {
		p.err = errors.New("give the agent a name")
		return
	}
	b := api.Backend{Type: p.backend, Network: p.network}
	if p.backend == api.BackendContainer {
		b.Image = strings.TrimSpace(p.image)
	}
	share := api.Level(p.share)
	id := p.id
	p.busy, p.err = true, nil
	var saved api.Agent
	load(p.ui, func(c context.Context) (err error) {
		if id == "" {
			saved, err = apiClient.CreateAgent(c, api.CreateAgentRequest{Name: name, Backend: b, Share: share})
			return err
		}
		saved, err = apiClient.UpdateAgent(c, id, api.UpdateAgentRequest{Name: &name, Backend: &b, Share: &share})
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err != nil {
			return
		}
		if saved.ID == "" {
			saved.ID = id
		}
		if saved.ID == "" {
			ctx.Navigate("/")
			return
		}
		ctx.Navigate("/agents/" + pathEscape(saved.ID))
	})
}

// Render draws the form.
func (p *AgentFormPage) Render() app.UI {
	title := "New agent"
	submit := "Create agent"
	if p.id != "" {
		title, submit = "Edit agent", "Save"
	}
	backends := []string{api.BackendBwrap, api.BackendContainer}
	if p.me.Admin || p.backend == api.BackendHost {
		backends = append(backends, api.BackendHost)
	}
	return app.Div().Class("page").Body(
		&TopBar{Active: "agents"},
		app.Main().Class("content", "narrow").Body(
			app.H1().Text(title),
			app.If(!p.loaded && p.err == nil, loading),
			app.If(p.loaded || p.err != nil, func() app.UI {
				return app.Form().ID("agent-form").Class("card", "form").OnSubmit(p.submit).Body(
					app.Label().For("agent-name").Text("Name"),
					app.Input().ID("agent-name").Type("text").Required(true).Attr("maxlength", 64).
						Attr("autocomplete", "off").Value(p.name).OnInput(p.ValueTo(&p.name)),

					app.Label().For("agent-backend").Text("Isolation backend"),
					app.Select().ID("agent-backend").OnChange(p.ValueTo(&p.backend)).Body(p.backendOptions(backends)...),
					p.backendProblem(),
					app.If(p.backend == api.BackendHost, func() app.UI {
						return app.P().Class("warning").Text("A host agent runs as the server's own user, with no sandbox. " +
							"Only an admin can create one, and only when the server was started with --allow-host-backend.")
					}),
					app.If(p.backend == api.BackendContainer, func() app.UI {
						return app.Div().Class("field").Body(
							app.Label().For("agent-image").Text("Image (empty: server default)"),
							app.Input().ID("agent-image").Type("text").Attr("autocomplete", "off").
								Value(p.image).OnInput(p.ValueTo(&p.image)),
						)
					}),

					app.Label().For("agent-network").Text("Network"),
					app.Select().ID("agent-network").OnChange(p.ValueTo(&p.network)).Body(
						options(p.network, []string{api.NetworkNone, api.NetworkFull}, map[string]string{
							api.NetworkNone: "none — no network",
							api.NetworkFull: "full — internet access",
						})...,
					),

					app.Label().For("agent-share").Text("Share with other users"),
					app.Select().ID("agent-share").OnChange(p.ValueTo(&p.share)).Body(
						options(p.share, []string{string(api.LevelNone), string(api.LevelWatch), string(api.LevelDrive)}, map[string]string{
							string(api.LevelNone):  "none — only you",
							string(api.LevelWatch): "watch — others may watch",
							string(api.LevelDrive): "drive — others may watch and type",
						})...,
					),

					errorText(p.err),
					app.Div().Class("form-actions").Body(
						app.Button().ID("agent-submit").Type("submit").Class("primary").Disabled(p.busy || !p.loaded).Text(submit),
						app.A().Class("button", "ghost").Href(cancelHref(p.id)).Text("Cancel"),
					),
				)
			}),
			app.If(p.id != "" && p.loaded, func() app.UI { return &TokensPanel{AgentID: p.id} }),
		),
	)
}

// backendOK reports whether /readyz says b can start agents (true when it has not answered).
func (p *AgentFormPage) backendOK(b string) bool {
	h, ok := p.health[b]
	return !ok || h.OK
}

// backendOptions offers the backends, the ones /readyz reports down disabled with the reason.
func (p *AgentFormPage) backendOptions(backends []string) []app.UI {
	labels := map[string]string{
		api.BackendBwrap:     "bwrap — bubblewrap jail",
		api.BackendContainer: "container — Docker/podman",
		api.BackendHost:      "host — NOT isolated",
	}
	out := make([]app.UI, len(backends))
	for i, b := range backends {
		label := labels[b]
		o := app.Option().Value(b).Selected(b == p.backend)
		if !p.backendOK(b) {
			label += " — unavailable"
			if b != p.backend {
				o = o.Disabled(true)
			}
		}
		out[i] = o.Text(label)
	}
	return out
}

// backendProblem explains why the chosen backend is unavailable, or nothing.
func (p *AgentFormPage) backendProblem() app.UI {
	h, ok := p.health[p.backend]
	if !ok || h.OK {
		return nil
	}
	return app.P().ID("backend-down").Class("warning").Role("status").
		Text("The " + p.backend + " backend cannot start agents right now: " + h.Detail + ". Agents on it stay stopped until an admin fixes that.")
}

func cancelHref(id string) string {
	if id == "" {
		return "/"
	}
	return "/agents/" + pathEscape(id)
}
