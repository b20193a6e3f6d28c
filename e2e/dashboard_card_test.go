package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// sessionHeader is what a browser tab of g's logged-in user sends with a WebSocket upgrade:
// the gateway's own Origin and the session cookie.
func (g *gateway) sessionHeader() http.Header {
	u, _ := url.Parse(g.URL)
	h := http.Header{"Origin": {g.URL}}
	for _, ck := range g.client.Jar.Cookies(u) {
		h.Add("Cookie", ck.Name+"="+ck.Value)
	}
	return h
}

// wsURL is the ws:// address of path on the gateway.
func (g *gateway) wsURL(path string) string { return "ws" + strings.TrimPrefix(g.URL, "http") + path }

// dashboardCard follows one surface of one agent's card on a real /api/dashboard WebSocket
// (the admin's), as last sent.
type dashboardCard struct {
	agentID string
	surface api.Surface

	mu   sync.Mutex
	cond *sync.Cond
	card *api.DashboardAgent
	err  error // the dashboard connection's end
}

// watchDashboard opens the dashboard and follows agentID's card; its reader ends at cleanup.
func watchDashboard(t *testing.T, g *gateway, agentID string, surface api.Surface) *dashboardCard {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/dashboard"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the dashboard: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	d := &dashboardCard{agentID: agentID, surface: surface}
	d.cond = sync.NewCond(&d.mu)
	go d.read(ws) // owner: the test; ends when the dashboard's connection closes (cleanup)
	return d
}

func (d *dashboardCard) read(ws *websocket.Conn) {
	for {
		_, b, err := ws.ReadMessage()
		var m api.DashboardMessage
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		d.mu.Lock()
		if err != nil {
			d.err = err
			d.cond.Broadcast()
			d.mu.Unlock()
			return
		}
		switch m.Type {
		case api.DashSnapshot:
			for i := range m.Agents {
				if m.Agents[i].ID == d.agentID {
					d.card = &m.Agents[i]
				}
			}
		case api.DashAgent:
			if m.Agent.ID == d.agentID {
				d.card = m.Agent
			}
		}
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}

// surfaceLocked is the followed surface on the card as last sent.
func (d *dashboardCard) surfaceLocked() (api.DashboardSurface, bool) {
	if d.card == nil {
		return api.DashboardSurface{}, false
	}
	for _, s := range d.card.Surfaces {
		if s.Surface == d.surface {
			return s, true
		}
	}
	return api.DashboardSurface{}, false
}

// wait returns the followed surface once ok holds for it, failing t after dur.
func (d *dashboardCard) wait(t *testing.T, what string, dur time.Duration, ok func(api.DashboardSurface) bool) api.DashboardSurface {
	t.Helper()
	deadline := time.Now().Add(dur)
	wake := time.AfterFunc(dur, func() { d.mu.Lock(); d.cond.Broadcast(); d.mu.Unlock() })
	defer wake.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if s, found := d.surfaceLocked(); found && ok(s) {
			return s
		}
		if d.err != nil || time.Now().After(deadline) {
			s, _ := d.surfaceLocked()
			t.Fatalf("dashboard: waiting for %s: %v (the %s surface shows %d sessions, %d image bytes)", what, d.err, d.surface, s.Sessions, len(s.Image))
		}
		d.cond.Wait()
	}
}
