package app

import (
	"fmt"
	"sync/atomic"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// DesktopPanel shows an agent's desktop: one WebSocket to /api/agents/:id/desktop
// (docs/desktop-protocol.md), drawn on a canvas by assets/static/desktop.js. The browser half
// is in desktop_session_wasm.go; elsewhere the panel renders its empty frame only.
type DesktopPanel struct {
	app.Compo

	// AgentID is the agent whose desktop is shown.
	AgentID string
	// Mode is the caller's level on the desktop surface (watch or drive); the server's Hello
	// and Mode messages have the last word.
	Mode api.Level

	hostID   string     // id of the element desktop.js draws in
	sess     deskDriver // nil outside the browser
	ui       deskUI
	clipText string // the clipboard box's text
	clipOpen bool
	started  string
}

// deskUI is everything the panel renders that comes from the session.
type deskUI struct {
	Status    string // connection state ("" when connected)
	Connected bool
	Watching  bool // our permission is watch: view only
	Holding   bool // we hold control
	Control   string
	Viewers   string
	Err       string
	Clipboard string // the display's clipboard text
	Fit       bool
	Trackpad  bool
	Phone     bool
	Mods      termMods
	Conns     int
	Size      string // "1280×800"
	Notice    string // a local message (clipboard refused, ...)
}

// deskDriver is the browser session as the panel uses it (desktop_session_wasm.go).
type deskDriver interface {
	stop()
	takeControl()
	release()
	setFit(fit bool)
	setTrackpad(on bool)
	keyboard()
	barKey(name string)
	fullscreen()
	pasteLocal()            // read the browser's clipboard, send it to the display
	sendClipboard(s string) // send s to the display's clipboard
	copyLocal(s string)     // put s on the browser's clipboard
	reconnect()
}

var deskPanels atomic.Int64

// OnMount starts the session (in the browser).
func (p *DesktopPanel) OnMount(ctx app.Context) {
	if p.hostID == "" {
		p.hostID = fmt.Sprintf("porthole-desk-%d", deskPanels.Add(1))
	}
	p.start(ctx)
}

// OnUpdate restarts the session when the panel is reused for another agent.
func (p *DesktopPanel) OnUpdate(ctx app.Context) {
	if p.started != p.AgentID {
		p.start(ctx)
	}
}

// OnDismount ends the session; the display keeps running in the agent.
func (p *DesktopPanel) OnDismount() {
	if p.sess != nil {
		p.sess.stop()
		p.sess = nil
	}
}

func (p *DesktopPanel) start(ctx app.Context) {
	if p.sess != nil {
		p.sess.stop()
	}
	p.started = p.AgentID
	p.ui = deskUI{Status: "connecting…", Watching: p.Mode != api.LevelDrive, Fit: true}
	p.sess = newDeskSession(ctx, p)
}

// Render draws the panel. The screen element is owned by desktop.js and is never replaced:
// the top-level children never change in number or order.
func (p *DesktopPanel) Render() app.UI {
	u := p.ui
	mode := "drive"
	if u.Watching {
		mode = "watch"
	}
	return app.Div().Class("desktop-panel").DataSet("mode", mode).DataSet("connections", u.Conns).
		DataSet("holding", u.Holding).Body(
		p.renderBar(),
		p.renderInfo(),
		app.Div().ID(p.hostID).Class("desktop-screen").Aria("label", "Agent desktop"),
		p.renderKeys(),
	)
}

func (p *DesktopPanel) renderBar() app.UI {
	u := p.ui
	fitLabel, fitTitle := "1:1", "Show the desktop at its real size (scroll to pan)"
	if !u.Fit {
		fitLabel, fitTitle = "Fit", "Scale the desktop to fit"
	}
	return app.Div().Class("desktop-bar").Body(
		app.If(u.Watching, func() app.UI {
			return app.Span().Class("badge", "desktop-view-only").Title("You can only watch this desktop").Text("view only")
		}),
		app.If(!u.Connected, func() app.UI {
			return app.Span().Class("desktop-conn").Role("status").Body(
				app.Span().Class("desktop-conn-text").Text(u.Status),
				app.Button().Class("desktop-reconnect").Text("Reconnect now").
					OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.reconnect) }),
			)
		}),
		app.Span().Class("desktop-control").Text(u.Control),
		app.If(u.Connected && !u.Watching && !u.Holding, func() app.UI {
			return app.Button().Class("desktop-take").Text("Take control").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.takeControl) })
		}),
		app.If(u.Holding, func() app.UI {
			return app.Button().Class("desktop-release").Text("Release").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.release) })
		}),
		app.Span().Class("desktop-spacer"),
		app.Span().Class("desktop-size", "muted").Text(u.Size),
		app.Button().Class("desktop-fit").Title(fitTitle).Text(fitLabel).
			OnClick(func(ctx app.Context, e app.Event) {
				fit := !p.ui.Fit
				p.drive(func(d deskDriver) { d.setFit(fit) })
			}),
		app.If(u.Phone, func() app.UI {
			label := "Trackpad"
			if u.Trackpad {
				label = "Touch"
			}
			return app.Button().Class("desktop-trackpad").Aria("pressed", u.Trackpad).
				Title("Switch between touching the screen and a trackpad with a cursor").Text(label).
				OnClick(func(ctx app.Context, e app.Event) {
					on := !p.ui.Trackpad
					p.drive(func(d deskDriver) { d.setTrackpad(on) })
				})
		}),
		app.If(u.Phone && u.Holding, func() app.UI {
			return app.Button().Class("desktop-keyboard").Title("Open the keyboard").Text("Keyboard").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.keyboard) })
		}),
		app.Button().Class("desktop-clip-toggle").Aria("expanded", p.clipOpen).Title("The desktop's clipboard").Text("Clipboard").
			OnClick(func(ctx app.Context, e app.Event) {
				p.clipOpen = !p.clipOpen
				if p.clipOpen {
					p.clipText = p.ui.Clipboard
				}
			}),
		app.Button().Class("desktop-fullscreen").Title("Fullscreen").Text("Fullscreen").
			OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.fullscreen) }),
	)
}

