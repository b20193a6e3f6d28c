package app

import (
	"context"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TopBar is the header of every logged-in page but the agent's (which has its own compact
// row): navigation, the user (a link to their account), Install, the theme toggle and logout.
// On phones the navigation folds into a menu that opens over the page.
type TopBar struct {
	app.Compo

	// Active names the current section ("agents", "audit", "users", "account") for highlighting.
	Active string

	ui          app.Context // the bar's own context, for async results
	me          api.Me
	loaded      bool
	theme       string
	err         error
	leaving     bool
	menuOpen    bool
	installable bool
}

// OnMount loads the user and the current theme.
func (b *TopBar) OnMount(ctx app.Context) {
	b.ui = ctx
	b.theme = currentTheme()
	if app.IsServer {
		return
	}
	b.installable = ctx.IsAppInstallable()
	var me api.Me
	load(ctx, func(c context.Context) (err error) {
		me, err = currentUser(c)
		return err
	}, func(ctx app.Context, err error) {
		b.me, b.err, b.loaded = me, err, err == nil
	})
}

// OnAppInstallChange shows or hides the Install button (go-app's AppInstaller).
func (b *TopBar) OnAppInstallChange(ctx app.Context) { b.installable = ctx.IsAppInstallable() }

func (b *TopBar) toggleTheme(ctx app.Context, e app.Event) {
	if b.theme == "dark" {
		b.theme = "light"
	} else {
		b.theme = "dark"
	}
	setTheme(b.theme)
}

func (b *TopBar) toggleMenu(ctx app.Context, e app.Event) { b.menuOpen = !b.menuOpen }

func (b *TopBar) install(ctx app.Context, e app.Event) { ctx.ShowAppInstallPrompt() }

func (b *TopBar) logout(ctx app.Context, e app.Event) {
	b.leaving = true
	logout(b.ui, func(err error) { b.leaving, b.err = false, err })
}

// logout ends the session and goes to the login page; failed gets an error other than 401.
func logout(ui app.Context, failed func(error)) {
	ui.Async(func() {
		err := apiClient.Logout(context.Background())
		ui.Dispatch(func(ctx app.Context) {
			if err != nil && !isUnauthorized(err) {
				failed(err)
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
			app.Img().Src(iconURL()).Alt("Porthole logo").Class("brand-icon"),
			app.Span().Text("Porthole"),
		),
		app.Button().Type("button").Class("menu-toggle").Aria("label", "Menu").
			Aria("expanded", b.menuOpen).OnClick(b.toggleMenu).Text("☰"),
		app.Nav().Class(navClass).Aria("label", "Main").Body(
			app.A().ID("nav-agents").Href("/").Class(activeClass(b.Active == "agents")).Text("Agents"),
			app.A().ID("nav-audit").Href("/audit").Class(activeClass(b.Active == "audit")).Text("Audit log"),
			app.If(b.me.Admin, func() app.UI {
				return app.A().ID("nav-users").Href("/admin/users").Class(activeClass(b.Active == "users")).Text("Users")
			}),
			app.Span().Class("spacer"),
			app.If(b.installable, func() app.UI {
				return app.Button().ID("install-app").Type("button").Class("ghost").
					Title("Install Porthole as an app on this device").OnClick(b.install).Text("Install app")
			}),
			app.If(b.loaded, func() app.UI {
				return app.A().ID("whoami").Class("whoami", activeClass(b.Active == "account")).Href("/account").
					Title("Your account: password and sessions").Text(b.me.Username)
			}),
			app.Button().ID("theme-toggle").Type("button").Class("ghost").
				Title("Switch theme (remembered on this device)").OnClick(b.toggleTheme).Text(themeLabel),
			b.logoutButton(),
		),
		errorText(b.err),
		&UpdateToast{},
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

// UpdateToast says when a new version of the app was installed by the service worker in the
// background, with a button to reload into it (go-app's AppUpdater).
type UpdateToast struct {
	app.Compo
	ready     bool
	dismissed bool
}

// OnMount shows the toast if the update came before this page.
func (t *UpdateToast) OnMount(ctx app.Context) {
	if !app.IsServer {
		t.ready = ctx.AppUpdateAvailable()
	}
}

// OnAppUpdate is called once a new version is ready.
func (t *UpdateToast) OnAppUpdate(ctx app.Context) { t.ready = ctx.AppUpdateAvailable() }

// Render draws the toast, or an empty placeholder.
func (t *UpdateToast) Render() app.UI {
	if !t.ready || t.dismissed {
		return app.Div().Class("toast-slot")
	}
	return app.Div().Class("toast-slot").Body(
		app.Div().ID("update-toast").Class("toast").Role("status").Body(
			app.Span().Text("A new version of Porthole is ready."),
			app.Button().Type("button").Class("primary").OnClick(func(ctx app.Context, e app.Event) { ctx.Reload() }).Text("Reload"),
			app.Button().Type("button").Class("ghost").Aria("label", "Later").
				OnClick(func(ctx app.Context, e app.Event) { t.dismissed = true }).Text("Later"),
		),
	)
}
