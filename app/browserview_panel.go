package app

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser"
)

// BrowserPanel shows an agent's browser: one WebSocket to /api/agents/:id/browser
// (docs/browser-protocol.md), the page drawn on the desktop viewer's canvas
// (assets/static/desktop.js), with an address bar, tabs, dialogs, file uploads and
// downloads. The browser half is in browserview_session_wasm.go; elsewhere the panel
// renders its empty frame only.
type BrowserPanel struct {
	app.Compo

	// AgentID is the agent whose browser is shown.
	AgentID string
	// Mode is the caller's level on the browser surface; the server's Hello has the last word.
	Mode api.Level

	hostID  string
	sess    bvDriver // nil outside the browser
	ui      bvUI
	url     string // the address bar's text while it is being edited
	editing bool
	prompt  string // the prompt dialog's answer
	started string
}

// bvUI is everything the panel renders that comes from the session.
type bvUI struct {
	Status     string
	Connected  bool
	Watching   bool
	Holding    bool
	Automating bool
	Control    string
	Viewers    string
	Err        string
	Notice     string
	Fit        bool
	Trackpad   bool
	Phone      bool
	Mods       termMods
	Conns      int
	Size       string
	Frames     uint32
	Nav        browser.Nav
	Tabs       string // tabs, encoded (bvUI must be comparable): see tabs()
	Dialog     browser.Dialog
	Chooser    browser.FileChooser
	Downloads  string // one line per download: id, tab, text, tab, "1" when finished
	Uploading  string
	Select     string // the open <select> popup's options, one a line: "1" if disabled, tab, label ("" = none)
	Selected   int
}

// bvDriver is the browser session as the panel uses it (browserview_session_wasm.go).
type bvDriver interface {
	stop()
	takeControl()
	release()
	setFit(fit bool)
	setTrackpad(on bool)
	keyboard()
	barKey(name string)
	fullscreen()
	reconnect()
	navigate(url string)
	history(action uint8)
	tabNew()
	tabSwitch(id string)
	tabClose(id string)
	answerDialog(accept bool, prompt string)
	upload(inputID string) // send the files chosen in the file input of that id
	cancelChooser()
	choose(i int) // answer the <select> popup (-1: close it)
	tabList() []browser.TabInfo
}

var bvPanels atomic.Int64

// OnMount starts the session (in the browser).
func (p *BrowserPanel) OnMount(ctx app.Context) {
	if p.hostID == "" {
		p.hostID = fmt.Sprintf("porthole-bv-%d", bvPanels.Add(1))
	}
	p.start(ctx)
}

// OnUpdate restarts the session when the panel is reused for another agent.
func (p *BrowserPanel) OnUpdate(ctx app.Context) {
	if p.started != p.AgentID {
		p.start(ctx)
	}
}

// OnDismount ends the session; the browser keeps running in the agent.
func (p *BrowserPanel) OnDismount() {
	if p.sess != nil {
		p.sess.stop()
		p.sess = nil
	}
}

func (p *BrowserPanel) start(ctx app.Context) {
	if p.sess != nil {
		p.sess.stop()
	}
	p.started = p.AgentID
	p.ui = bvUI{Status: "connecting…", Watching: p.Mode != api.LevelDrive, Fit: true}
	p.sess = newBVSession(ctx, p)
}

func (p *BrowserPanel) drive(f func(bvDriver)) {
	if p.sess != nil {
		f(p.sess)
	}
}

// Render draws the panel. The screen element is owned by desktop.js and is never replaced:
// the top-level children never change in number or order.
func (p *BrowserPanel) Render() app.UI {
	u := p.ui
	mode := "drive"
	if u.Watching {
		mode = "watch"
	}
	return app.Div().Class("desktop-panel", "browser-panel").DataSet("mode", mode).
		DataSet("connections", u.Conns).DataSet("holding", u.Holding).DataSet("frames", u.Frames).Body(
		p.renderBar(),
		p.renderAddress(),
		p.renderTabs(),
		p.renderInfo(),
		app.Div().ID(p.hostID).Class("desktop-screen", "browser-screen").Aria("label", "Agent browser"),
		p.renderKeys(),
	)
}

