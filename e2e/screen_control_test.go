package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	pbrowser "github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// screenViewer is one person's viewer WebSocket on an agent's desktop or browser, reduced to
// what control is about: its own wire id, the latest Control and the errors it was sent.
type screenViewer struct {
	name string
	ws   *websocket.Conn
	wmu  sync.Mutex // one writer at a time

	mu         sync.Mutex
	me         string
	holderID   string
	holderName string
	errs       []string
}

// dialScreen opens c's viewer WebSocket on the agent's surface and reads it until cleanup.
func dialScreen(t *testing.T, c *gateway, agentID string, sf api.Surface, name string) *screenViewer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(c.wsURL("/api/agents/"+agentID+"/"+string(sf)), c.sessionHeader())
	if err != nil {
		t.Fatalf("%s: dial the %s: %v", name, sf, err)
	}
	v := &screenViewer{name: name, ws: ws}
	t.Cleanup(func() { ws.Close() })
	go func() { // owner: this test; ends when the connection closes (cleanup)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			v.mu.Lock()
			if sf == api.SurfaceDesktop {
				switch m, _ := desktop.Decode(b); m := m.(type) {
				case desktop.Hello:
					v.me = m.ViewerID
				case desktop.Control:
					v.holderID, v.holderName = m.HolderID, m.HolderName
				case desktop.ErrorMsg:
					v.errs = append(v.errs, m.Message)
				}
			} else {
				switch m, _ := pbrowser.Decode(b); m := m.(type) {
				case pbrowser.Hello:
					v.me = m.ViewerID
				case pbrowser.Control:
					v.holderID, v.holderName = m.HolderID, m.HolderName
				case pbrowser.ErrorMsg:
					v.errs = append(v.errs, m.Message)
				case pbrowser.Frame:
					go v.send(pbrowser.Encode(pbrowser.Ack{Seq: m.Seq}))
				}
			}
			v.mu.Unlock()
		}
	}()
	v.wait(t, "its Hello", 90*time.Second, func() bool { return v.me != "" })
	return v
}

func (v *screenViewer) send(frame []byte) {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	v.ws.WriteMessage(websocket.BinaryMessage, frame)
}

// wait polls ok (called with v.mu held) until it holds.
func (v *screenViewer) wait(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		v.mu.Lock()
		done := ok()
		st := v.holderID + " (" + v.holderName + "), errors " + strings.Join(v.errs, " | ")
		v.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s in %v; control %s", v.name, what, d, st)
		}
	}
}

// holds waits until Control names the connection of h (nil: nobody).
func (v *screenViewer) holds(t *testing.T, h *screenViewer) {
	t.Helper()
	want, what := "", "nobody in control"
	if h != nil {
		want, what = h.me, h.name+" in control"
	}
	v.wait(t, what, 10*time.Second, func() bool { return v.holderID == want })
}

