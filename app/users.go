package app

import (
	"context"
	"errors"
	"strings"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// UsersPage lets an admin list, create and delete accounts and change their permissions.
type UsersPage struct {
	app.Compo

	ui       app.Context // the page's own context: async results land on it, not on a vanished element
	me       api.Me
	users    []api.User
	loaded   bool
	err      error
	notice   string
	deleting string
	resetID  string // the user whose password is being reset
	resetPW  string

	// the create form
	newName  string
	newPass  string
	newAdmin bool
	newPerms api.Permissions
	busy     bool
}

// OnNav loads the accounts.
func (p *UsersPage) OnNav(ctx app.Context) {
	p.ui = ctx
	ctx.Page().SetTitle("Users · Porthole")
	p.newPerms = api.DefaultPermissions
	if app.IsServer {
		return
	}
	p.refresh(ctx)
}

func (p *UsersPage) refresh(ctx app.Context) {
	var me api.Me
	var users []api.User
	load(ctx, func(c context.Context) (err error) {
		if me, err = currentUser(c); err != nil {
			return err
		}
		if !me.Admin {
			return nil
		}
		users, err = apiClient.Users(c)
		return err
	}, func(ctx app.Context, err error) {
		p.me = me
		if err != nil {
			p.err = err
			return
		}
		p.users, p.loaded = users, true
	})
}

// run calls the API off the UI goroutine, shows its error or notice, and reloads the list.
func (p *UsersPage) run(notice string, call func(context.Context) error) {
	p.busy, p.err, p.notice = true, nil, ""
	load(p.ui, call, func(ctx app.Context, err error) {
		p.busy, p.err = false, err
		if err == nil {
			p.notice = notice
		}
		p.refresh(ctx)
	})
}

func (p *UsersPage) create(ctx app.Context, e app.Event) {
	e.PreventDefault()
	name := strings.TrimSpace(p.newName)
	if name == "" || p.newPass == "" {
		p.err = errors.New("a new user needs a username and a password")
		return
	}
	perms := p.newPerms
	req := api.CreateUserRequest{Username: name, Password: p.newPass, Admin: p.newAdmin, Permissions: &perms}
	p.newName, p.newPass, p.newAdmin, p.newPerms = "", "", false, api.DefaultPermissions
	p.run("Created user "+name+".", func(c context.Context) error {
		_, err := apiClient.CreateUser(c, req)
		return err
	})
}

// The row handlers find their user through the row's data-user-id (dataOf), at the time of the
// event: go-app keeps a row's first handlers when the list re-renders, so a captured user could
// be stale (their permissions before the last change) or another user.

// rowUser is the user of the row an event came from.
func (p *UsersPage) rowUser(ctx app.Context) (api.User, bool) {
	id := dataOf(ctx, "user-id")
	for _, u := range p.users {
		if u.ID == id && id != "" {
			return u, true
		}
	}
	return api.User{}, false
}

func (p *UsersPage) setPerm(s api.Surface) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		u, ok := p.rowUser(ctx)
		if !ok {
			return
		}
		perms := u.Permissions
		l := api.Level(jsValue(ctx))
		switch s {
		case api.SurfaceTerminal:
			perms.Terminal = l
		case api.SurfaceDesktop:
			perms.Desktop = l
		case api.SurfaceBrowser:
			perms.Browser = l
		}
		p.run("Saved "+u.Username+"'s permissions.", func(c context.Context) error {
			return apiClient.UpdateUser(c, u.ID, api.UpdateUserRequest{Permissions: &perms})
		})
	}
}

func (p *UsersPage) setAdmin(ctx app.Context, e app.Event) {
	u, ok := p.rowUser(ctx)
	if !ok {
		return
	}
	admin := jsChecked(ctx)
	p.run("Saved "+u.Username+"'s role.", func(c context.Context) error {
		return apiClient.UpdateUser(c, u.ID, api.UpdateUserRequest{Admin: &admin})
	})
}

func (p *UsersPage) askDelete(ctx app.Context, e app.Event) {
	p.deleting, p.resetID = dataOf(ctx, "user-id"), ""
}

func (p *UsersPage) cancelDelete(ctx app.Context, e app.Event) { p.deleting = "" }

func (p *UsersPage) askReset(ctx app.Context, e app.Event) {
	p.resetID, p.resetPW, p.deleting = dataOf(ctx, "user-id"), "", ""
}

func (p *UsersPage) saveReset(ctx app.Context, e app.Event) {
	e.PreventDefault()
	u, ok := p.rowUser(ctx)
	if !ok || u.ID != p.resetID {
		return
	}
	pw := p.resetPW
	if pw == "" {
		p.err = errors.New("type the new password first")
		return
	}
	p.resetID, p.resetPW = "", ""
	p.run("Set a new password for "+u.Username+"; their sessions were logged out.", func(c context.Context) error {
		return apiClient.UpdateUser(c, u.ID, api.UpdateUserRequest{Password: &pw})
	})
}

func (p *UsersPage) confirmDelete(ctx app.Context, e app.Event) {
	u, ok := p.rowUser(ctx)
	if !ok || u.ID != p.deleting {
		return
	}
	p.deleting = ""
	p.run("Deleted user "+u.Username+".", func(c context.Context) error {
		return apiClient.DeleteUser(c, u.ID)
	})
}

func (p *UsersPage) setNewPerm(s api.Surface) app.EventHandler {
	return func(ctx app.Context, e app.Event) {
		l := api.Level(jsValue(ctx))
		switch s {
		case api.SurfaceTerminal:
			p.newPerms.Terminal = l
		case api.SurfaceDesktop:
			p.newPerms.Desktop = l
		case api.SurfaceBrowser:
			p.newPerms.Browser = l
		}
	}
}

