//go:build !(js && wasm)

package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// currentTheme has no browser to ask outside WASM (pre-rendering): the light theme.
func currentTheme() string { return "light" }

// setTheme does nothing outside WASM.
func setTheme(string) {}

func replaceURL(string)                                    {}
func localGet(string) string                               { return "" }
func localSet(string, string)                              {}
func copyText(_ app.Context, _ string, done func(ok bool)) { done(false) }
func toggleFullscreen(string)                              {}
func setTermFontSize(int)                                  {}
func isPhone() bool                                        { return false }

// ConsoleErrors is the browser's logger; outside it, go-app keeps its own.
func ConsoleErrors(format string, v ...any) {}

func dataOf(app.Context, string) string { return "" }
