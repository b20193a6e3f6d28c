//go:build !(js && wasm)

package app

import "github.com/maxence-charriere/go-app/v10/pkg/app"

// newDashSession has no WebSocket outside the browser (pre-rendering): the page shows its
// loading state.
func newDashSession(app.Context, *DashboardPage) dashDriver { return nil }
