// Command wasm is the web app's client-only main, compiled to app.wasm; it imports no server code.
package main

import (
	"github.com/maxence-charriere/go-app/v10/pkg/app"
	porthole "github.com/porthole/porthole/app"
)

func main() {
	porthole.Routes()
	app.RunWhenOnBrowser()
}
