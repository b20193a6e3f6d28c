//go:build !(js && wasm)

package app

// currentTheme has no browser to ask outside WASM (pre-rendering): the light theme.
func currentTheme() string { return "light" }

// setTheme does nothing outside WASM.
func setTheme(string) {}
