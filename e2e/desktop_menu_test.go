package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// TestDesktopRootMenuOpensTerminal: on a bwrap agent's display, a click on the background
// opens the window manager's root menu, and its Terminal item starts an xterm inside the
// agent's sandbox (driven through the computer-use API, checked with ps in the sandbox).
func TestDesktopRootMenuOpensTerminal(t *testing.T) {
	testenv.LookPath(t, "openbox")
	testenv.LookPath(t, "xterm")
	cu := startComputerUse(t, "e2e-desktop-menu")
	xterms := func() int {
		var out api.ExecResult
		cu.g.call(t, "POST", "/api/agents/"+cu.agent.ID+"/exec", sh(`ps -eo comm= | grep -cx xterm || true`), http.StatusOK, &out)
		n, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
		if err != nil {
			t.Fatalf("counting xterms in the sandbox: %q %q", out.Stdout, out.Stderr)
		}
		return n
	}
	if n := xterms(); n != 0 {
		t.Fatalf("%d xterms before the menu was used, want 0", n)
	}
	// The background, away from the test's xev window.
	x, y := cu.full.Max.X-80, cu.full.Max.Y-80
	cu.act(t, desktop.Action{Action: "left_click", Coordinate: []int{x, y}})
	cu.act(t, desktop.Action{Action: "key", Text: "Down"})
	cu.act(t, desktop.Action{Action: "key", Text: "Return"})
	deadline := time.Now().Add(20 * time.Second)
	for xterms() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no xterm in the sandbox 20 s after choosing the root menu's Terminal")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
