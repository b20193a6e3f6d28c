package app

import (
	"context"
	"errors"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// LoginPage asks for a username and password and opens a session.
type LoginPage struct {
	app.Compo

	ui       app.Context // the page's own context, for async results
	username string
	password string
	busy     bool
	err      error
}

// OnInit keeps what the user typed into the pre-rendered form (login.html, shown before the
// WASM app ran), which this render replaces.
func (p *LoginPage) OnInit() {
	if app.IsServer {
		return
	}
	doc := app.Window().Get("document")
	for id, v := range map[string]*string{"username": &p.username, "password": &p.password} {
		if in := doc.Call("querySelector", "[data-prerendered] #"+id); in.Truthy() {
			*v = in.Get("value").String()
		}
	}
}

// OnMount sends the form when the user already did so on the pre-rendered page (web/wasm.js
// held that submit until the app ran).
func (p *LoginPage) OnMount(ctx app.Context) {
	p.ui = ctx
	if app.IsServer {
		return
	}
	if w := app.Window(); w.Get("portholePendingLogin").Truthy() {
		w.Set("portholePendingLogin", false)
		p.login(ctx)
	}
}

// OnNav sets the page title.
func (p *LoginPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Log in · Porthole")
}

func (p *LoginPage) submit(ctx app.Context, e app.Event) {
	e.PreventDefault()
	p.login(ctx)
}

func (p *LoginPage) login(ctx app.Context) {
	if p.busy {
		return
	}
	if p.username == "" || p.password == "" {
		p.err = errors.New("enter your username and password")
		return
	}
	p.busy, p.err = true, nil
	user, pass := p.username, p.password
	next := ctx.Page().URL().Query().Get("next")
	if !safeNext(next) {
		next = "/"
	}
	ui := p.ui
	ui.Async(func() {
		err := apiClient.Login(context.Background(), user, pass)
		ui.Dispatch(func(ctx app.Context) {
			p.busy = false
			if err != nil {
				if isUnauthorized(err) {
					err = errors.New("wrong username or password")
				}
				p.err = err
				return
			}
			p.password = ""
			forgetUser()
			ctx.Navigate(next)
		})
	})
}

// Render draws the form.
func (p *LoginPage) Render() app.UI {
	return app.Main().Class("login").Body(
		app.Div().Class("card", "login-card").Body(
			app.Div().Class("login-brand").Body(
				app.Img().Src(iconURL()).Alt("").Class("login-icon"),
				app.H1().Text("Porthole"),
			),
			// POST: even if no script handled the pre-rendered form, the password never goes
			// into a URL.
			app.Form().ID("login-form").Method("post").OnSubmit(p.submit).Body(
				app.Label().For("username").Text("Username"),
				app.Input().ID("username").Name("username").Type("text").
					Attr("autocomplete", "username").Attr("autocapitalize", "none").
					Required(true).AutoFocus(true).Value(p.username).
					OnInput(p.ValueTo(&p.username)),
				app.Label().For("password").Text("Password"),
				app.Input().ID("password").Name("password").Type("password").
					Attr("autocomplete", "current-password").Required(true).Value(p.password).
					OnInput(p.ValueTo(&p.password)),
				errorText(p.err),
				submitButton(p.busy),
			),
		),
	)
}

// submitButton is the form's button. It gets a disabled attribute only while busy: go-app
// pre-renders Disabled(false) as disabled="false", which HTML reads as disabled.
func submitButton(busy bool) app.UI {
	b := app.Button().ID("login-submit").Type("submit").Class("primary").Text("Log in")
	if busy {
		b = b.Disabled(true)
	}
	return b
}