// Render draws the list and the create form.
func (p *UsersPage) Render() app.UI {
	return app.Div().Class("page").Body(
		&TopBar{Active: "users"},
		app.Main().Class("content").Body(
			app.H1().Text("Users"),
			errorText(p.err),
			app.If(p.notice != "", func() app.UI { return app.P().Class("notice").Role("status").Text(p.notice) }),
			app.If(!p.loaded && p.err == nil && (p.me.ID == "" || p.me.Admin), loading),
			app.If(p.me.ID != "" && !p.me.Admin, func() app.UI {
				return app.P().Class("empty").Text("Only an admin can manage users.")
			}),
			app.If(p.loaded && p.me.Admin, func() app.UI {
				return app.Div().Body(p.renderList(), p.renderCreate(), &HealthPanel{})
			}),
		),
	)
}

func (p *UsersPage) renderList() app.UI {
	rows := make([]app.UI, len(p.users))
	for i, u := range p.users {
		rows[i] = p.renderUser(u)
	}
	return app.Div().Class("table-wrap").Body(
		app.Table().ID("user-table").Class("users").Body(
			app.THead().Body(app.Tr().Body(
				app.Th().Text("User"), app.Th().Text("Admin"),
				app.Th().Text("Terminal"), app.Th().Text("Desktop"), app.Th().Text("Browser"),
				app.Th().Text(""),
			)),
			app.TBody().Body(rows...),
		),
	)
}

func (p *UsersPage) renderUser(u api.User) app.UI {
	self := u.ID == p.me.ID
	perm := func(s api.Surface) app.UI {
		return app.Td().DataSet("label", surfaceTitle(s)).Body(
			app.Select().Class("perm-"+string(s)).Aria("label", surfaceTitle(s)+" permission of "+u.Username).
				Disabled(p.busy).OnChange(p.setPerm(s)).Body(levelOptions(u.Permissions.Get(s))...),
		)
	}
	var actions app.UI
	switch {
	case self:
		actions = app.Span().Class("muted").Body(app.Text("you · "), app.A().Href("/account").Text("your password"))
	case p.resetID == u.ID:
		actions = app.Form().Class("row-actions", "reset-form").OnSubmit(p.saveReset).Body(
			app.Input().Type("password").Class("reset-input").Aria("label", "New password for "+u.Username).
				Attr("autocomplete", "new-password").Placeholder("new password").Value(p.resetPW).OnInput(p.ValueTo(&p.resetPW)),
			app.Button().Type("submit").Class("primary", "reset-save").Text("Set"),
			app.Button().Type("button").Class("ghost").OnClick(func(ctx app.Context, e app.Event) { p.resetID = "" }).Text("Cancel"),
		)
	case p.deleting == u.ID:
		actions = app.Span().Class("row-actions").Body(
			app.Button().Type("button").Class("danger", "confirm-delete").OnClick(p.confirmDelete).Text("Delete"),
			app.Button().Type("button").Class("ghost").OnClick(p.cancelDelete).Text("Cancel"),
		)
	default:
		actions = app.Span().Class("row-actions").Body(
			app.Button().Type("button").Class("ghost", "reset-password").OnClick(p.askReset).Text("Reset password"),
			app.Button().Type("button").Class("ghost", "delete-user").OnClick(p.askDelete).Text("Delete"),
		)
	}
	return app.Tr().DataSet("user-id", u.ID).Body(
		app.Td().Class("username").Text(u.Username),
		app.Td().DataSet("label", "Admin").Body(
			app.Input().Type("checkbox").Class("admin-toggle").Aria("label", "admin").Checked(u.Admin).
				Disabled(self || p.busy).OnChange(p.setAdmin),
		),
		perm(api.SurfaceTerminal), perm(api.SurfaceDesktop), perm(api.SurfaceBrowser),
		app.Td().Body(actions),
	)
}

func (p *UsersPage) renderCreate() app.UI {
	perm := func(s api.Surface) app.UI {
		id := "new-perm-" + string(s)
		return app.Div().Class("field").Body(
			app.Label().For(id).Text(surfaceTitle(s)),
			app.Select().ID(id).OnChange(p.setNewPerm(s)).Body(levelOptions(p.newPerms.Get(s))...),
		)
	}
	return app.Form().ID("user-form").Class("card", "form").OnSubmit(p.create).Body(
		app.H2().Text("New user"),
		app.Label().For("new-username").Text("Username"),
		app.Input().ID("new-username").Type("text").Attr("autocomplete", "off").Attr("autocapitalize", "none").
			Value(p.newName).OnInput(p.ValueTo(&p.newName)),
		app.Label().For("new-password").Text("Password"),
		app.Input().ID("new-password").Type("password").Attr("autocomplete", "new-password").
			Value(p.newPass).OnInput(p.ValueTo(&p.newPass)),
		app.Label().Class("check").Body(
			app.Input().ID("new-admin").Type("checkbox").Checked(p.newAdmin).
				OnChange(func(ctx app.Context, e app.Event) { p.newAdmin = jsChecked(ctx) }),
			app.Span().Text("Admin"),
		),
		app.Div().Class("perm-row").Body(perm(api.SurfaceTerminal), perm(api.SurfaceDesktop), perm(api.SurfaceBrowser)),
		app.Div().Class("form-actions").Body(
			app.Button().ID("user-submit").Type("submit").Class("primary").Disabled(p.busy).Text("Create user"),
		),
	)
}
