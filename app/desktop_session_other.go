//go:build !(js && wasm)

package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// newDeskSession has nothing to connect outside the browser (pre-rendering, the static
// generator): the panel renders its empty frame.
func newDeskSession(app.Context, *DesktopPanel) deskDriver { return nil }
