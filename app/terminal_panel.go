package app

import (
	"fmt"
	"sync/atomic"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TerminalPanel shows an agent's terminals: one WebSocket to /api/agents/:id/terminal
// carrying a tab per terminal, rendered by xterm.js through assets/static/terminal.js.
// The browser half (WebSocket, xterm.js) is in terminal_session_wasm.go; elsewhere the
// panel renders its empty frame only.
type TerminalPanel struct {
	app.Compo

	// AgentID is the agent whose terminals are shown.
	AgentID string
	// Mode is the caller's level on the terminal surface (watch or drive); the
	// server's Hello and Mode messages have the last word.
	Mode api.Level

	hostID  string     // id of the element the xterm.js screens live in
	sess    termDriver // nil outside the browser
	ui      termUI
	search  string
	started string // AgentID the session was started for
}

// termUI is everything the panel renders that comes from the session.
type termUI struct {
	View      termView
	Status    string // connection state, shown as text ("" when connected)
	Connected bool
	Mods      termMods
	Found     string // search result, e.g. "2 of 5"
	Phone     bool   // narrow screen or coarse pointer: show the keys bar
	Conns     int    // connections that got a Hello (reconnects show as data-connections)
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

var termPanels atomic.Int64

// OnMount starts the session (in the browser).
func (p *TerminalPanel) OnMount(ctx app.Context) {
	if p.hostID == "" {
		p.hostID = fmt.Sprintf("porthole-term-%d", termPanels.Add(1))
	}
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
		p.renderTools(),
		p.renderInfo(v),
		app.Div().ID(p.hostID).Class("terminal-screens"),
		p.renderKeys(),
	)
}

func (p *TerminalPanel) renderBar(v termView) app.UI {
	return app.Div().Class("terminal-bar").Body(
		app.Div().Class("terminal-tabs").Role("tablist").Body(
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
				return app.Span().Class(cls).Body(
					app.Button().Class("terminal-tab-name").Role("tab").
						Aria("selected", t.ID == v.Active).Title(t.Label).
						OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d termDriver) { d.activate(id) }) }).
						Text(t.Label),
					app.If(!v.Watching || t.Exited, func() app.UI {
						return app.Button().Class("terminal-tab-close").Title(closeLabel).Aria("label", closeLabel).
							OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d termDriver) { d.closeTab(id) }) }).
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
		app.If(!p.ui.Connected, func() app.UI {
			return app.Span().Class("terminal-conn").Role("status").Body(
				app.Span().Class("terminal-conn-text").Text(p.ui.Status),
				app.Button().Class("terminal-reconnect").Text("Reconnect now").
					OnClick(func(ctx app.Context, e app.Event) { p.drive(termDriver.reconnect) }),
			)
		}),
	)
}

func (p *TerminalPanel) renderTools() app.UI {
	return app.Div().Class("terminal-tools").Body(
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
			OnClick(func(ctx app.Context, e app.Event) { p.drive(termDriver.copySelection) }),
		app.If(!p.ui.View.Watching, func() app.UI {
			return app.Button().Class("terminal-paste").Title("Paste from the clipboard").Text("Paste").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(termDriver.paste) })
		}),
	)
}

// renderInfo shows the window title, who is attached and errors — all agent- or
// server-controlled strings, always as text.
func (p *TerminalPanel) renderInfo(v termView) app.UI {
	return app.Div().Class("terminal-info").Body(
		app.If(v.Title != "", func() app.UI {
			return app.Span().Class("terminal-title").Title("Window title set by the program").Text(v.Title)
		}),
		app.If(v.Viewers != "", func() app.UI {
			return app.Span().Class("terminal-viewers").Text("Attached: " + v.Viewers)
		}),
		app.If(v.Ended != "", func() app.UI {
			return app.Span().Class("terminal-ended").Text("Ended: " + v.Ended)
		}),
		app.If(v.Err != "", func() app.UI {
			return app.Span().Class("terminal-error", "error").Role("alert").Text(v.Err)
		}),
		app.If(len(v.Tabs) == 0 && p.ui.Connected && v.Watching, func() app.UI {
			return app.Span().Class("muted").Text("No terminal is open. You are watching: a driver must open one.")
		}),
	)
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