func (p *BrowserPanel) renderBar() app.UI {
	u := p.ui
	fitLabel, fitTitle := "1:1", "Show the page at its real size (scroll to pan)"
	if !u.Fit {
		fitLabel, fitTitle = "Fit", "Scale the page to fit"
	}
	return app.Div().Class("desktop-bar").Body(
		app.If(u.Watching, func() app.UI {
			return app.Span().Class("badge", "desktop-view-only").Title("You can only watch this browser").Text("view only")
		}),
		app.If(u.Automating, func() app.UI {
			return app.Span().Class("badge", "browser-automating").Title("The agent's own CDP client is connected to this browser").Text("agent automating")
		}),
		app.If(!u.Connected, func() app.UI {
			return app.Span().Class("desktop-conn").Role("status").Body(
				app.Span().Class("desktop-conn-text").Text(u.Status),
				app.Button().Class("desktop-reconnect").Text("Reconnect now").
					OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.reconnect) }),
			)
		}),
		app.Span().Class("desktop-control").Text(u.Control),
		app.If(u.Connected && !u.Watching && !u.Holding, func() app.UI {
			return app.Button().Class("desktop-take").Text("Take control").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.takeControl) })
		}),
		app.If(u.Holding, func() app.UI {
			return app.Button().Class("desktop-release").Text("Release").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.release) })
		}),
		app.Span().Class("desktop-spacer"),
		app.Span().Class("desktop-size", "muted").Text(u.Size),
		app.Button().Class("desktop-fit").Title(fitTitle).Text(fitLabel).
			OnClick(func(ctx app.Context, e app.Event) {
				fit := !p.ui.Fit
				p.drive(func(d bvDriver) { d.setFit(fit) })
			}),
		app.If(u.Phone, func() app.UI {
			label := "Trackpad"
			if u.Trackpad {
				label = "Touch"
			}
			return app.Button().Class("desktop-trackpad").Aria("pressed", u.Trackpad).
				Title("Switch between touching the page and a trackpad with a cursor").Text(label).
				OnClick(func(ctx app.Context, e app.Event) {
					on := !p.ui.Trackpad
					p.drive(func(d bvDriver) { d.setTrackpad(on) })
				})
		}),
		app.If(u.Phone && u.Holding, func() app.UI {
			return app.Button().Class("desktop-keyboard").Title("Open the keyboard").Text("Keyboard").
				OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.keyboard) })
		}),
		app.Button().Class("desktop-fullscreen").Title("Fullscreen").Text("Fullscreen").
			OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.fullscreen) }),
	)
}

// renderAddress is the address bar: back, forward, reload/stop and the URL.
func (p *BrowserPanel) renderAddress() app.UI {
	u := p.ui
	off := !u.Holding
	shown := u.Nav.URL
	if p.editing {
		shown = p.url
	}
	reload := app.Button().Class("browser-reload").Title("Reload").Aria("label", "Reload").Text("⟳").Disabled(off).
		OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.history(browser.HistReload) }) })
	if u.Nav.Loading {
		reload = app.Button().Class("browser-stop").Title("Stop").Aria("label", "Stop").Text("✕").Disabled(off).
			OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.history(browser.HistStop) }) })
	}
	return app.Form().Class("desktop-bar", "browser-address").
		OnSubmit(func(ctx app.Context, e app.Event) {
			e.PreventDefault()
			u := p.url
			p.editing = false
			p.drive(func(d bvDriver) { d.navigate(u) })
		}).Body(
		app.Button().Type("button").Class("browser-back").Title("Back").Aria("label", "Back").Text("←").
			Disabled(off || !u.Nav.CanBack).
			OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.history(browser.HistBack) }) }),
		app.Button().Type("button").Class("browser-forward").Title("Forward").Aria("label", "Forward").Text("→").
			Disabled(off || !u.Nav.CanForward).
			OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.history(browser.HistForward) }) }),
		reload.Type("button"),
		app.Input().Type("text").Class("browser-url").Aria("label", "Address").
			Style("flex", "1").Style("min-width", "8em").
			Placeholder("Address").Value(shown).ReadOnly(off).
			Attr("autocapitalize", "off").Attr("autocomplete", "off").Attr("spellcheck", "false").
			OnFocus(func(ctx app.Context, e app.Event) {
				if !p.editing {
					p.editing, p.url = true, p.ui.Nav.URL
				}
				ctx.JSSrc().Call("select") // as a browser's address bar: typing replaces the URL
			}).
			OnBlur(func(ctx app.Context, e app.Event) { p.editing = false }).
			OnInput(func(ctx app.Context, e app.Event) { p.url, p.editing = ctx.JSSrc().Get("value").String(), true }),
		app.Button().Type("submit").Class("browser-go").Text("Go").Disabled(off),
	)
}

