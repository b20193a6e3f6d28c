// Package assets embeds the built web app (go-app shell, app.wasm precompressed, icons, xterm.js) and serves it.
package assets

import "net/http"

// Handler serves the web app: precompressed app.wasm (br/gzip per Accept-Encoding), long cache headers
// for versioned files, and index.html for unknown app paths. TODO(app helper).
func Handler() http.Handler { panic("TODO") }
