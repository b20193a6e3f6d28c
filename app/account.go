package app

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// AccountPage is the user's own account: change the password (with the current one), see the
// sessions logged in to it and log the others out, and this device's settings.
type AccountPage struct {
	app.Compo

	ui       app.Context
	me       api.Me
	sessions []api.Session
	loaded   bool
	err      error
	notice   string
	busy     bool
	font     int

	current, next, again string
	pwErr                string
}

// OnNav loads the user and their sessions.
func (p *AccountPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Account · Porthole")
	p.font = termFontSize()
	if app.IsServer {
		return
	}
	p.refresh(ctx)
}

func (p *AccountPage) refresh(ctx app.Context) {
	var me api.Me
	var list []api.Session
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		list, err = apiClient.Sessions(c)
		return err
	}, func(ctx app.Context, err error) {
		p.err = err
		if err == nil {
			p.me, p.sessions, p.loaded = me, list, true
		}
	})
}

func (p *AccountPage) changePassword(ctx app.Context, e app.Event) {
	e.PreventDefault()
	p.pwErr, p.notice = "", ""
	switch {
	case p.current == "":
		p.pwErr = "Enter your current password."
		return
	case p.next == "":
		p.pwErr = "Enter a new password."
		return
	case p.next != p.again:
		p.pwErr = "The two new passwords differ."
		return
	}
	cur, next, id := p.current, p.next, p.me.ID
	p.busy = true
	load(p.ui, func(c context.Context) error {
		return apiClient.UpdateUser(c, id, api.UpdateUserRequest{Password: &next, CurrentPassword: &cur})
	}, func(ctx app.Context, err error) {
		p.busy = false
		if err != nil {
			switch {
			case errors.Is(err, ErrForbidden):
				p.pwErr = "Your current password is not right."
			default:
				p.pwErr = err.Error()
			}
			return
		}
		p.current, p.next, p.again = "", "", ""
		p.notice = "Your password was changed. Your other sessions were logged out."
		p.refresh(ctx)
	})
}

// logoutSession logs out the session of the list item (read from the DOM: see dataOf).
func (p *AccountPage) logoutSession(ctx app.Context, e app.Event) {
	id := dataOf(ctx, "session-id")
	if id == "" {
		return
	}
	p.run("That session was logged out.", func(c context.Context) error { return apiClient.DeleteSession(c, id) })
}

func (p *AccountPage) logoutOthers(ctx app.Context, e app.Event) {
	p.run("Every other session was logged out.", apiClient.LogoutOthers)
}

func (p *AccountPage) run(notice string, call func(context.Context) error) {
	p.busy, p.err, p.notice = true, nil, ""
	load(p.ui, call, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.notice = notice
		}
		p.refresh(ctx)
	})
}

func (p *AccountPage) setFont(ctx app.Context, e app.Event) {
	if n, err := strconv.Atoi(jsValue(ctx)); err == nil {
		p.font = clampFont(n)
		setTermFontSize(p.font)
	}
}

// Render draws the page.
func (p *AccountPage) Render() app.UI {
	return app.Div().Class("page").Body(
		&TopBar{Active: "account"},
		app.Main().Class("content", "narrow").Body(
			app.H1().Text("Your account"),
			app.If(p.me.Username != "", func() app.UI {
				role := "user"
				if p.me.Admin {
					role = "admin"
				}
				return app.P().Class("muted").Text("Logged in as " + p.me.Username + " (" + role + ").")
			}),
			errorText(p.err),
			app.If(p.notice != "", func() app.UI { return app.P().ID("account-notice").Class("notice").Role("status").Text(p.notice) }),
			p.renderPassword(),
			app.If(!p.loaded && p.err == nil, loading),
			app.If(p.loaded, p.renderSessions),
			&ProfilesSection{},
			p.renderDevice(),
		),
	)
}

