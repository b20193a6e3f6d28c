//go:build !(js && wasm)

package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// newBVSession has nothing to connect outside the browser (pre-rendering, the static
// generator): the panel renders its empty frame.
func newBVSession(app.Context, *BrowserPanel) bvDriver { return nil }