// renderTabs is the tab strip: titles (text, never HTML), switch, close, new.
func (p *BrowserPanel) renderTabs() app.UI {
	var tabs []browser.TabInfo
	if p.sess != nil {
		tabs = p.sess.tabList()
	}
	off := !p.ui.Holding
	items := make([]app.UI, 0, len(tabs)+1)
	for _, t := range tabs {
		id := t.ID
		title := t.Title
		if title == "" {
			title = t.URL
		}
		if title == "" {
			title = "New tab"
		}
		cls := "browser-tab"
		if t.Active {
			cls += " active"
		}
		items = append(items, app.Span().Class(cls).Role("tab").Aria("selected", t.Active).Title(t.URL).Body(
			tabIcon(t.Favicon),
			app.Button().Type("button").Class("browser-tab-title").Text(shorten(title, 40)).Disabled(off && !t.Active).
				OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.tabSwitch(id) }) }),
			app.Button().Type("button").Class("browser-tab-close").Aria("label", "Close tab").Title("Close tab").Text("×").Disabled(off).
				OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.tabClose(id) }) }),
		))
	}
	items = append(items, app.Button().Type("button").Class("browser-tab-new").Aria("label", "New tab").Title("New tab").Text("+").Disabled(off).
		OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.tabNew) }))
	return app.Div().Class("desktop-bar", "browser-tabs").Role("tablist").Style("flex-wrap", "wrap").Body(items...)
}

// tabIcon is a tab's favicon: an image only for a PNG data URL (the gateway drew it in the
// agent's browser and re-encoded it: docs/browser-protocol.md, "Favicons"); anything else is
// no icon, so the viewer's device never loads from the agent's sites. It is decorative (the
// title says which tab it is): an empty alt.
func tabIcon(favicon string) app.UI {
	if !strings.HasPrefix(favicon, browser.FaviconPrefix) {
		return nil
	}
	return app.Img().Class("browser-tab-icon").Src("%s", favicon).Alt("").Width(16).Height(16).
		Style("vertical-align", "middle").Style("margin-right", "0.25rem")
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// renderInfo: who is attached, errors, the open dialog, the file chooser, downloads. Strings
// from the page are the agent's: always text.
func (p *BrowserPanel) renderInfo() app.UI {
	u := p.ui
	return app.Div().Class("desktop-info", "browser-info").Body(
		app.If(u.Viewers != "", func() app.UI {
			return app.Span().Class("desktop-viewers").Text("Attached: " + u.Viewers)
		}),
		app.If(u.Err != "", func() app.UI {
			return app.Span().Class("desktop-error", "error").Role("alert").Text(u.Err)
		}),
		app.If(u.Notice != "", func() app.UI {
			return app.Span().Class("desktop-notice", "muted").Text(u.Notice)
		}),
		app.If(u.Dialog.Open, func() app.UI { return p.renderDialog() }),
		app.If(u.Select != "" && u.Holding, func() app.UI { return p.renderSelect() }),
		app.If(u.Chooser.Open && u.Holding, func() app.UI {
			return app.Div().Class("browser-chooser").Role("dialog").Aria("label", "The page asks for files").Body(
				app.Span().Text("The page asks for a file: "),
				app.Input().Type("file").ID(p.hostID+"-file").Class("browser-file").Multiple(u.Chooser.Multiple).
					OnChange(func(ctx app.Context, e app.Event) {
						id := p.hostID + "-file"
						p.drive(func(d bvDriver) { d.upload(id) })
					}),
				app.Button().Type("button").Class("browser-file-cancel").Text("Cancel").
					OnClick(func(ctx app.Context, e app.Event) { p.drive(bvDriver.cancelChooser) }),
				app.If(u.Uploading != "", func() app.UI { return app.Span().Class("muted").Text(" " + u.Uploading) }),
			)
		}),
		app.If(u.Downloads != "", func() app.UI {
			lines := strings.Split(u.Downloads, "\n")
			items := make([]app.UI, len(lines))
			for i, l := range lines {
				f := strings.SplitN(l, "\t", 3)
				if len(f) < 3 {
					continue
				}
				li := app.Li().Text(f[1])
				if f[2] == "1" && !u.Watching {
					// The drive-level route streams the file out of the sandbox's ~/Downloads.
					li = app.Li().Body(app.A().Class("browser-download").
						Href("/api/agents/"+url.PathEscape(p.AgentID)+"/browser/download?id="+url.QueryEscape(f[0])).
						Attr("download", "").Title("Save on this device").Text(f[1]))
				}
				items[i] = li
			}
			return app.Details().Class("browser-downloads").Body(
				app.Summary().Text(fmt.Sprintf("Downloads (%d) — saved in the agent's ~/Downloads", len(lines))),
				app.Ul().Body(items...),
			)
		}),
	)
}

// renderSelect shows the options of a <select> the page opened (headless Chromium does not
// draw its popup): a tap chooses one.
func (p *BrowserPanel) renderSelect() app.UI {
	lines := strings.Split(p.ui.Select, "\n")
	items := make([]app.UI, 0, len(lines)+1)
	for i, l := range lines {
		disabled, label, _ := strings.Cut(l, "\t")
		i := i
		cls := "browser-option"
		if i == p.ui.Selected {
			cls += " selected"
		}
		items = append(items, app.Button().Type("button").Class(cls).Role("option").Aria("selected", i == p.ui.Selected).
			Disabled(disabled == "1").Text(label).
			OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.choose(i) }) }))
	}
	items = append(items, app.Button().Type("button").Class("browser-option-cancel").Text("Cancel").
		OnClick(func(ctx app.Context, e app.Event) { p.drive(func(d bvDriver) { d.choose(-1) }) }))
	return app.Div().Class("browser-select").Role("listbox").Aria("label", "Choose an option").
		Style("display", "flex").Style("flex-wrap", "wrap").Style("gap", "0.25rem").Body(items...)
}

