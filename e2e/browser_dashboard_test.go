package e2e

import (
	"bytes"
	"encoding/base64"
	"image/jpeg"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	pbrowser "github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/internal/testenv"
)

// TestBrowserOnDashboard: the agent's browser on the household dashboard. A real gateway,
// the agent's Chromium in its bwrap jail: before anyone opens the browser the dashboard shows
// no browser session and no thumbnail; while a person watches a red page in the live view,
// the dashboard's WebSocket shows one browser session and a JPEG thumbnail (at most 320 px
// wide) of that red page within seconds; once the agent is stopped, neither.
func TestBrowserOnDashboard(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "chromium")
	g := startBrowserGateway(t)
	agent := g.createAgent(t, "e2e-dash-browser")

	// The dashboard: follow the agent's card as last sent.
	dash := watchDashboard(t, g, agent.ID, api.SurfaceBrowser)
	idle := dash.wait(t, "the agent's card", 10*time.Second, func(api.DashboardSurface) bool { return true })
	if idle.Sessions != 0 || idle.Image != "" {
		t.Fatalf("before the browser was opened: %d sessions, image %.40q; want none", idle.Sessions, idle.Image)
	}

	// A person opens the agent's browser and shows a red page.
	vws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/agents/"+agent.ID+"/browser"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the browser view: %v", err)
	}
	t.Cleanup(func() { vws.Close() })
	var vmu sync.Mutex // the viewer's one writer at a time
	send := func(m pbrowser.Message) {
		vmu.Lock()
		defer vmu.Unlock()
		vws.WriteMessage(websocket.BinaryMessage, pbrowser.Encode(m))
	}
	frames := make(chan int, 1)
	go func() { // owner: this test; ends when the view's connection closes (cleanup)
		n := 0
		for {
			_, b, err := vws.ReadMessage()
			if err != nil {
				return
			}
			m, err := pbrowser.Decode(b)
			if err != nil {
				continue
			}
			switch m := m.(type) {
			case pbrowser.Frame:
				n++
				send(pbrowser.Ack{Seq: m.Seq})
				select {
				case frames <- n:
				default:
				}
			case pbrowser.ErrorMsg:
				t.Logf("browser view error: %s", m.Message)
			}
		}
	}()
	send(pbrowser.Resize{W: 1280, H: 800})
	send(pbrowser.TakeControl{})
	select {
	case <-frames:
	case <-time.After(90 * time.Second):
		t.Fatal("no frame from the agent's browser in 90 s")
	}
	send(pbrowser.Navigate{URL: "data:text/html,<body style='margin:0;background:%23d00000'><h1>red</h1></body>"})

	red := func(s api.DashboardSurface) bool {
		const prefix = "data:image/jpeg;base64,"
		if s.Sessions != 1 || !strings.HasPrefix(s.Image, prefix) {
			return false
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Image, prefix))
		if err != nil {
			return false
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			return false
		}
		bd := img.Bounds()
		r, g, bl, _ := img.At(bd.Dx()/2, bd.Dy()-2).RGBA()
		return bd.Dx() <= 320 && bd.Dy() <= 320 && r>>8 > 150 && g>>8 < 80 && bl>>8 < 80
	}
	start := time.Now()
	s := dash.wait(t, "one browser session and a red thumbnail", 30*time.Second, red)
	b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Image, "data:image/jpeg;base64,"))
	cfg, _ := jpeg.DecodeConfig(bytes.NewReader(b))
	t.Logf("dashboard: browser %d session, thumbnail %d×%d, %d bytes, %v after the navigation; active %v",
		s.Sessions, cfg.Width, cfg.Height, len(b), time.Since(start).Round(time.Millisecond), s.Active.Format(time.RFC3339))
	if s.Active.IsZero() {
		t.Error("the browser surface has no Active time while frames arrive")
	}

	// The agent is stopped (its backend changed): its browser goes, and with it the session
	// and the thumbnail, without waiting for the view's grace period.
	backend := api.Backend{Type: api.BackendBwrap, Network: api.NetworkFull}
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Backend: &backend}, http.StatusOK, nil)
	dash.wait(t, "no browser session after the agent stopped", 10*time.Second, func(s api.DashboardSurface) bool {
		return s.Sessions == 0 && s.Image == ""
	})
}
