//go:build js && wasm

package app

import (
	"fmt"
	"strconv"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// themeKey is the localStorage key of the chosen theme; assets/static/theme.js reads it too.
const themeKey = "porthole-theme"

// currentTheme returns the theme in effect: the one chosen on this device, else the system's.
func currentTheme() string {
	root := app.Window().Get("document").Get("documentElement")
	if t := root.Call("getAttribute", "data-theme"); t.Truthy() {
		return t.String()
	}
	if app.Window().Call("matchMedia", "(prefers-color-scheme: dark)").Get("matches").Bool() {
		return "dark"
	}
	return "light"
}

// setTheme applies a theme and remembers it in localStorage.
func setTheme(t string) {
	app.Window().Get("document").Get("documentElement").Call("setAttribute", "data-theme", t)
	if ls := app.Window().Get("localStorage"); ls.Truthy() {
		ls.Call("setItem", themeKey, t)
	}
}

// replaceURL changes the address bar without a navigation (?tab=, ?term=).
func replaceURL(u string) {
	if h := app.Window().Get("history"); h.Truthy() {
		h.Call("replaceState", nil, "", u)
	}
}

// localGet reads this device's setting key ("" when unset or storage is off).
func localGet(key string) string {
	ls := app.Window().Get("localStorage")
	if !ls.Truthy() {
		return ""
	}
	if v := ls.Call("getItem", key); v.Truthy() {
		return v.String()
	}
	return ""
}

// localSet remembers a setting on this device.
func localSet(key, value string) {
	if ls := app.Window().Get("localStorage"); ls.Truthy() {
		ls.Call("setItem", key, value)
	}
}

// copyText puts s on the clipboard; done (on the UI goroutine, through ctx) says whether it worked.
func copyText(ctx app.Context, s string, done func(ok bool)) {
	clip := app.Window().Get("navigator").Get("clipboard")
	if !clip.Truthy() {
		done(false)
		return
	}
	var ok, fail app.Func
	release := func() { ok.Release(); fail.Release() }
	ok = app.FuncOf(func(this app.Value, args []app.Value) any {
		ctx.Dispatch(func(app.Context) { done(true) })
		release()
		return nil
	})
	fail = app.FuncOf(func(this app.Value, args []app.Value) any {
		ctx.Dispatch(func(app.Context) { done(false) })
		release()
		return nil
	})
	clip.Call("writeText", s).Call("then", ok, fail)
}

// toggleFullscreen makes the element with id fullscreen, or leaves fullscreen.
func toggleFullscreen(id string) {
	doc := app.Window().Get("document")
	if doc.Get("fullscreenElement").Truthy() {
		doc.Call("exitFullscreen")
		return
	}
	if el := doc.Call("getElementById", id); el.Truthy() && el.Get("requestFullscreen").Truthy() {
		el.Call("requestFullscreen").Call("catch", app.FuncOf(func(this app.Value, args []app.Value) any { return nil }))
	}
}

// setTermFontSize applies a terminal font size to every open terminal (terminal.js) and
// remembers it on this device.
func setTermFontSize(px int) {
	localSet(termFontKey, strconv.Itoa(px))
	if t := app.Window().Get("porthole"); t.Truthy() && t.Get("term").Truthy() {
		t.Get("term").Call("setFontSize", px)
	}
}

// isPhone reports a narrow screen or a coarse pointer (the phone layout).
func isPhone() bool {
	return app.Window().Call("matchMedia", "(max-width: 700px), (pointer: coarse)").Get("matches").Bool()
}

// ConsoleErrors is a go-app logger (app.DefaultLogger) that writes only messages carrying an
// error to the browser console: a normal visit logs nothing.
func ConsoleErrors(format string, v ...any) {
	for _, a := range v {
		if _, ok := a.(error); ok {
			app.Window().Get("console").Call("error", fmt.Sprintf(format, v...))
			return
		}
	}
}

// dataOf reads the attribute data-<name> of the event's element or its closest ancestor that
// has one ("" if none). Handlers of list items use it to know their item: go-app keeps an
// element's first handler when a re-render gives it a new closure of the same function literal
// (it compares code pointers), so a captured id can belong to the item that was there before.
func dataOf(ctx app.Context, name string) string {
	src := ctx.JSSrc()
	if src == nil || !src.Truthy() {
		return ""
	}
	el := src.Call("closest", "[data-"+name+"]")
	if !el.Truthy() {
		return ""
	}
	return el.Call("getAttribute", "data-"+name).String()
}
