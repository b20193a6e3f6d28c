//go:build linux && !cgo && !js

package desktop

// Without cgo the helper shows the display but cannot replay input: robotgo links
// libX11/libXtst.
func newInjector(string) (injector, error) { return nil, ErrInputUnavailable }
