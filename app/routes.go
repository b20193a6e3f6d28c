package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// Routes registers every page of the app with go-app; the WASM main and the static
// generator both call it, so the pre-rendered shell and the client agree.
func Routes() {
	dashboard := func() app.Composer { return &DashboardPage{} }
	app.Route("/", dashboard)
	app.Route("/agents", dashboard)
	app.Route("/login", func() app.Composer { return &LoginPage{} })
	app.Route("/account", func() app.Composer { return &AccountPage{} })
	app.Route("/audit", func() app.Composer { return &AuditPage{} })
	app.Route("/agents/new", func() app.Composer { return &AgentFormPage{} })
	app.Route("/admin/users", func() app.Composer { return &UsersPage{} })
	app.RouteWithRegexp(`^/agents/[^/]+/edit$`, func() app.Composer { return &AgentFormPage{} })
	app.RouteWithRegexp(`^/agents/[^/]+$`, func() app.Composer { return &AgentPage{} })
	// Last: everything else (go-app v10 would show its own "404" page, not this app's).
	app.RouteWithRegexp(`.*`, func() app.Composer { return &NotFoundPage{} })
}

// NotFoundPage is shown for a path that is no page of the app.
type NotFoundPage struct {
	app.Compo
}

// OnNav sets the title.
func (p *NotFoundPage) OnNav(ctx app.Context) { ctx.Page().SetTitle("Not found · Porthole") }

// Render draws the page with the top bar, so every way on is there.
func (p *NotFoundPage) Render() app.UI {
	return app.Div().Class("page").Body(
		&TopBar{},
		app.Main().Class("content", "narrow").Body(
			app.Div().ID("not-found").Class("card", "notice-card").Body(
				app.H1().Text("There is no such page"),
				app.P().Text("The link may be old, or mistyped."),
				app.A().Class("button", "primary").Href("/").Text("Go to your agents"),
			),
		),
	)
}
