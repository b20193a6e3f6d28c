package assets

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/andybalholm/brotli"
	"github.com/porthole/porthole/internal/testenv"
)

// fakeTree is a generated tree in miniature: app.wasm with real brotli and gzip siblings.
func fakeTree(t *testing.T) (fstest.MapFS, []byte) {
	t.Helper()
	wasm := bytes.Repeat([]byte("\x00asm fake module "), 4096)
	var gz, br bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(wasm)
	zw.Close()
	bw := brotli.NewWriter(&br)
	bw.Write(wasm)
	bw.Close()
	return fstest.MapFS{
		".keep":                {Data: nil},
		"index.html":           {Data: []byte("<!doctype html><title>Porthole</title>")},
		"app.js":               {Data: []byte("// app")},
		"app-worker.js":        {Data: []byte("// worker")},
		"manifest.webmanifest": {Data: []byte(`{"name":"Porthole"}`)},
		"web/app.css":          {Data: []byte("body{}")},
		"web/app.wasm":         {Data: wasm},
		"web/app.wasm.gz":      {Data: gz.Bytes()},
		"web/app.wasm.br":      {Data: br.Bytes()},
		"web/icon-192.png":     {Data: []byte("\x89PNG fake")},
		"web/xterm/xterm.js":   {Data: []byte("// xterm")},
	}, wasm
}

func get(t testing.TB, h http.Handler, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func decode(t *testing.T, enc string, body io.Reader) []byte {
	t.Helper()
	var r io.Reader = body
	switch enc {
	case "br":
		r = brotli.NewReader(body)
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			t.Fatalf("gzip body: %v", err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decode %s body: %v", enc, err)
	}
	return b
}

func TestWasmEncodingNegotiation(t *testing.T) {
	tree, wasm := fakeTree(t)
	h := New(tree)
	tests := []struct {
		accept string
		want   string // Content-Encoding
	}{
		{"gzip, deflate, br, zstd", "br"}, // Chromium
		{"br", "br"},
		{"gzip", "gzip"},
		{"gzip, br;q=0", "gzip"},
		{"br;q=0, gzip;q=0", ""},
		{"deflate", ""},
		{"", ""},
		{"*", "br"},
		{"*;q=0, gzip", "gzip"},
		{"GZIP;Q=0.5", "gzip"},
		{"identity", ""},
	}
	for _, tt := range tests {
		resp := get(t, h, "/web/app.wasm", "Accept-Encoding", tt.accept)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET app.wasm (Accept-Encoding %q): status %d", tt.accept, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Encoding"); got != tt.want {
			t.Errorf("Accept-Encoding %q: Content-Encoding = %q, want %q", tt.accept, got, tt.want)
		}
		if got := resp.Header.Get("Vary"); got != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary = %q, want Accept-Encoding", tt.accept, got)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/wasm" {
			t.Errorf("Accept-Encoding %q: Content-Type = %q, want application/wasm", tt.accept, got)
		}
		if got := decode(t, tt.want, resp.Body); !bytes.Equal(got, wasm) {
			t.Errorf("Accept-Encoding %q: decoded body (%d bytes) differs from app.wasm (%d bytes)", tt.accept, len(got), len(wasm))
		}
	}
}

func TestCacheHeaders(t *testing.T) {
	tree, _ := fakeTree(t)
	h := New(tree)
	cssHash := New(tree).(*handler).files["/web/app.css"].hash
	tests := []struct {
		path      string
		wantCache string
		wantType  string
	}{
		{"/", "no-cache", "text/html; charset=utf-8"},
		{"/index.html", "no-cache", "text/html; charset=utf-8"},
		{"/app-worker.js", "no-cache", "text/javascript; charset=utf-8"},
		{"/manifest.webmanifest", "no-cache", "application/manifest+json"},
		{"/web/app.css", "no-cache", "text/css; charset=utf-8"},
		{"/web/app.css?v=" + cssHash, "public, max-age=31536000, immutable", "text/css; charset=utf-8"},
		{"/web/app.css?v=0123456789ab", "no-cache", "text/css; charset=utf-8"}, // a stale version must not be pinned
		{"/web/icon-192.png", "no-cache", "image/png"},
		{"/web/xterm/xterm.js", "no-cache", "text/javascript; charset=utf-8"},
		{"/agents/abc123", "no-cache", "text/html; charset=utf-8"}, // SPA route
		{"/login", "no-cache", "text/html; charset=utf-8"},
	}
	for _, tt := range tests {
		resp := get(t, h, tt.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tt.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Cache-Control"); got != tt.wantCache {
			t.Errorf("GET %s: Cache-Control = %q, want %q", tt.path, got, tt.wantCache)
		}
		if got := resp.Header.Get("Content-Type"); got != tt.wantType {
			t.Errorf("GET %s: Content-Type = %q, want %q", tt.path, got, tt.wantType)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options = %q, want nosniff", tt.path, got)
		}
	}
}

func TestWasmVersionedIsImmutableAndRevalidates(t *testing.T) {
	tree, _ := fakeTree(t)
	h := New(tree)
	hash := h.(*handler).files["/web/app.wasm"].hash
	resp := get(t, h, "/web/app.wasm?v="+hash, "Accept-Encoding", "br")
	if got, want := resp.Header.Get("Cache-Control"), "public, max-age=31536000, immutable"; got != want {
		t.Errorf("versioned app.wasm: Cache-Control = %q, want %q", got, want)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("app.wasm has no ETag")
	}
	// The gzip representation must not share the brotli one's ETag.
	if g := get(t, h, "/web/app.wasm", "Accept-Encoding", "gzip").Header.Get("ETag"); g == etag {
		t.Errorf("br and gzip representations share ETag %s", etag)
	}
	resp = get(t, h, "/web/app.wasm", "Accept-Encoding", "br", "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match %s: status %d, want 304", etag, resp.StatusCode)
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	tree, _ := fakeTree(t)
	h := New(tree)
	for _, p := range []string{"/web/missing.js", "/favicon.png", "/web/app.wasm.br", "/web/app.wasm.gz", "/web/agents"} {
		if resp := get(t, h, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, resp.StatusCode)
		}
	}
	// /favicon.ico, which browsers ask for on their own, is the app's icon.
	if resp := get(t, h, "/favicon.ico"); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("GET /favicon.ico: status %d type %q, want the icon", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", rec.Code)
	}
	// Path tricks stay inside the tree.
	if resp := get(t, h, "/web/../index.html"); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET /web/../index.html: status %d type %q, want the shell", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestNotBuilt(t *testing.T) {
	h := New(fstest.MapFS{".keep": {Data: nil}})
	for _, p := range []string{"/", "/login", "/web/app.wasm"} {
		resp := get(t, h, p)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET %s on an unbuilt tree: status %d, want 503", p, resp.StatusCode)
		}
		if !strings.Contains(string(body), "web app not built: run make build") {
			t.Errorf("GET %s on an unbuilt tree: body %q lacks the hint", p, body)
		}
	}
}

