package app

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// apiClient is the one client of the app; its Base is the page's origin (set in client_wasm.go).
var apiClient = &Client{}

// session caches the logged-in user between pages; login and logout reset it.
var session struct {
	mu   sync.Mutex
	me   *api.Me
	call *meCall // the /api/me request in flight, shared by every caller
}

type meCall struct {
	done chan struct{}
	me   api.Me
	err  error
}

// currentUser returns the logged-in user, asking the gateway once per session: callers that
// come while the question is out (the top bar and the page, at once) share its answer.
// It blocks: call it from ctx.Async only.
func currentUser(ctx context.Context) (api.Me, error) {
	session.mu.Lock()
	if session.me != nil {
		me := *session.me
		session.mu.Unlock()
		return me, nil
	}
	if call := session.call; call != nil {
		session.mu.Unlock()
		select {
		case <-call.done:
			return call.me, call.err
		case <-ctx.Done():
			return api.Me{}, ctx.Err()
		}
	}
	call := &meCall{done: make(chan struct{})}
	session.call = call
	session.mu.Unlock()
	me, err := apiClient.Me(ctx)
	session.mu.Lock()
	call.me, call.err = me, err
	if err == nil && session.call == call {
		session.me = &me
	}
	if session.call == call {
		session.call = nil
	}
	session.mu.Unlock()
	close(call.done)
	return me, err
}

// forgetUser drops the cached user (after login or logout).
func forgetUser() {
	session.mu.Lock()
	session.me = nil
	session.call = nil
	session.mu.Unlock()
}

// load runs fetch off the UI goroutine and hands its result to done on it. A 401 sends the
// user to the login page. fetch must not touch component state; done may. ctx must be the
// component's own context (kept from OnNav or OnMount), not an event handler's: go-app drops
// a Dispatch whose source element was re-rendered away meanwhile, and done would never run.
func load(ctx app.Context, fetch func(context.Context) error, done func(app.Context, error)) {
	ctx.Async(func() {
		err := fetch(context.Background())
		ctx.Dispatch(func(ctx app.Context) {
			if errors.Is(err, ErrUnauthorized) {
				forgetUser()
				ctx.Navigate(loginURL(ctx.Page().URL()))
				return
			}
			done(ctx, err)
		})
	})
}

func pathEscape(s string) string { return url.PathEscape(s) }

// loginURL is the login page, asked to come back to the page u after logging in.
func loginURL(u *url.URL) string {
	next := u.RequestURI()
	if u.Path == "/" || u.Path == "/login" || !safeNext(next) {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}

// safeNext reports whether next is a path of this app, not another site ("//host", "/\host", "https:...").
func safeNext(next string) bool {
	return strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") &&
		!strings.ContainsAny(next, "\r\n") && !strings.HasPrefix(next, "/login")
}

// errorText shows an error as text (never HTML); nil shows nothing.
func errorText(err error) app.UI {
	if err == nil {
		return nil
	}
	return app.P().Class("error").Role("alert").Text(err.Error())
}

// badge is a small label; its text is always rendered as text.
func badge(class, text string) app.UI {
	return app.Span().Class("badge", class).Text(text)
}

// backendBadges shows an agent's backend type and, for host agents, the "not isolated" warning.
func backendBadges(b api.Backend) app.UI {
	return app.Span().Class("badges").Body(
		badge("badge-backend", b.Type),
		app.If(!b.Isolated(), func() app.UI {
			return app.Span().
				Class("badge", "badge-danger").
				Title("runs on the server itself, as the server's user: no sandbox").
				Text("not isolated")
		}),
		app.If(b.Network != "", func() app.UI {
			return badge("badge-network", "network: "+b.Network)
		}),
	)
}

// icons are the app's few pictograms, as inline SVG (static markup, never user data): the
// system fonts do not all have ⛶ or ⌕.
var icons = map[string]string{
	"fullscreen": `<path d="M4 9V4h5M15 4h5v5M20 15v5h-5M9 20H4v-5"/>`,
	"search":     `<circle cx="10.5" cy="10.5" r="6"/><path d="M15 15l5 5"/>`,
	"menu":       `<path d="M4 7h16M4 12h16M4 17h16"/>`,
}

// icon draws a pictogram; the button around it carries the label.
func icon(name string) app.UI {
	return app.Raw(`<svg class="icon-svg" viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" fill="none" ` +
		`stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">` + icons[name] + `</svg>`)
}

// loading is the placeholder shown until a page's data arrives (and in the pre-rendered HTML).
func loading() app.UI {
	return app.P().Class("loading").Text("Loading…")
}

// levelOptions renders <option>s for the permission levels, selecting cur.
func levelOptions(cur api.Level) []app.UI {
	levels := []api.Level{api.LevelNone, api.LevelWatch, api.LevelDrive}
	out := make([]app.UI, len(levels))
	for i, l := range levels {
		out[i] = app.Option().Value(string(l)).Selected(l == cur).Text(string(l))
	}
	return out
}

// options renders <option>s for values, selecting cur; labels may be nil.
func options(cur string, values []string, labels map[string]string) []app.UI {
	out := make([]app.UI, len(values))
	for i, v := range values {
		label := v
		if l, ok := labels[v]; ok {
			label = l
		}
		out[i] = app.Option().Value(v).Selected(v == cur).Text(label)
	}
	return out
}

// jsValue reads the event source's value property.
func jsValue(ctx app.Context) string { return ctx.JSSrc().Get("value").String() }

// jsChecked reads the event source's checked property.
func jsChecked(ctx app.Context) bool { return ctx.JSSrc().Get("checked").Bool() }

// agentIDFromPath returns the :id of /agents/:id and /agents/:id/edit.
func agentIDFromPath(p string) string {
	const prefix = "/agents/"
	if len(p) <= len(prefix) || p[:len(prefix)] != prefix {
		return ""
	}
	rest := p[len(prefix):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			rest = rest[:i]
			break
		}
	}
	id, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return id
}

// iconURL is the app icon's versioned URL (set by the generator), or its plain path.
func iconURL() string {
	if v := app.Getenv("PORTHOLE_ICON"); v != "" {
		return v
	}
	return "/web/icon-192.png"
}
