// Package assets embeds the built web app (go-app shell, app.wasm precompressed, icons, xterm.js) and serves it.
package assets

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// web is the tree `make web` generates into assets/web (only .keep without it).
//
//go:embed all:web
var web embed.FS

var (
	defaultOnce    sync.Once
	defaultHandler http.Handler
)

// Handler serves the web app: precompressed app.wasm (br/gzip per Accept-Encoding), long cache headers
// for versioned files, and index.html for unknown app paths. Without `make web` it answers 503.
func Handler() http.Handler {
	defaultOnce.Do(func() {
		sub, err := fs.Sub(web, "web")
		if err != nil {
			panic(err) // "web" is a literal directory of the embed
		}
		defaultHandler = New(sub)
	})
	return defaultHandler
}

// Encodings, in order of preference.
var encodings = []struct{ name, ext string }{{"br", ".br"}, {"gzip", ".gz"}}

// file is one servable file with its precompressed variants.
type file struct {
	name     string
	data     []byte
	hash     string            // short sha256 of data: the ?v= of versioned URLs and the ETag
	variants map[string][]byte // encoding → bytes
	ctype    string
}

type handler struct {
	files map[string]*file // by URL path, e.g. "/index.html", "/web/app.wasm"
	built bool
}

// New returns the handler for a generated tree: index.html at its root, static files under web/.
// A tree without index.html (a build without `make web`) answers every request with 503.
func New(fsys fs.FS) http.Handler {
	h := &handler{files: map[string]*file{}}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(data)
		h.files["/"+p] = &file{name: p, data: data, hash: hex.EncodeToString(sum[:6]), ctype: contentType(p)}
		return nil
	})
	// Attach precompressed siblings (app.wasm.br, app.wasm.gz) to their file and hide them.
	for p, f := range h.files {
		for _, enc := range encodings {
			if c, ok := h.files[p+enc.ext]; ok {
				if f.variants == nil {
					f.variants = map[string][]byte{}
				}
				f.variants[enc.name] = c.data
				delete(h.files, p+enc.ext)
			}
		}
	}
	_, h.built = h.files["/index.html"]
	return h
}

// notBuilt is the page of a binary built without the web app.
const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Porthole: web app not built</title></head>
<body><h1>web app not built: run make build</h1>
<p>This porthole binary was built without the web app (go build instead of <code>make build</code>).
The API under /api still works.</p></body></html>
`

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	if !h.built {
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(notBuilt))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	f, page := h.lookup(p)
	if f == nil {
		http.NotFound(w, r)
		return
	}

	data, etag := f.data, f.hash
	if f.variants != nil {
		hdr.Add("Vary", "Accept-Encoding")
		if enc := negotiate(r.Header.Get("Accept-Encoding"), f.variants); enc != "" {
			data, etag = f.variants[enc], f.hash+"-"+enc
			hdr.Set("Content-Encoding", enc)
		}
	}
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("ETag", `"`+etag+`"`)
	if !page && r.URL.Query().Get("v") == f.hash {
		// The URL names this exact content: it can never change.
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// index.html, app-worker.js, the manifest, go-app's scripts and unversioned URLs:
		// revalidate every time (a 304 when unchanged).
		hdr.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// lookup finds the file for a URL path; page reports a pre-rendered page (login.html, or the
// shell index.html) served for an app route.
func (h *handler) lookup(p string) (f *file, page bool) {
	if p == "/" || p == "/index.html" {
		return h.files["/index.html"], true
	}
	if p == "/favicon.ico" { // what browsers ask for when a page names no icon (the offline page, a PDF...)
		return h.files["/web/icon-192.png"], false
	}
	if f, ok := h.files[p]; ok {
		return f, false
	}
	// An app route (/agents/xyz, /login): no extension, not a static resource. Its own
	// pre-rendered page when the generator wrote one (/login.html), else the shell.
	if !strings.HasPrefix(p, "/web/") && !strings.Contains(path.Base(p), ".") {
		if f, ok := h.files[p+".html"]; ok {
			return f, true
		}
		return h.files["/index.html"], true
	}
	return nil, false
}

// negotiate picks the preferred encoding the client accepts (q > 0) among those available;
// "" means identity.
func negotiate(accept string, available map[string][]byte) string {
	q := map[string]float64{}
	for _, part := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		weight := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					weight = f
				}
			}
		}
		q[name] = weight
	}
	for _, enc := range encodings {
		if _, ok := available[enc.name]; !ok {
			continue
		}
		w, listed := q[enc.name]
		if !listed {
			w, listed = q["*"]
		}
		if listed && w > 0 {
			return enc.name
		}
	}
	return ""
}

// contentType returns the media type of a file of the app.
func contentType(name string) string {
	switch ext := path.Ext(name); ext {
	case ".wasm":
		return "application/wasm"
	case ".webmanifest":
		return "application/manifest+json"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json", ".map":
		return "application/json"
	case ".txt":
		return "text/plain; charset=utf-8"
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
		return "application/octet-stream"
	}
}