// builtTree returns the embedded tree, or handles its absence (a build without `make web`).
func builtTree(t testing.TB) fs.FS {
	t.Helper()
	sub, err := fs.Sub(web, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(sub, "index.html"); err != nil {
		testenv.Missing(t, "the embedded web app (run make web first): %v", err)
	}
	return sub
}

// TestEmbeddedWasmBudget reads the real app.wasm through Handler() as Chromium asks for it.
func TestEmbeddedWasmBudget(t *testing.T) {
	tree := builtTree(t)
	raw, err := fs.ReadFile(tree, "web/app.wasm")
	if err != nil {
		t.Fatalf("embedded app.wasm: %v", err)
	}
	for _, tt := range []struct{ accept, want string }{{"gzip, deflate, br, zstd", "br"}, {"gzip", "gzip"}} {
		resp := get(t, Handler(), "/web/app.wasm", "Accept-Encoding", tt.accept)
		wire, _ := io.ReadAll(resp.Body)
		if got := resp.Header.Get("Content-Encoding"); got != tt.want {
			t.Fatalf("Accept-Encoding %q: Content-Encoding = %q, want %q", tt.accept, got, tt.want)
		}
		if got := decode(t, tt.want, bytes.NewReader(wire)); !bytes.Equal(got, raw) {
			t.Errorf("%s app.wasm does not decode to the embedded app.wasm", tt.want)
		}
		t.Logf("app.wasm over the wire with %s: %d bytes (%.2f MB; raw %.2f MB)", tt.want, len(wire), float64(len(wire))/(1<<20), float64(len(raw))/(1<<20))
		if tt.want == "br" && len(wire) > 2<<20 {
			t.Errorf("app.wasm transferred with brotli = %d bytes, want ≤ 2 MB (%d)", len(wire), 2<<20)
		}
	}
}
