//go:build !js

// Command gen pre-renders the web app into a static tree (assets/web): index.html, go-app's
// scripts, the manifest, the service worker, icons, and app.wasm precompressed with brotli and gzip.
//
// It runs after app.wasm is built into <out>/web/app.wasm and assets/static is copied to <out>/web.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/maxence-charriere/go-app/v10/pkg/app"
	porthole "github.com/porthole/porthole/app"
)

// required are the files the shell links; the build fails without them.
var required = []string{
	"/web/app.wasm", "/web/app.css", "/web/theme.js", "/web/wasm.js", "/web/offline.html", "/web/terminal.js",
	"/web/desktop.js", "/web/desktop.css",
	"/web/icon-192.png", "/web/icon-512.png", "/web/icon.svg",
	"/web/xterm/xterm.css", "/web/xterm/xterm.js", "/web/xterm/addon-fit.js",
	"/web/xterm/addon-webgl.js", "/web/xterm/addon-search.js",
}

// WasmBudget is the most app.wasm may weigh on the wire (compressed as a browser gets it).
const WasmBudget = 2 << 20

func main() {
	out := flag.String("out", "assets/web", "output directory (the tree assets embeds)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	web := filepath.Join(out, "web")
	wasmPath := filepath.Join(web, "app.wasm")
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return fmt.Errorf("read app.wasm (build it first): %w", err)
	}
	if err := writeIcons(web); err != nil {
		return err
	}
	gz, br, err := compress(wasmPath, wasm)
	if err != nil {
		return err
	}
	versions, err := hashTree(web)
	if err != nil {
		return err
	}
	// Drop what an earlier run generated, so removed routes do not linger.
	if err := cleanBefore(out); err != nil {
		return err
	}
	for _, p := range required {
		if _, ok := versions[p]; !ok {
			return fmt.Errorf("%s is missing from %s (copy assets/static and the xterm files first)", p, web)
		}
	}
	h := handler(versions)
	// Pre-render the static markup the user sees before the WASM app runs (and that it then
	// replaces): login.html is the real login form, index.html (served for every other app
	// path) the app shell: top bar and a loading state. Static markup only: no user data.
	wasmURL := versioned(versions).Resolve("/web/app.wasm")
	app.Route("/", func() app.Composer {
		return &boot{body: func() []app.UI {
			return []app.UI{&porthole.TopBar{}, app.Main().Class("page").Body(app.P().Class("loading").Text("Loading…"))}
		}}
	})
	app.Route("/login", func() app.Composer {
		return &boot{body: func() []app.UI { return []app.UI{&porthole.LoginPage{}} }}
	})
	if err := app.GenerateStaticWebsite(out, h); err != nil {
		return fmt.Errorf("generate static website: %w", err)
	}
	// assets serves login.html for /login and index.html for every other app path.
	if err := cleanAfter(out); err != nil {
		return err
	}
	for _, page := range []string{"index.html", "login.html"} {
		if err := checkPrerendered(filepath.Join(out, page)); err != nil {
			return err
		}
	}
	if err := earlyWasmCompile(filepath.Join(out, "app.js"), wasmURL); err != nil {
		return err
	}
	fmt.Printf("app.wasm transferred size: raw %s, gzip %s, brotli %s (budget %s compressed; version %s)\n",
		mb(len(wasm)), mb(gz), mb(br), mb(WasmBudget), h.Version)
	if min(gz, br) > WasmBudget {
		return fmt.Errorf("app.wasm is %s compressed, over the %s budget", mb(min(gz, br)), mb(WasmBudget))
	}
	return nil
}

func mb(n int) string { return fmt.Sprintf("%.2f MB", float64(n)/(1<<20)) }

// compress writes app.wasm.gz and app.wasm.br next to app.wasm, at the best ratio.
func compress(path string, data []byte) (gzSize, brSize int, err error) {
	var gzBuf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gzBuf, gzip.BestCompression)
	if _, err := zw.Write(data); err != nil {
		return 0, 0, fmt.Errorf("gzip app.wasm: %w", err)
	}
	if err := zw.Close(); err != nil {
		return 0, 0, fmt.Errorf("gzip app.wasm: %w", err)
	}
	var brBuf bytes.Buffer
	bw := brotli.NewWriterOptions(&brBuf, brotli.WriterOptions{Quality: brotli.BestCompression, LGWin: 24})
	if _, err := bw.Write(data); err != nil {
		return 0, 0, fmt.Errorf("brotli app.wasm: %w", err)
	}
	if err := bw.Close(); err != nil {
		return 0, 0, fmt.Errorf("brotli app.wasm: %w", err)
	}
	if err := os.WriteFile(path+".gz", gzBuf.Bytes(), 0o644); err != nil {
		return 0, 0, fmt.Errorf("write app.wasm.gz: %w", err)
	}
	if err := os.WriteFile(path+".br", brBuf.Bytes(), 0o644); err != nil {
		return 0, 0, fmt.Errorf("write app.wasm.br: %w", err)
	}
	return gzBuf.Len(), brBuf.Len(), nil
}

// hashTree maps every file under web (as its URL path "/web/...") to a short content hash.
func hashTree(web string) (map[string]string, error) {
	versions := map[string]string{}
	err := filepath.WalkDir(web, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(web, p)
		sum := sha256.Sum256(b)
		versions["/web/"+filepath.ToSlash(rel)] = hex.EncodeToString(sum[:6])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash %s: %w", web, err)
	}
	return versions, nil
}

// cleanBefore removes what an earlier run generated (all but web/ and .keep).
func cleanBefore(out string) error {
	return removeIf(out, func(name string, dir bool) bool { return name != "web" && name != ".keep" })
}

