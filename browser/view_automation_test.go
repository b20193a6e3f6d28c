//go:build linux && !js

package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// TestViewAutomatingChromium: "agent automating" end to end, on a real Chromium behind the
// helper stream and the gateway's multiplexer. While a live viewer watches, the agent opens
// the raw CDP WebSocket of the cdp route (serveCDP, as /api/agents/:id/browser/cdp does with
// the agent's token): the viewer's Control says Automating, the tab the automation opens is
// the one the viewer sees, and when the automation disconnects Control says it no longer is.
func TestViewAutomatingChromium(t *testing.T) {
	s := NewService(Config{Logger: cdpTestLogger(t)}, inProcessHelper(t))
	t.Cleanup(s.Close)
	agent := api.Agent{ID: "a1", OwnerID: "owner"}
	base := viewServerFor(t, s, agent)
	v := dialViewer(t, base, "owner", "drive", false)
	v.wait(60*time.Second, "control and tabs", func() bool { return v.last[OpControl] != nil && v.last[OpTabs] != nil })
	automating := func(on bool) func() bool {
		return func() bool { c, _ := v.last[OpControl].(Control); return c.Automating == on }
	}
	v.mu.Lock()
	before := automating(false)()
	v.mu.Unlock()
	if !before {
		t.Fatal("the viewer sees the agent automating before any automation connection")
	}

	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		s.serveCDP(r.Context(), ws, agent, Viewer{ID: "token:t1", Name: "owner (agent token)", Token: "t1", Conn: 99})
	}))
	t.Cleanup(ts.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := ws.WriteJSON(map[string]any{"id": 1, "method": "Target.createTarget",
		"params": map[string]any{"url": "data:text/html,<title>opened by the agent</title>"}}); err != nil {
		t.Fatal(err)
	}
	for {
		var r struct {
			ID    int64
			Error any
		}
		if err := ws.ReadJSON(&r); err != nil {
			t.Fatalf("the automation's createTarget: %v", err)
		}
		if r.ID == 1 {
			if r.Error != nil {
				t.Fatalf("the automation's createTarget: %v", r.Error)
			}
			break
		}
	}
	v.wait(10*time.Second, "Control with Automating", automating(true))
	v.wait(20*time.Second, "the automation's tab, shown", v.tabTitle("opened by the agent"))

	ws.Close()
	v.wait(10*time.Second, "Control without Automating", automating(false))
}
