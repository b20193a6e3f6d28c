//go:build linux && !js

package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/browser/internal/cdpmux"
	"github.com/porthole/porthole/internal/testenv"
)

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchRounds is how many cold starts one benchmark run measures (make bench runs -benchtime 1x).
const benchRounds = 5

// BenchmarkBrowserColdStart: with the agent's helper running and its Chromium not, the time
// from a gateway's first CDP client to a first page loaded (newClient, Target.createTarget,
// attach, a data: page's load): the cold start a person or the agent's automation sees
// (target < 1.5 s). "first" is the very first start on a fresh profile; the p50 is over
// restarts on the kept profile.
func BenchmarkBrowserColdStart(b *testing.B) {
	coldStarts(b, "brbench", "start", func(b *testing.B, m *bridges.Manager, s *Service, a api.Agent) func() {
		return func() {
			c, err := s.newClient(context.Background(), a, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			tc := newCDPTestConn(b, c)
			sess := tc.openPage(b, "")
			tc.navigate(b, sess, "data:text/html,<title>first</title><p>first page</p>")
		}
	})
}

// coldStarts runs a browser cold start in a bwrap jail and in a container: for each round it
// stops the agent's helper, starts it again without Chromium (an exec), and times once(), which
// setup made for that agent's Service. It reports the very first start (a fresh profile) as
// first-ms and the later ones (the kept profile) as <unit>-ms-p50 and -max.
func coldStarts(b *testing.B, id, unit string, setup func(*testing.B, *bridges.Manager, *Service, api.Agent) func()) {
	for _, c := range []struct{ name, engine string }{{"bwrap", ""}, {"container", "engine"}} {
		b.Run(c.name, func(b *testing.B) {
			engine := ""
			if c.engine != "" {
				engine = testenv.Getenv(b, "PORTHOLE_TEST_ENGINE")
			}
			m := newBrowserManager(b, engine)
			s := browserService(b, m)
			s.cdpGrace, s.viewGrace = time.Millisecond, time.Millisecond
			a := jailAgentB(id, "alice", api.NetworkNone)
			if engine != "" {
				a = containerAgentB(id+"c", "alice")
			}
			once := setup(b, m, s, a)
			ctx := context.Background()
			var ds []time.Duration
			var first time.Duration
			for i := 0; i < max(b.N, benchRounds)+1; i++ {
				b.StopTimer()
				m.Stop(ctx, a.ID)
				sandboxSh(b, m, a, "true") // the helper runs; Chromium does not
				b.StartTimer()
				start := time.Now()
				once()
				d := time.Since(start)
				b.StopTimer()
				if i == 0 {
					first = d
				} else {
					ds = append(ds, d)
				}
			}
			b.ReportMetric(msOf(first), "first-ms")
			b.ReportMetric(msOf(p50(ds)), unit+"-ms-p50")
			b.ReportMetric(msOf(slices.Max(ds)), unit+"-ms-max")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkBrowserCDPRoundTrip: Runtime.evaluate("1+1") on a page of the agent's Chromium in a
// bwrap jail, through the gateway (a raw CDP WebSocket of the cdp route, the multiplexer, the
// helper stream) against direct (a CDP client on a helper stream of its own: the same Chromium,
// the same helper and yamux hop, no multiplexer and no WebSocket). Reports both p50s and the ratio.
func BenchmarkBrowserCDPRoundTrip(b *testing.B) {
	m := newBrowserManager(b, "")
	s := browserService(b, m)
	a := jailAgentB("brrtt", "alice", api.NetworkNone)
	ctx := context.Background()
	rounds := max(b.N, 500)

	// Through the gateway: the cdp route's handler behind a test server (the route's own code,
	// without the server's authentication in front).
	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		s.serveCDP(r.Context(), ws, a, Viewer{ID: "token:bench", Token: "bench", Conn: 1})
	}))
	defer ts.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	id := 0
	wsCall := func(method, session string, params any) json.RawMessage {
		id++
		msg := map[string]any{"id": id, "method": method, "params": params}
		if session != "" {
			msg["sessionId"] = session
		}
		if err := ws.WriteJSON(msg); err != nil {
			b.Fatal(err)
		}
		for {
			_, r, err := ws.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			var rep struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			json.Unmarshal(r, &rep)
			if rep.ID == id {
				if rep.Error != nil {
					b.Fatalf("%s: %s", method, rep.Error)
				}
				return rep.Result
			}
		}
	}
	var tgt struct{ TargetID string }
	json.Unmarshal(wsCall("Target.createTarget", "", map[string]any{"url": "about:blank"}), &tgt)
	var att struct{ SessionID string }
	json.Unmarshal(wsCall("Target.attachToTarget", "", map[string]any{"targetId": tgt.TargetID, "flatten": true}), &att)
	eval := map[string]any{"expression": "1+1", "returnByValue": true}
	for range 20 {
		wsCall("Runtime.evaluate", att.SessionID, eval)
	}
	var gw []time.Duration
	b.ResetTimer()
	for range rounds {
		start := time.Now()
		wsCall("Runtime.evaluate", att.SessionID, eval)
		gw = append(gw, time.Since(start))
	}
	b.StopTimer()
	ws.Close()

	// Direct: a helper stream of its own takes the browser over (the gateway's stream closes).
	st, err := m.Open(ctx, a, StreamKind)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	br := bufio.NewReaderSize(st, 64<<10)
	did := 0
	direct := func(method, session string, params any) json.RawMessage {
		did++
		msg := map[string]any{"id": did, "method": method, "params": params}
		if session != "" {
			msg["sessionId"] = session
		}
		raw, _ := json.Marshal(msg)
		if err := cdpmux.WriteMessage(st, raw); err != nil {
			b.Fatal(err)
		}
		for {
			r, err := cdpmux.ReadMessage(br, cdpmux.DefaultMaxMessage)
			if err != nil {
				b.Fatal(err)
			}
			var rep struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			json.Unmarshal(r, &rep)
			if rep.ID == did {
				if rep.Error != nil {
					b.Fatalf("%s: %s", method, rep.Error)
				}
				return rep.Result
			}
		}
	}
	json.Unmarshal(direct("Target.attachToTarget", "", map[string]any{"targetId": tgt.TargetID, "flatten": true}), &att)
	for range 20 {
		direct("Runtime.evaluate", att.SessionID, eval)
	}
	var dr []time.Duration
	for range rounds {
		start := time.Now()
		direct("Runtime.evaluate", att.SessionID, eval)
		dr = append(dr, time.Since(start))
	}
	g, d := p50(gw), p50(dr)
	b.ReportMetric(msOf(g), "gateway-ms-p50")
	b.ReportMetric(msOf(d), "direct-ms-p50")
	b.ReportMetric(float64(g)/float64(d), "x-direct")
	b.ReportMetric(0, "ns/op")
	fmt.Fprintf(os.Stderr, "cdp round trip p50: gateway %.3f ms, direct %.3f ms (%.2fx)\n", msOf(g), msOf(d), float64(g)/float64(d))
}