// cleanAfter removes the per-route pages go-app pre-renders: assets serves index.html for
// every app path, so only it is used.
func cleanAfter(out string) error {
	return removeIf(out, func(name string, dir bool) bool {
		if dir {
			return name != "web"
		}
		return strings.HasSuffix(name, ".html") && name != "index.html" && name != "login.html"
	})
}

// checkPrerendered fails when a page lost its pre-rendered markup (go-app's output changed).
func checkPrerendered(page string) error {
	b, err := os.ReadFile(page)
	if err != nil {
		return fmt.Errorf("read pre-rendered page: %w", err)
	}
	if !bytes.Contains(b, []byte(`data-prerendered`)) {
		return fmt.Errorf("%s has no pre-rendered markup (data-prerendered)", page)
	}
	return nil
}

func removeIf(out string, drop func(name string, dir bool) bool) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("clean %s: %w", out, err)
	}
	for _, e := range entries {
		if !drop(e.Name(), e.IsDir()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("clean %s: %w", out, err)
		}
	}
	return nil
}

// boot is the pre-rendered body of a page: static markup (data-prerendered) that the WASM app
// replaces with its own render of the URL's page once it runs. app.css hides go-app's
// full-screen loader when it is there, so the page shows at once.
//
// The page does not preload app.wasm: downloading and compiling it while the page loads
// delayed the page's own first paint (measured), and web/wasm.js starts both right after it.
type boot struct {
	app.Compo
	body func() []app.UI
}

func (b *boot) Render() app.UI {
	return app.Div().ID("boot").Class("boot").Attr("data-prerendered", true).Body(b.body()...)
}

// earlyWasmCompile makes go-app's app.js instantiate app.wasm through web/wasm.js
// (portholeInstantiate: a streamed compile once the page has painted) instead of its fetch
// through a JS stream that counts progress (a copy of the module). Without wasm.js it fetches
// app.wasm itself. The loading label shows no percentage.
func earlyWasmCompile(appJS, wasmURL string) error {
	b, err := os.ReadFile(appJS)
	if err != nil {
		return fmt.Errorf("read app.js: %w", err)
	}
	old := fmt.Sprintf("instantiateStreaming(\n      fetchWithProgress(%q, showProgress),\n      go.importObject\n    )", wasmURL)
	if n := strings.Count(string(b), old); n != 1 {
		return fmt.Errorf("app.js: found %q %d times, want once (did go-app change?)", old, n)
	}
	repl := fmt.Sprintf("(window.portholeInstantiate || ((u, i) => instantiateStreaming(fetch(u), i)))(%q, go.importObject)", wasmURL)
	b = []byte(strings.Replace(string(b), old, repl, 1))
	if err := os.WriteFile(appJS, b, 0o644); err != nil {
		return fmt.Errorf("write app.js: %w", err)
	}
	return nil
}

// versioned resolves /web/ paths to URLs carrying their content hash (?v=), which assets
// serves as immutable; anything else is returned as is.
type versioned map[string]string

func (v versioned) Resolve(p string) string {
	if h, ok := v[p]; ok {
		return p + "?v=" + h
	}
	return p
}

func (v versioned) url(p string) string {
	if _, ok := v[p]; !ok {
		panic(fmt.Sprintf("gen: %s is not in required", p)) // a programming error: run checks required
	}
	return v.Resolve(p)
}

// handler is the go-app configuration of the shell; Version changes with any file's content.
func handler(files map[string]string) *app.Handler {
	v := versioned(files)
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sum := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(sum, "%s=%s\n", k, files[k])
	}
	fmt.Fprintf(sum, "worker=%s\n", porthole.WorkerJS)
	version := hex.EncodeToString(sum.Sum(nil)[:8])

	styles := []string{v.url("/web/app.css"), v.url("/web/xterm/xterm.css")}
	if _, ok := files["/web/terminal.css"]; ok {
		styles = append(styles, v.url("/web/terminal.css"))
	}
	styles = append(styles, v.url("/web/desktop.css"))
	return &app.Handler{
		Name:            "Porthole",
		ShortName:       "Porthole",
		Title:           "Porthole",
		Description:     "Watch and drive your AI agents' terminals, desktops and browsers, each inside its own sandbox.",
		Lang:            "en",
		BackgroundColor: "#0f1318",
		ThemeColor:      "#0f1318",
		LoadingLabel:    "Loading Porthole…",
		Icon: app.Icon{
			Default:  v.url("/web/icon-192.png"),
			Large:    v.url("/web/icon-512.png"),
			Maskable: v.url("/web/icon-512.png"),
			SVG:      v.url("/web/icon.svg"),
		},
		Styles: styles,
		Scripts: []string{
			v.url("/web/wasm.js"),  // not deferred: starts compiling app.wasm right away
			v.url("/web/theme.js"), // not deferred: the theme applies before the first paint
			v.url("/web/xterm/xterm.js") + " defer",
			v.url("/web/xterm/addon-fit.js") + " defer",
			v.url("/web/xterm/addon-webgl.js") + " defer",
			v.url("/web/xterm/addon-search.js") + " defer",
			v.url("/web/terminal.js") + " defer",
			v.url("/web/desktop.js") + " defer", // also the desktop viewer's decoder worker
		},
		CacheableResources:    []string{v.url("/web/offline.html")},
		Env:                   map[string]string{"PORTHOLE_ICON": v.url("/web/icon-192.png")},
		Resources:             v,
		Version:               version,
		ServiceWorkerTemplate: porthole.WorkerJS,
	}
}
