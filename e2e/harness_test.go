package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/server"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// serveGateway runs server.New with cfg behind httptest until the test ends: SQLite in a
// temporary data dir and the helper binary built by TestMain unless cfg says otherwise. It
// fails (under CI=true) or skips when the binary was built without the web app.
func serveGateway(t testing.TB, cfg server.Config) *httptest.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.HelperPath == "" {
		cfg.HelperPath = portholeBin
	}
	if cfg.Surfaces == nil {
		cfg.Surfaces = []surface.Description{terminal.Surface, desktop.Surface} // as cmd/porthole lists them
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		ts.Close()
		cancel()
	})
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(body, []byte("web app not built")) {
		testenv.Missing(t, "the embedded web app: run make web before these tests")
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d %s, want 200", resp.StatusCode, body)
	}
	return ts
}

// apiCall does one JSON API request as a same-origin client and decodes the answer into out.
func apiCall(t testing.TB, hc *http.Client, base, method, path string, in any, want int, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// testWriter sends a gateway's log lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// launchChromium starts a headless Chromium with a fresh profile and returns its first tab's
// context; the browser ends at cleanup.
func launchChromium(t testing.TB) context.Context {
	t.Helper()
	path := testenv.LookPath(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root on CI machines
		chromedp.Flag("disable-gpu", true),
		// No GPU here: WebGL is SwiftShader. Asked for explicitly, Chromium does not warn about
		// its "automatic fallback" in the console (the app then keeps to xterm.js's DOM renderer).
		chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// appLoginFormJS holds once the WASM app's own login form has replaced the pre-rendered one:
// typing into the pre-rendered form races with that swap (its own test: TestAppLoginBeforeWasm).
const appLoginFormJS = `(() => { const f = document.getElementById("login-form"); return !!f && !f.closest("[data-prerendered]") })()`
