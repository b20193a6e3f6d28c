package app

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/terminal"
)

// TerminalPanel shows an agent's terminals: one WebSocket to /api/agents/:id/terminal
// carrying a tab per terminal, rendered by xterm.js through assets/static/terminal.js.
// The browser half (WebSocket, xterm.js) is in terminal_session_wasm.go; elsewhere the
// panel renders its empty frame only.
//
// On the agent page the panel's children are laid out in the page's grid (app.css): the bar
// (terminal tabs, who is attached, search) in the header row, the screens in all the rest,
// the phone keys at the bottom, and the info banner over the top of the screens.
type TerminalPanel struct {
	app.Compo

	// AgentID is the agent whose terminals are shown.
	AgentID string
	// Mode is the caller's level on the terminal surface (watch or drive); the
	// server's Hello and Mode messages have the last word.
	Mode api.Level
	// Term is the terminal to show first (?term=), when it is still open.
	Term uint32
	// Admin shows the server's own words under an error's sentence.
	Admin bool

	hostID       string     // id of the element the xterm.js screens live in
	sess         termDriver // nil outside the browser
	ui           termUI
	search       string
	started      string // AgentID the session was started for
	toolsOpen    bool   // search and clipboard, behind a button on narrow screens
	confirmClose uint32 // a running terminal whose close waits for confirmation
}

// termUI is everything the panel renders that comes from the session.
type termUI struct {
	View      termView
	Status    string // connection state, as a sentence ("" when connected)
	Blocked   bool   // no automatic reconnect: access removed, agent gone
	Connected bool
	Mods      termMods
	Found     string // search result, e.g. "2 of 5"
	Phone     bool   // narrow screen or coarse pointer: show the keys bar
	Conns     int    // connections that got a Hello (reconnects show as data-connections)
	Notice    string // a passing message of the app's own (paste refused, ...)
}

// termDriver is the browser session as the panel uses it (terminal_session_wasm.go).
type termDriver interface {
	stop()
	open()
	closeTab(id uint32)
	activate(id uint32)
	key(name string)
	search(text string, backwards bool)
	clearSearch()
	copySelection()
	paste()
	reconnect()
}

// Terminal text size, per device.
const (
	termFontKey     = "porthole-term-font"
	termFontDefault = 14
	termFontMin     = 8
	termFontMax     = 32
)

// termFontSize is this device's terminal text size.
func termFontSize() int {
	if n, err := strconv.Atoi(localGet(termFontKey)); err == nil {
		return clampFont(n)
	}
	return termFontDefault
}

func clampFont(n int) int { return min(max(n, termFontMin), termFontMax) }

var termPanels atomic.Int64

// OnInit names the screens' element before the first render: the session may create a screen
// in it before anything renders the panel again.
func (p *TerminalPanel) OnInit() {
	if p.hostID == "" {
		p.hostID = fmt.Sprintf("porthole-term-%d", termPanels.Add(1))
	}
}

// OnMount starts the session (in the browser).
func (p *TerminalPanel) OnMount(ctx app.Context) {
	p.OnInit()
	p.start(ctx)
}

// OnUpdate restarts the session when the panel is reused for another agent.
func (p *TerminalPanel) OnUpdate(ctx app.Context) {
	if p.started != p.AgentID {
		p.start(ctx)
	}
}

// OnDismount ends the session: the terminals keep running on the server.
func (p *TerminalPanel) OnDismount() {
	if p.sess != nil {
		p.sess.stop()
		p.sess = nil
	}
}

func (p *TerminalPanel) start(ctx app.Context) {
	if p.sess != nil {
		p.sess.stop()
	}
	p.started = p.AgentID
	p.ui = termUI{Status: "connecting…"}
	p.ui.View.Watching = p.Mode != api.LevelDrive
	p.sess = newTermSession(ctx, p)
}

// Render draws the panel. Its top-level children never change in number or
// order: the screens element is owned by xterm.js and must never be replaced.
func (p *TerminalPanel) Render() app.UI {
	v := p.ui.View
	mode := "drive"
	if v.Watching {
		mode = "watch"
	}
	return app.Div().Class("terminal-panel").DataSet("mode", mode).DataSet("connections", p.ui.Conns).Body(
		p.renderBar(v),
		p.renderInfo(v),
		app.Div().ID(p.hostID).Class("terminal-screens").Aria("label", "Terminal"),
		p.renderKeys(),
	)
}

