package app

import (
	"context"
	"strings"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TokensPanel manages an agent's tokens (owner, admin): the credentials an agent program
// (Claude Code, Playwright, a computer-use loop) uses to act on this agent's surfaces. A new
// token's secret is shown once, with a copy button; the list never holds secrets.
type TokensPanel struct {
	app.Compo

	// AgentID is the agent whose tokens are shown.
	AgentID string

	ui       app.Context
	tokens   []api.Token
	loaded   bool
	err      error
	name     string
	created  *api.Token // the token just created, with its secret: shown once
	copied   string
	revoking string
	busy     bool
}

// OnMount loads the tokens.
func (p *TokensPanel) OnMount(ctx app.Context) {
	p.ui = ctx
	if app.IsServer {
		return
	}
	p.refresh()
}

func (p *TokensPanel) refresh() {
	id := p.AgentID
	var list []api.Token
	load(p.ui, func(c context.Context) (err error) {
		list, err = apiClient.Tokens(c, id)
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err == nil {
			p.tokens, p.loaded = list, true
		}
	})
}

func (p *TokensPanel) create(ctx app.Context, e app.Event) {
	e.PreventDefault()
	id, name := p.AgentID, strings.TrimSpace(p.name)
	var t api.Token
	p.busy, p.err, p.copied = true, nil, ""
	load(p.ui, func(c context.Context) (err error) {
		t, err = apiClient.CreateToken(c, id, name)
		return err
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.created, p.name = &t, ""
			p.refresh()
		}
	})
}

func (p *TokensPanel) copySecret(ctx app.Context, e app.Event) {
	if p.created == nil {
		return
	}
	copyText(p.ui, p.created.Secret, func(ok bool) {
		if ok {
			p.copied = "Copied."
		} else {
			p.copied = "This browser did not allow copying: select the token and copy it yourself."
		}
	})
}

// revoke revokes the token of the list item (read from the DOM: see dataOf).
func (p *TokensPanel) revoke(ctx app.Context, e app.Event) {
	tid := dataOf(ctx, "token-id")
	if tid == "" || tid != p.revoking {
		return
	}
	id := p.AgentID
	p.busy, p.revoking = true, ""
	load(p.ui, func(c context.Context) error {
		return apiClient.RevokeToken(c, id, tid)
	}, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if p.created != nil && p.created.ID == tid {
			p.created = nil
		}
		p.refresh()
	})
}

// Render draws the panel.
func (p *TokensPanel) Render() app.UI {
	return app.Section().ID("tokens").Class("card", "form").Body(
		app.H2().Text("Agent tokens"),
		app.P().Class("muted").Text("A token lets a program act on this agent only, as you would: exec, terminals, the desktop, the browser. "+
			"Send it as Authorization: Bearer <token>. Revoke it when the program no longer needs it."),
		errorText(p.err),
		app.If(p.created != nil, p.renderCreated),
		app.If(p.loaded, p.renderList),
		app.Form().ID("token-form").Class("inline-form").OnSubmit(p.create).Body(
			app.Label().For("token-name").Text("New token's name"),
			app.Div().Class("inline-row").Body(
				app.Input().ID("token-name").Type("text").Attr("maxlength", 64).Attr("autocomplete", "off").
					Placeholder("e.g. claude on the laptop").Value(p.name).OnInput(p.ValueTo(&p.name)),
				app.Button().ID("token-create").Type("submit").Class("primary").Disabled(p.busy).Text("Create token"),
			),
		),
	)
}

func (p *TokensPanel) renderCreated() app.UI {
	t := p.created
	return app.Div().ID("token-created").Class("notice", "token-created").Role("status").Body(
		app.P().Body(app.Strong().Text("Copy this token now: it is not shown again.")),
		app.Div().Class("inline-row").Body(
			app.Code().ID("token-secret").Class("token-secret").Text(t.Secret),
			app.Button().ID("token-copy").Type("button").OnClick(p.copySecret).Text("Copy"),
		),
		app.If(p.copied != "", func() app.UI { return app.P().Class("muted").Text(p.copied) }),
		app.Button().Type("button").Class("ghost").OnClick(func(ctx app.Context, e app.Event) { p.created = nil }).Text("Done"),
	)
}

func (p *TokensPanel) renderList() app.UI {
	if len(p.tokens) == 0 {
		return app.P().ID("token-none").Class("empty").Text("No tokens yet.")
	}
	items := make([]app.UI, len(p.tokens))
	for i, t := range p.tokens {
		tid := t.ID
		name := t.Name
		askRevoke := func(ctx app.Context, e app.Event) { p.revoking = dataOf(ctx, "token-id") }
		if name == "" {
			name = "(no name)"
		}
		var action app.UI
		if p.revoking == tid {
			action = app.Span().Class("row-actions").Body(
				app.Button().Type("button").Class("danger", "token-revoke-confirm").Disabled(p.busy).OnClick(p.revoke).Text("Revoke"),
				app.Button().Type("button").Class("ghost").OnClick(func(ctx app.Context, e app.Event) { p.revoking = "" }).Text("Cancel"),
			)
		} else {
			action = app.Button().Type("button").Class("ghost", "token-revoke").OnClick(askRevoke).Text("Revoke")
		}
		items[i] = app.Li().Class("token-item").DataSet("token-id", tid).Body(
			app.Div().Body(
				app.Strong().Class("token-name").Text(name),
				app.Div().Class("muted").Text("created "+when(t.CreatedAt)+" · id "+tid[:min(8, len(tid))]),
			),
			action,
		)
	}
	return app.Ul().ID("token-list").Class("token-list").Body(items...)
}