func (p *BrowserPanel) renderDialog() app.UI {
	d := p.ui.Dialog
	canAnswer := p.ui.Holding
	kind := d.Type
	if kind == "" {
		kind = "alert"
	}
	return app.Div().Class("browser-dialog").Role("alertdialog").Aria("label", "The page's "+kind).Body(
		app.P().Class("browser-dialog-message").Text(d.Message),
		app.If(kind == "prompt" && canAnswer, func() app.UI {
			return app.Input().Type("text").Class("browser-dialog-input").Aria("label", "Answer").Value(p.prompt).
				Placeholder(d.Default).
				OnInput(func(ctx app.Context, e app.Event) { p.prompt = ctx.JSSrc().Get("value").String() })
		}),
		app.If(canAnswer, func() app.UI {
			return app.Div().Class("browser-dialog-actions").Body(
				app.Button().Type("button").Class("browser-dialog-ok").Text("OK").
					OnClick(func(ctx app.Context, e app.Event) {
						ans := p.prompt
						if ans == "" {
							ans = d.Default
						}
						p.prompt = ""
						p.drive(func(dr bvDriver) { dr.answerDialog(true, ans) })
					}),
				app.If(kind != "alert", func() app.UI {
					return app.Button().Type("button").Class("browser-dialog-cancel").Text("Cancel").
						OnClick(func(ctx app.Context, e app.Event) {
							p.prompt = ""
							p.drive(func(dr bvDriver) { dr.answerDialog(false, "") })
						})
				}),
			)
		}),
		app.If(!canAnswer, func() app.UI {
			return app.P().Class("muted").Text("The page shows a " + kind + "; the driver answers it.")
		}),
	)
}

// renderKeys is the phone keys bar shared with the terminal and the desktop.
func (p *BrowserPanel) renderKeys() app.UI {
	if !p.ui.Phone || !p.ui.Holding {
		return app.Div().Class("desktop-keys-wrap").Hidden(true)
	}
	return app.Div().Class("desktop-keys-wrap").Body(
		specialKeysBar(p.ui.Mods, func(name string) { p.drive(func(d bvDriver) { d.barKey(name) }) }),
	)
}
