//go:build linux && !js

package browser

import (
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

// BenchmarkBrowserFirstFrame: with the agent's helper running and its Chromium not, the time
// from a person opening the Browser tab (a viewer's WebSocket on the live view) to the first
// screencast frame that viewer receives: Chromium's start in the sandbox, the view's CDP
// client, its first tab, the screencast and the relay (target < 1.5 s). "first" is the very
// first start on a fresh profile; the p50 is over restarts on the kept profile.
func BenchmarkBrowserFirstFrame(b *testing.B) {
	coldStarts(b, "brframe", "frame", func(b *testing.B, m *bridges.Manager, s *Service, a api.Agent) func() {
		base := viewServerFor(b, s, a)
		return func() {
			v := dialViewer(b, base, "alice", "drive", false)
			v.wait(30*time.Second, "a first frame", func() bool { return len(v.frames) > 0 })
			v.ws.Close()
		}
	})
}
