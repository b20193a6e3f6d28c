// Command wasm is the web app's client-only main, compiled to app.wasm; it imports no server code.
package main

import (
	"github.com/maxence-charriere/go-app/v10/pkg/app"
	porthole "github.com/porthole/porthole/app"
)

func main() {
	// For the first-render benchmark's breakdown: when the Go program started.
	app.Window().Get("performance").Call("mark", "porthole-go-main")
	// go-app's informational messages stay out of the console; errors still go there.
	app.DefaultLogger = porthole.ConsoleErrors
	porthole.Routes()
	app.RunWhenOnBrowser()
}
