//go:build !js

package terminal

import (
	"strings"
	"testing"
)

// TestTerminalSeesAgentDisplay: a shell in a terminal of a real bwrap jail has DISPLAY=:0, the
// agent's own display (its jail's /tmp/.X11-unix), so X programs started there appear on the
// agent's desktop; the gateway's own DISPLAY does not leak in.
func TestTerminalSeesAgentDisplay(t *testing.T) {
	t.Setenv("DISPLAY", ":42")
	srv := newTestServer(t, Config{}, newJail(t).Open)
	c := dial(t, srv, "a1", "alice", "drive")
	id := c.open(80, 24)
	out := c.run(id, `echo "DISPLAY=[$DISPLAY]"`)
	if !strings.Contains(out, "DISPLAY=[:0]\r\n") {
		t.Errorf("echo $DISPLAY in a terminal printed %q, want DISPLAY=[:0]", out)
	}
}