// erred waits for an error that contains all of parts.
func (v *screenViewer) erred(t *testing.T, parts ...string) {
	t.Helper()
	v.wait(t, "error with "+strings.Join(parts, ", "), 10*time.Second, func() bool {
		for _, e := range v.errs {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(e, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// TestScreenControlSharedByDesktopAndBrowser: an agent's desktop and browser have one driver
// at a time (the browser is headed on that desktop). A real gateway, the agent's Xvfb and
// Chromium in its bwrap jail; bob (the agent is shared with him at drive) and the owner
// (admin) on raw viewer WebSockets; the agent's own automation on the CDP route and the
// computer-use API with its token.
func TestScreenControlSharedByDesktopAndBrowser(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "chromium")
	g := startBrowserGateway(t)
	agent := g.createAgent(t, "e2e-handoff")
	share := api.LevelDrive
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
	bob := g.addUser(t, "bob")
	var tok api.Token
	g.call(t, "POST", "/api/agents/"+agent.ID+"/tokens", nil, http.StatusCreated, &tok)
	act := func(what string) (int, string) {
		code, b := desktopReq(t, g, nil, tok.Secret, "POST", "/api/agents/"+agent.ID+"/desktop/actions",
			desktop.Action{Action: "mouse_move", Coordinate: []int{5, 5}})
		t.Logf("computer-use mouse_move (%s): %d %s", what, code, strings.TrimSpace(string(b)))
		return code, string(b)
	}

	// Bob takes control of the desktop.
	bobDesk := dialScreen(t, bob, agent.ID, api.SurfaceDesktop, "bob's desktop")
	bobDesk.send(desktop.Encode(desktop.TakeControl{}))
	bobDesk.holds(t, bobDesk)

	// The agent's automation of its browser may not send input meanwhile: one driver.
	wsURL := g.wsURL("/api/agents/" + agent.ID + "/browser/cdp")
	actx, acancel := remote.NewAllocator(context.Background(), wsURL, remote.NoModifyURL,
		remote.WithDialHTTPHeader(http.Header{"Authorization": {"Bearer " + tok.Secret}}))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("automation: %v", err)
	}
	click := func() error {
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		return chromedp.Do(ctx, chromedp.MouseClickXY(3, 3))
	}
	if err := click(); err == nil || !strings.Contains(err.Error(), "bob has taken control") {
		t.Errorf("automation click while bob drives the desktop: %v, want refused naming bob", err)
	}

	// The owner opens the browser: bob holds control there too, on his desktop connection.
	ownerBrow := dialScreen(t, g, agent.ID, api.SurfaceBrowser, "owner's browser")
	ownerBrow.holds(t, bobDesk)
	ownerBrow.send(pbrowser.Encode(pbrowser.Pointer{X: 1, Y: 1}))
	ownerBrow.erred(t, "bob (on the desktop) holds control")

	// Bob opens the browser too and takes it: the same person, so he keeps the desktop.
	bobBrow := dialScreen(t, bob, agent.ID, api.SurfaceBrowser, "bob's browser")
	bobBrow.send(pbrowser.Encode(pbrowser.TakeControl{}))
	bobBrow.holds(t, bobBrow)
	ownerBrow.holds(t, bobBrow)
	time.Sleep(200 * time.Millisecond)
	bobDesk.holds(t, bobDesk)

	// A third person is refused on either surface; the owner takes it back from both.
	carol := g.addUser(t, "carol")
	carolDesk := dialScreen(t, carol, agent.ID, api.SurfaceDesktop, "carol's desktop")
	carolDesk.send(desktop.Encode(desktop.TakeControl{}))
	carolDesk.erred(t, "bob holds control of this agent's desktop")
	ownerBrow.send(pbrowser.Encode(pbrowser.TakeControl{}))
	ownerBrow.holds(t, ownerBrow)
	bobBrow.holds(t, ownerBrow)
	bobDesk.holds(t, ownerBrow) // on the desktop: the owner, through their browser connection
	carolDesk.holds(t, ownerBrow)
	bobDesk.send(desktop.Encode(desktop.Pointer{X: 2, Y: 2}))
	bobDesk.erred(t, "(on the agent's browser) holds control")
	bobDesk.send(desktop.Encode(desktop.TakeControl{}))
	bobDesk.erred(t, "holds control of this agent's browser")
	if code, body := act("the owner drives the browser"); code != http.StatusConflict || !strings.Contains(body, "on the agent's browser") {
		t.Errorf("computer-use input while the owner drives the browser = %d %s, want 409 naming them", code, body)
	}

	// The owner releases: nobody holds control anywhere; the agent's input goes through again.
	ownerBrow.send(pbrowser.Encode(pbrowser.ReleaseControl{}))
	ownerBrow.holds(t, nil)
	bobDesk.holds(t, nil)
	if err := click(); err != nil {
		t.Errorf("automation click once nobody drives: %v", err)
	}
	if code, body := act("nobody drives"); code != http.StatusOK {
		t.Errorf("computer-use input once nobody drives = %d %s, want 200", code, body)
	}
	// And bob may take the desktop again; a viewer that leaves gives control up everywhere.
	bobDesk.send(desktop.Encode(desktop.TakeControl{}))
	bobDesk.holds(t, bobDesk)
	ownerBrow.holds(t, bobDesk)
	bobDesk.ws.Close()
	ownerBrow.holds(t, nil)
	carolDesk.send(desktop.Encode(desktop.TakeControl{}))
	carolDesk.holds(t, carolDesk)
	ownerBrow.holds(t, carolDesk)
}