func (p *TerminalPanel) renderBar(v termView) app.UI {
	toolsClass := "terminal-tools"
	if p.toolsOpen {
		toolsClass += " open"
	}
	return app.Div().Class("terminal-bar").Body(
		app.Div().Class("terminal-tabs").Role("tablist").Aria("label", "Terminals").Body(
			app.Range(v.Tabs).Slice(func(i int) app.UI {
				t := v.Tabs[i]
				id := t.ID
				cls := "terminal-tab"
				if t.ID == v.Active {
					cls += " active"
				}
				if t.Exited {
					cls += " exited"
				}
				closeLabel := "Close terminal"
				if t.Exited {
					closeLabel = "Remove tab"
				}
				// The handlers read their tab's id from the DOM (dataOf): a tab's element is reused
				// for another terminal when one before it goes.
				return app.Span().Class(cls).DataSet("term-id", id).Body(
					app.Button().Class("terminal-tab-name").Role("tab").
						Aria("selected", t.ID == v.Active).Title(t.Label).
						OnClick(func(ctx app.Context, e app.Event) {
							if id, ok := termIDOf(ctx); ok {
								p.drive(func(d termDriver) { d.activate(id) })
							}
						}).
						Text(t.Label),
					app.If(!v.Watching || t.Exited, func() app.UI {
						return app.Button().Class("terminal-tab-close").Title(closeLabel).Aria("label", closeLabel).
							OnClick(func(ctx app.Context, e app.Event) {
								id, ok := termIDOf(ctx)
								switch {
								case !ok:
								case p.tabRunning(id):
									p.confirmClose = id // a running program: ask first
								default:
									p.drive(func(d termDriver) { d.closeTab(id) })
								}
							}).
							Text("×")
					}),
				)
			}),
			app.If(v.CanOpen, func() app.UI {
				return app.Button().Class("terminal-new").Title("New terminal").Aria("label", "New terminal").
					OnClick(func(ctx app.Context, e app.Event) { p.drive(termDriver.open) }).Text("+")
			}),
		),
		app.If(v.Watching, func() app.UI {
			return app.Span().Class("badge", "terminal-watching").Title("Your keystrokes are not sent: you can only watch").Text("watching")
		}),
		app.Span().Class("terminal-title").Title("Window title set by the program").Text(v.Title),
		app.Span().Class("terminal-viewers").Title("Attached now").Text(v.Viewers),
		app.Span().Class("terminal-dot").Title(connTitle(p.ui)).DataSet("connected", p.ui.Connected),
		app.Button().Class("terminal-tools-toggle", "ghost").Aria("label", "Search and clipboard").
			Aria("expanded", p.toolsOpen).Title("Search and clipboard").
			OnClick(func(ctx app.Context, e app.Event) { p.toolsOpen = !p.toolsOpen }).Body(icon("search")),
		app.Div().Class(toolsClass).Body(p.renderTools()...),
	)
}

func connTitle(u termUI) string {
	if u.Connected {
		return "Connected"
	}
	return u.Status
}

