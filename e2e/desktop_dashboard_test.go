package e2e

import (
	"bytes"
	"encoding/base64"
	"image/jpeg"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// TestDesktopOnDashboard: the agent's desktop on the household dashboard. A real gateway,
// the agent's Xvfb in its bwrap jail: before anyone opens the desktop the dashboard shows no
// desktop session and no thumbnail; while a person watches, with a magenta xterm at the
// display's top left, the dashboard's WebSocket shows one desktop session and a JPEG thumbnail
// (at most 320 px) with that magenta window within seconds; once the agent is stopped, neither.
func TestDesktopOnDashboard(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xterm")
	g := startBrowserGateway(t)
	agent := g.createAgent(t, "e2e-dash-desktop")
	requireDesktopSurface(t, g, agent.ID)

	// The dashboard: follow the agent's card as last sent.
	dash := watchDashboard(t, g, agent.ID, api.SurfaceDesktop)
	idle := dash.wait(t, "the agent's card", 10*time.Second, func(api.DashboardSurface) bool { return true })
	if idle.Sessions != 0 || idle.Image != "" {
		t.Fatalf("before the desktop was opened: %d sessions, image %.40q; want none", idle.Sessions, idle.Image)
	}

	// A person opens the agent's desktop (a viewer that acknowledges every frame).
	vws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/agents/"+agent.ID+"/desktop"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the desktop view: %v", err)
	}
	t.Cleanup(func() { vws.Close() })
	frames := make(chan int, 1)
	go func() { // owner: this test; ends when the view's connection closes (cleanup); the only writer
		n := 0
		for {
			_, b, err := vws.ReadMessage()
			if err != nil {
				return
			}
			m, err := desktop.Decode(b)
			if err != nil {
				continue
			}
			if fe, ok := m.(desktop.FrameEnd); ok {
				n++
				vws.WriteMessage(websocket.BinaryMessage, desktop.Encode(desktop.Ack{Seq: fe.Seq}))
				select {
				case frames <- n:
				default:
				}
			}
		}
	}()
	select {
	case <-frames:
	case <-time.After(90 * time.Second):
		t.Fatal("no frame from the agent's desktop in 90 s")
	}

	magenta := func(s api.DashboardSurface) bool {
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
		r, g, bl, _ := img.At(bd.Min.X+12, bd.Min.Y+12).RGBA()
		return bd.Dx() <= 320 && bd.Dy() <= 320 && r>>8 > 180 && g>>8 < 80 && bl>>8 > 180
	}
	// The xterm runs until the subtest ends (before the agent is stopped).
	t.Run("magenta xterm", func(t *testing.T) {
		startXterm(t, g, agent.ID, "sleep 600")
		start := time.Now()
		s := dash.wait(t, "one desktop session and a thumbnail with the magenta xterm", 30*time.Second, magenta)
		b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Image, "data:image/jpeg;base64,"))
		cfg, _ := jpeg.DecodeConfig(bytes.NewReader(b))
		t.Logf("dashboard: desktop %d session, thumbnail %d×%d, %d bytes, %v after the xterm started; active %v",
			s.Sessions, cfg.Width, cfg.Height, len(b), time.Since(start).Round(time.Millisecond), s.Active.Format(time.RFC3339))
		if s.Active.IsZero() {
			t.Error("the desktop surface has no Active time while frames arrive")
		}
	})

	// The agent is stopped (its backend changed): its desktop goes, and with it the session
	// and the thumbnail.
	backend := api.Backend{Type: api.BackendBwrap, Network: api.NetworkFull}
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Backend: &backend}, http.StatusOK, nil)
	dash.wait(t, "no desktop session after the agent stopped", 10*time.Second, func(s api.DashboardSurface) bool {
		return s.Sessions == 0 && s.Image == ""
	})
}