// renderInfo shows who is attached, errors and the clipboard box: user- and agent-controlled
// strings, always as text.
func (p *DesktopPanel) renderInfo() app.UI {
	u := p.ui
	return app.Div().Class("desktop-info").Body(
		app.If(u.Viewers != "", func() app.UI {
			return app.Span().Class("desktop-viewers").Text("Attached: " + u.Viewers)
		}),
		app.If(u.Err != "", func() app.UI {
			return app.Span().Class("desktop-error", "error").Role("alert").Text(u.Err)
		}),
		app.If(u.Notice != "", func() app.UI {
			return app.Span().Class("desktop-notice", "muted").Text(u.Notice)
		}),
		app.If(p.clipOpen, func() app.UI {
			return app.Div().Class("desktop-clip").Body(
				app.Textarea().Class("desktop-clip-text").Aria("label", "Clipboard text").Rows(3).
					Placeholder("The desktop's clipboard (copy something there)").
					Text(p.clipText).
					OnInput(func(ctx app.Context, e app.Event) { p.clipText = ctx.JSSrc().Get("value").String() }),
				app.Div().Class("desktop-clip-actions").Body(
					app.Button().Class("desktop-clip-refresh").Title("Show the desktop's latest clipboard").Text("From desktop").
						OnClick(func(ctx app.Context, e app.Event) { p.clipText = p.ui.Clipboard }),
					app.Button().Class("desktop-clip-copy").Title("Copy this text to your clipboard").Text("Copy").
						OnClick(func(ctx app.Context, e app.Event) {
							s := p.clipText
							p.drive(func(d deskDriver) { d.copyLocal(s) })
						}),
					app.If(u.Holding, func() app.UI {
						return app.Button().Class("desktop-clip-send").Title("Put this text on the desktop's clipboard").Text("Send to desktop").
							OnClick(func(ctx app.Context, e app.Event) {
								s := p.clipText
								p.drive(func(d deskDriver) { d.sendClipboard(s) })
							})
					}),
					app.If(u.Holding, func() app.UI {
						return app.Button().Class("desktop-paste").Title("Paste your clipboard into the desktop's").Text("Paste").
							OnClick(func(ctx app.Context, e app.Event) { p.drive(deskDriver.pasteLocal) })
					}),
				),
			)
		}),
	)
}

// renderKeys is the phone keys bar shared with the terminal (specialKeysBar).
func (p *DesktopPanel) renderKeys() app.UI {
	if !p.ui.Phone || !p.ui.Holding {
		return app.Div().Class("desktop-keys-wrap").Hidden(true)
	}
	return app.Div().Class("desktop-keys-wrap").Body(
		specialKeysBar(p.ui.Mods, func(name string) { p.drive(func(d deskDriver) { d.barKey(name) }) }),
	)
}

func (p *DesktopPanel) drive(f func(deskDriver)) {
	if p.sess != nil {
		f(p.sess)
	}
}
