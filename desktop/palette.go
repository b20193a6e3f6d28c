//go:build !js

package desktop

import "github.com/porthole/porthole/desktop/internal/palette"

// DecodePalette turns the data of a W×H Rect in EncPalette into RGBA pixels (4·W·H bytes). A
// viewer in Go uses it (tests, the benchmark's viewer); the web app decodes the same layout in
// assets/static/desktop.js, so the WASM build leaves it (and compress/flate) out.
func DecodePalette(data []byte, w, h int) ([]byte, error) { return palette.Decode(data, w, h) }