func (p *TerminalPanel) renderTools() []app.UI {
	return []app.UI{
		app.Input().Type("search").Class("terminal-search").Placeholder("Search scrollback").
			Aria("label", "Search scrollback").Value(p.search).
			OnInput(func(ctx app.Context, e app.Event) {
				p.search = ctx.JSSrc().Get("value").String()
				text := p.search
				p.drive(func(d termDriver) { d.search(text, false) })
			}).
			OnKeyDown(func(ctx app.Context, e app.Event) {
				text := p.search
				switch e.Get("key").String() {
				case "Enter":
					back := e.Get("shiftKey").Bool()
					p.drive(func(d termDriver) { d.search(text, back) })
				case "Escape":
					p.search = ""
					p.drive(termDriver.clearSearch)
				}
			}),
		app.Button().Class("terminal-search-prev").Title("Previous match").Aria("label", "Previous match").Text("↑").
			OnClick(func(ctx app.Context, e app.Event) {
				text := p.search
				p.drive(func(d termDriver) { d.search(text, true) })
			}),
		app.Button().Class("terminal-search-next").Title("Next match").Aria("label", "Next match").Text("↓").
			OnClick(func(ctx app.Context, e app.Event) {
				text := p.search
				p.drive(func(d termDriver) { d.search(text, false) })
			}),
		app.Span().Class("terminal-found").Text(p.ui.Found),
		app.Button().Class("terminal-copy").Title("Copy the selection").Text("Copy").
			OnClick(func(ctx app.Context, e app.Event) { p.toolsOpen = false; p.drive(termDriver.copySelection) }),
		app.If(!p.ui.View.Watching, func() app.UI {
			return app.Button().Class("terminal-paste").Title("Paste from the clipboard").Text("Paste").
				OnClick(func(ctx app.Context, e app.Event) { p.toolsOpen = false; p.drive(termDriver.paste) })
		}),
	}
}

// renderInfo is the banner over the top of the screens: the connection, why a terminal ended,
// errors, a confirmation — sentences for people; agent- and server-controlled strings as text.
func (p *TerminalPanel) renderInfo(v termView) app.UI {
	return app.Div().Class("terminal-info").Body(
		app.If(!p.ui.Connected, func() app.UI {
			label := "Reconnect now"
			if p.ui.Blocked {
				label = "Try again"
			}
			return app.Div().Class("terminal-conn").Role("status").Body(
				app.Span().Class("terminal-conn-text").Text(p.ui.Status),
				app.Button().Class("terminal-reconnect").Text(label).
					OnClick(func(ctx app.Context, e app.Event) { p.drive(termDriver.reconnect) }),
				app.If(p.ui.Blocked, func() app.UI { return app.A().Class("button", "ghost").Href("/").Text("Dashboard") }),
			)
		}),
		app.If(p.confirmClose != 0 && p.tabRunning(p.confirmClose), func() app.UI {
			return app.Div().Class("terminal-confirm").Role("alertdialog").Body(
				app.Span().Text("Close “"+p.tabLabel(p.confirmClose)+"”? The shell and anything running in it will be stopped."),
				app.Button().Class("danger", "terminal-close-confirm").Text("Close terminal").
					OnClick(func(ctx app.Context, e app.Event) {
						id := p.confirmClose
						p.confirmClose = 0
						p.drive(func(d termDriver) { d.closeTab(id) })
					}),
				app.Button().Class("ghost", "terminal-close-cancel").Text("Keep it running").
					OnClick(func(ctx app.Context, e app.Event) { p.confirmClose = 0 }),
			)
		}),
		app.If(v.Ended != "", func() app.UI {
			return app.Div().Class("terminal-ended").Body(
				app.Text("Ended: "+endedText(v.Ended)),
				app.If(p.Admin && !knownEnd(v.Ended), func() app.UI {
					return app.Details().Body(app.Summary().Text("Details"), app.Code().Text(v.Ended))
				}),
			)
		}),
		app.If(v.Err != "", func() app.UI {
			return app.Div().Class("terminal-error", "error").Role("alert").Body(
				app.Text(termErrorText(v.ErrCode, v.Err)),
				app.If(p.Admin && termErrorText(v.ErrCode, v.Err) != v.Err, func() app.UI {
					return app.Details().Body(app.Summary().Text("Details"), app.Code().Text(v.Err))
				}),
			)
		}),
		app.If(p.ui.Notice != "", func() app.UI {
			return app.Div().Class("terminal-notice", "notice").Role("status").Text(p.ui.Notice)
		}),
		app.If(len(v.Tabs) == 0 && p.ui.Connected && v.Watching, func() app.UI {
			return app.Div().Class("muted", "terminal-empty").Text("No terminal is open. You are watching: a driver must open one.")
		}),
	)
}

// termIDOf is the terminal id of the tab an event came from.
func termIDOf(ctx app.Context) (uint32, bool) {
	n, err := strconv.ParseUint(dataOf(ctx, "term-id"), 10, 32)
	return uint32(n), err == nil && n != 0
}