func (p *AccountPage) renderPassword() app.UI {
	return app.Form().ID("password-form").Class("card", "form").OnSubmit(p.changePassword).Body(
		app.H2().Text("Change your password"),
		// A hidden username helps password managers file the new password under the right account.
		app.Input().Type("text").Name("username").Attr("autocomplete", "username").Value(p.me.Username).
			Hidden(true).ReadOnly(true),
		app.Label().For("current-password").Text("Current password"),
		app.Input().ID("current-password").Type("password").Attr("autocomplete", "current-password").
			Value(p.current).OnInput(p.ValueTo(&p.current)),
		app.Label().For("new-password-1").Text("New password"),
		app.Input().ID("new-password-1").Type("password").Attr("autocomplete", "new-password").
			Value(p.next).OnInput(p.ValueTo(&p.next)),
		app.Label().For("new-password-2").Text("New password, again"),
		app.Input().ID("new-password-2").Type("password").Attr("autocomplete", "new-password").
			Value(p.again).OnInput(p.ValueTo(&p.again)),
		app.If(p.pwErr != "", func() app.UI { return app.P().Class("error").Role("alert").Text(p.pwErr) }),
		app.P().Class("muted").Text("Changing it logs out your other sessions."),
		app.Div().Class("form-actions").Body(
			app.Button().ID("password-submit").Type("submit").Class("primary").Disabled(p.busy).Text("Change password"),
		),
	)
}

func (p *AccountPage) renderSessions() app.UI {
	items := make([]app.UI, len(p.sessions))
	others := 0
	for i, s := range p.sessions {
		if !s.Current {
			others++
		}
		items[i] = app.Li().Class("session-item").DataSet("session-id", s.ID).Body(
			app.Div().Class("session-what").Body(
				app.Strong().Text(browserName(s.UserAgent)),
				app.If(s.Current, func() app.UI { return app.Span().Class("badge", "badge-current").Text("this session") }),
			),
			app.Div().Class("muted").Text("from "+dash(s.Remote)+" · since "+when(s.CreatedAt)+" · until "+when(s.ExpiresAt)),
			app.If(!s.Current, func() app.UI {
				return app.Button().Type("button").Class("ghost", "session-logout").Disabled(p.busy).
					OnClick(p.logoutSession).Text("Log out")
			}),
		)
	}
	return app.Section().ID("sessions").Class("card").Body(
		app.H2().Text("Where you are logged in"),
		app.Ul().ID("session-list").Class("session-list").Body(items...),
		app.Div().Class("form-actions").Body(
			app.Button().ID("logout-others").Type("button").Class("danger").Disabled(p.busy || others == 0).
				OnClick(p.logoutOthers).Text("Log out other sessions"),
		),
	)
}

func (p *AccountPage) renderDevice() app.UI {
	return app.Section().ID("device").Class("card", "form").Body(
		app.H2().Text("On this device"),
		app.Label().For("font-size-input").Text("Terminal text size (px)"),
		app.Input().ID("font-size-input").Type("number").Attr("min", termFontMin).Attr("max", termFontMax).
			Value(p.font).OnChange(p.setFont),
		app.P().Class("muted").Text("On a phone, pinch the terminal to zoom. Watching someone else's terminal, the text shrinks if needed to show their whole screen."),
	)
}

// browserName is a short name for a user agent string ("Chrome on Linux").
func browserName(ua string) string {
	if ua == "" {
		return "Unknown browser"
	}
	var b, os string
	for _, c := range []struct{ key, name string }{
		{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"Firefox/", "Firefox"}, {"HeadlessChrome", "Headless Chrome"},
		{"Chrome/", "Chrome"}, {"Safari/", "Safari"}, {"curl/", "curl"},
	} {
		if strings.Contains(ua, c.key) {
			b = c.name
			break
		}
	}
	for _, c := range []struct{ key, name string }{
		{"Android", "Android"}, {"iPhone", "iPhone"}, {"iPad", "iPad"}, {"Windows", "Windows"},
		{"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"},
	} {
		if strings.Contains(ua, c.key) {
			os = c.name
			break
		}
	}
	switch {
	case b != "" && os != "":
		return b + " on " + os
	case b != "":
		return b
	case os != "":
		return os
	}
	if len(ua) > 60 {
		ua = ua[:60] + "…"
	}
	return ua
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("2 Jan 2006 15:04")
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
