package app

import (
	"context"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TopBar is the header of every logged-in page: navigation, the user, the theme toggle and logout.
type TopBar struct {
	app.Compo

	// Active names the current section ("agents" or "users") for highlighting.
	Active string

	ui       app.Context // the bar's own context, for async results
	me       api.Me
	loaded   bool
	theme    string
	err      error
	leaving  bool
	menuOpen bool
}

// OnMount loads the user and the current theme.
func (b *TopBar) OnMount(ctx app.Context) {
	b.ui = ctx
	b.theme = currentTheme()
	if app.IsServer {
		return
	}
	var me api.Me
	load(ctx, func(c context.Context) (err error) {
		me, err = currentUser(c)
		return err
	}, func(ctx app.Context, err error) {
		b.me, b.err, b.loaded = me, err, err == nil
	})
}

func (b *TopBar) toggleTheme(ctx app.Context, e app.Event) {
	if b.theme == "dark" {
		b.theme = "light"
	} else {
		b.theme = "dark"
	}
	setTheme(b.theme)
}

func (b *TopBar) toggleMenu(ctx app.Context, e app.Event) { b.menuOpen = !b.menuOpen }

func (b *TopBar) logout(ctx app.Context, e app.Event) {
	b.leaving = true
	ui := b.ui
	ui.Async(func() {
		err := apiClient.Logout(context.Background())
		ui.Dispatch(func(ctx app.Context) {
			b.leaving = false
			if err != nil && !isUnauthorized(err) {
				b.err = err
				return
			}
			forgetUser()
			ctx.Navigate("/login")
		})
	})
}

// Render draws the bar.
func (b *TopBar) Render() app.UI {
	themeLabel := "Dark theme"
	if b.theme == "dark" {
		themeLabel = "Light theme"
	}
	navClass := "nav"
	if b.menuOpen {
		navClass = "nav open"
	}
	return app.Header().Class("topbar").Body(
		app.A().Class("brand").Href("/").Body(
			app.Img().Src(iconURL()).Alt("").Class("brand-icon"),
			app.Span().Text("Porthole"),
		),
		app.Button().Type("button").Class("menu-toggle").Aria("label", "Menu").
			Aria("expanded", b.menuOpen).OnClick(b.toggleMenu).Text("☰"),
		app.Nav().Class(navClass).Body(
			app.A().ID("nav-agents").Href("/").Class(activeClass(b.Active == "agents")).Text("Agents"),
			app.If(b.me.Admin, func() app.UI {
				return app.A().ID("nav-users").Href("/admin/users").Class(activeClass(b.Active == "users")).Text("Users")
			}),
			app.Span().Class("spacer"),
			app.If(b.loaded, func() app.UI {
				return app.Span().ID("whoami").Class("whoami").Text(b.me.Username)
			}),
			app.Button().ID("theme-toggle").Type("button").Class("ghost").
				Title("Switch theme (remembered on this device)").OnClick(b.toggleTheme).Text(themeLabel),
			b.logoutButton(),
		),
		errorText(b.err),
	)
}

// logoutButton gets a disabled attribute only while logging out (see submitButton).
func (b *TopBar) logoutButton() app.UI {
	btn := app.Button().ID("logout").Type("button").Class("ghost").OnClick(b.logout).Text("Log out")
	if b.leaving {
		btn = btn.Disabled(true)
	}
	return btn
}

func activeClass(active bool) string {
	if active {
		return "active"
	}
	return ""
}
