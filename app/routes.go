package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// Routes registers every page of the app with go-app; the WASM main and the static
// generator both call it, so the pre-rendered shell and the client agree.
func Routes() {
	agents := func() app.Composer { return &AgentsPage{} }
	app.Route("/", agents)
	app.Route("/agents", agents)
	app.Route("/login", func() app.Composer { return &LoginPage{} })
	app.Route("/agents/new", func() app.Composer { return &AgentFormPage{} })
	app.Route("/admin/users", func() app.Composer { return &UsersPage{} })
	app.RouteWithRegexp(`^/agents/[^/]+/edit$`, func() app.Composer { return &AgentFormPage{} })
	app.RouteWithRegexp(`^/agents/[^/]+$`, func() app.Composer { return &AgentPage{} })
}
