//go:build !js

package app_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestWasmMainIsClientOnly: app.wasm must not link the gateway, the backends or the
// desktop/browser drivers (they are megabytes, and server code has no business in a browser).
func TestWasmMainIsClientOnly(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "github.com/porthole/porthole/app/cmd/wasm")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps (js/wasm): %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"github.com/porthole/porthole/server",
		"github.com/porthole/porthole/bridges",
		"github.com/porthole/porthole/assets",
		"github.com/chromedp/",
		"github.com/go-vgo/robotgo",
		"github.com/labstack/echo",
		"modernc.org/sqlite",
		"github.com/jackc/pgx",
		"github.com/creack/pty",
		"github.com/hashicorp/yamux",
		"github.com/moby/",
		"github.com/gorilla/websocket", // the gateway half of terminal; the browser has its own WebSocket
		// Capture and JPEG encoding (cgo, X11): the helper's, not the browser's. (desktop/internal/palette,
		// the lossless region codec, is pure Go and decoded in the browser too.)
		"github.com/porthole/porthole/desktop/internal/x11cap",
		"github.com/porthole/porthole/desktop/internal/tjpeg",
		// net/http links crypto/tls and, through initialisers the linker keeps, every curve and
		// cipher: 1.6 MB raw of app.wasm. The app uses fetch (third_party/go-app/PORTHOLE.md).
		"net/http",
		"crypto/tls",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("app.wasm links %s (matches %s)", d, f)
			}
		}
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages, want the whole graph: %q", len(deps), out)
	}
}
