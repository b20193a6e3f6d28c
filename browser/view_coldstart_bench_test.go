//go:build linux && !js

package browser

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// BenchmarkBrowserFirstFrame: with the agent's helper running and its Chromium not, the time
// from a person opening the Browser tab (a viewer's WebSocket on the live view) to the first
// screencast frame that viewer receives: Chromium's start in the sandbox, the view's CDP
// client, its first tab, the screencast and the relay (target < 1.5 s). "first" is the very
// first start on a fresh profile; the p50 is over restarts on the kept profile.
func BenchmarkBrowserFirstFrame(b *testing.B) {
	for _, c := range []struct{ name, engine string }{{"bwrap", ""}, {"container", "engine"}} {
		b.Run(c.name, func(b *testing.B) {
			engine := ""
			if c.engine != "" {
				engine = testenv.Getenv(b, "PORTHOLE_TEST_ENGINE")
			}
			m := newBrowserManager(b, engine)
			s := browserService(b, m)
			s.cdpGrace, s.viewGrace = time.Millisecond, time.Millisecond
			var a api.Agent
			if engine == "" {
				a = jailAgentB("brframe", "alice", api.NetworkNone)
			} else {
				a = containerAgentB("brframec", "alice")
			}
			base := viewServerFor(b, s, a)
			ctx := context.Background()
			var ds []time.Duration
			var first time.Duration
			for i := 0; i < max(b.N, benchRounds)+1; i++ {
				b.StopTimer()
				m.Stop(ctx, a.ID)
				sandboxSh(b, m, a, "true") // the helper runs; Chromium does not
				b.StartTimer()
				start := time.Now()
				v := dialViewer(b, base, "alice", "drive", false)
				v.wait(30*time.Second, "a first frame", func() bool { return len(v.frames) > 0 })
				d := time.Since(start)
				b.StopTimer()
				v.ws.Close()
				if i == 0 {
					first = d
				} else {
					ds = append(ds, d)
				}
			}
			b.ReportMetric(msOf(first), "first-ms")
			b.ReportMetric(msOf(p50(ds)), "frame-ms-p50")
			b.ReportMetric(msOf(slices.Max(ds)), "frame-ms-max")
			b.ReportMetric(0, "ns/op")
		})
	}
}
