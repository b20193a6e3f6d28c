//go:build js && wasm

package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

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