func (p *TerminalPanel) tabRunning(id uint32) bool {
	for _, t := range p.ui.View.Tabs {
		if t.ID == id {
			return !t.Exited
		}
	}
	return false
}

func (p *TerminalPanel) tabLabel(id uint32) string {
	for _, t := range p.ui.View.Tabs {
		if t.ID == id {
			return t.Label
		}
	}
	return "this terminal"
}

// endedText says why a terminal ended, for people, with what to do next: the reasons the
// server's Exit carries (terminal/term.go, terminal/service.go; the client adds " (status N)")
// or the client's own. Anything else (a helper's own error) is summed up, never shown raw.
func endedText(reason string) string {
	const again = " Open a new terminal to go on."
	base, status, _ := strings.Cut(reason, " (status ")
	switch {
	case base == "shell exited":
		if code := strings.TrimSuffix(status, ")"); code != "" && code != "0" {
			return "the shell exited with status " + code + "." + again
		}
		return "the shell exited." + again
	case strings.HasPrefix(base, "agent helper exited"): // terminal.ErrHelperExited (gateway side only): the helper died
		return "the agent's sandbox stopped unexpectedly. Open a new terminal to start it again."
	case base == "agent stopped":
		return "the agent was stopped or deleted. Open a new terminal to start it again, or go back to the dashboard."
	case base == "idle timeout":
		return "nothing happened in it for a long time, so it was closed." + again
	case strings.HasPrefix(base, "closed by "):
		return "closed by " + strings.TrimPrefix(base, "closed by ") + "." + again
	case base == "server shutting down":
		return "the server restarted. Open a new terminal once it is back."
	case base == "no longer exists":
		return "this terminal no longer exists." + again
	case base == "ended":
		return "the terminal ended." + again
	}
	return "the program in it failed." + again
}

// knownEnd reports whether endedText has a sentence of its own for reason (else an admin may
// want the helper's words).
func knownEnd(reason string) bool {
	return endedText(reason) != endedText("")
}

// termErrorText turns the server's error into a sentence for people, with what to do next:
// never a socket path or an internal error chain (an admin sees those under Details).
func termErrorText(code terminal.ErrCode, msg string) string {
	switch code {
	case terminal.ErrCodeHelper:
		switch {
		case strings.Contains(msg, "host backend not allowed"):
			return "This server does not allow host agents: an admin must start it with --allow-host-backend."
		case strings.Contains(msg, "backend unavailable"):
			backend := "its backend"
			for _, b := range []string{api.BackendBwrap, api.BackendContainer, api.BackendHost} {
				if strings.Contains(msg, b+" backend: ") {
					backend = "the " + b + " backend"
				}
			}
			return "This agent's sandbox cannot start: " + backend + " is unavailable. An admin can see why under Users → Backend health."
		}
		return "The agent's sandbox could not be reached. Try again in a moment."
	case terminal.ErrCodeLimit: // the server's own sentence, with the numbers
		s := strings.TrimSuffix(msg, ".")
		if !strings.Contains(s, "close one") {
			s += "; close a terminal you no longer need, or try again later"
		}
		return capitalize(s) + "."
	case terminal.ErrCodeWatchOnly:
		return "You are watching this agent: only drivers can open terminals. Its owner can give you drive access."
	case terminal.ErrCodeNotFound:
		return "This terminal has ended or no longer exists. Open a new terminal to go on."
	case terminal.ErrCodeSlow:
		return "This connection fell too far behind and was reset. Reconnect to go on."
	}
	return "Something went wrong on the server. Reload the page to try again."
}

// capitalize upper-cases the first letter of an ASCII sentence.
func capitalize(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// renderKeys is the phone keys bar. Its buttons never take the focus from the
// terminal (terminal.js noBlur), so the soft keyboard stays up.
func (p *TerminalPanel) renderKeys() app.UI {
	if !p.ui.Phone || p.ui.View.Watching {
		return app.Div().Class("terminal-keys").Hidden(true)
	}
	return specialKeysBar(p.ui.Mods, func(name string) { p.drive(func(d termDriver) { d.key(name) }) })
}

// drive runs f on the session, if there is one.
func (p *TerminalPanel) drive(f func(termDriver)) {
	if p.sess != nil {
		f(p.sess)
	}
}
