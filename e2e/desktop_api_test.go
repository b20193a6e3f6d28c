package e2e

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// typedRecorder is the computer-use test program: an xterm whose terminal echoes what is
// typed (so the window changes) and whose cat copies each finished line to ~/typed.
const typedRecorder = `exec cat > "$HOME/typed"`

// desktopReq does one request to the desktop API: with an agent token when token is set,
// else with hc's cookies (same origin); it returns the status and body.
func desktopReq(t *testing.T, g *gateway, hc *http.Client, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else {
		req.Header.Set("Origin", g.URL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// pngShot takes a screenshot with the token and decodes it.
func pngShot(t *testing.T, g *gateway, token, agentID string) image.Image {
	t.Helper()
	code, b := desktopReq(t, g, nil, token, "GET", "/api/agents/"+agentID+"/desktop/screenshot?format=png", nil)
	if code != http.StatusOK {
		t.Fatalf("screenshot = %d %s, want 200", code, b)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG: % x…", b[:min(len(b), 16)])
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode screenshot: %v", err)
	}
	return img
}

// magentaBox is the bounding box of the pixels near #ff00ff (the test program's background).
func magentaBox(img image.Image) (image.Rectangle, int) {
	b := img.Bounds()
	box, n := image.Rectangle{}, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 200 && g>>8 < 60 && bl>>8 > 200 {
				n++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return box, n
}

// changedIn counts the pixels of r that differ between a and b.
func changedIn(a, b image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				n++
			}
		}
	}
	return n
}

// TestDesktopComputerUse is the computer-use round trip through a real gateway and a real
// bwrap agent's display: with its agent token, a program screenshots the display, clicks
// the test program's window, types and presses Return; the program records the text and
// the window's pixels change. While a person holds control the agent gets 409 naming them;
// no credentials is 401, a watch-only sharee is 403; every call is audited (but the 401s:
// there is nobody to name).
func TestDesktopComputerUse(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xterm")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-computer-use")
	requireDesktopSurface(t, g, agent.ID)
	var tok api.Token
	g.call(t, "POST", "/api/agents/"+agent.ID+"/tokens", nil, http.StatusCreated, &tok)
	base := "/api/agents/" + agent.ID + "/desktop"

	// The first screenshot starts the display; then the test program goes on it.
	pngShot(t, g, tok.Secret, agent.ID)
	startXterm(t, g, agent.ID, typedRecorder)
	var first image.Image
	var box image.Rectangle
	deadline := time.Now().Add(60 * time.Second)
	for {
		first = pngShot(t, g, tok.Secret, agent.ID)
		var n int
		if box, n = magentaBox(first); n > 20000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test program's window is not on the screenshot (%d magenta pixels)", n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("test program at %v on a %v screen", box, first.Bounds())

	act := func(a desktop.Action, want int) []byte {
		t.Helper()
		code, b := desktopReq(t, g, nil, tok.Secret, "POST", base+"/actions", a)
		if code != want {
			t.Fatalf("action %+v = %d %s, want %d", a, code, b, want)
		}
		return b
	}
	c := box.Min.Add(box.Size().Div(2))
	act(desktop.Action{Action: "left_click", Coordinate: []int{c.X, c.Y}}, http.StatusOK)
	act(desktop.Action{Action: "type", Text: "hello-agent"}, http.StatusOK)
	act(desktop.Action{Action: "key", Text: "Return"}, http.StatusOK)
	deadline = time.Now().Add(20 * time.Second)
	for {
		var out api.ExecResult
		g.call(t, "POST", "/api/agents/"+agent.ID+"/exec", sh(`cat "$HOME/typed" 2>/dev/null || true`), http.StatusOK, &out)
		if out.Stdout == "hello-agent\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test program recorded %q, want %q", out.Stdout, "hello-agent\n")
		}
		time.Sleep(300 * time.Millisecond)
	}
	second := pngShot(t, g, tok.Secret, agent.ID)
	if n := changedIn(first, second, box); n < 50 {
		t.Errorf("the window's region changed in %d pixels after typing, want the echoed text drawn", n)
	}

	// A person (the owner, over the viewer WebSocket) takes control: the agent gets 409.
	ws, resp, err := websocket.DefaultDialer.Dial(g.wsURL(base), g.sessionHeader())
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial the desktop as the owner: %v (HTTP %d)", err, code)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.BinaryMessage, desktop.Encode(desktop.TakeControl{})); err != nil {
		t.Fatalf("send TakeControl: %v", err)
	}
	var me string
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for held := false; !held; {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read the viewer WebSocket: %v", err)
		}
		m, err := desktop.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		switch m := m.(type) {
		case desktop.Hello:
			me = m.ViewerID
		case desktop.Control:
			held = me != "" && m.HolderID == me && !m.Agent
		case desktop.ErrorMsg:
			t.Fatalf("viewer error: %+v", m)
		}
	}
	b := act(desktop.Action{Action: "left_click", Coordinate: []int{c.X, c.Y}}, http.StatusConflict)
	var apiErr api.Error
	if json.Unmarshal(b, &apiErr) != nil || !strings.Contains(apiErr.Error, "admin holds control") {
		t.Errorf("409 body %s, want an error naming the holder (admin)", b)
	}
	ws.Close()

	// No credentials: 401. A watch-only sharee's session: 403 for input.
	if code, b := desktopReq(t, g, nil, "", "POST", base+"/actions", desktop.Action{Action: "left_click", Coordinate: []int{1, 1}}); code != http.StatusUnauthorized {
		t.Errorf("action without a token = %d %s, want 401", code, b)
	}
	if code, b := desktopReq(t, g, nil, "", "GET", base+"/screenshot", nil); code != http.StatusUnauthorized {
		t.Errorf("screenshot without a token = %d %s, want 401", code, b)
	}
	bob := g.addUser(t, "bob")
	share := api.LevelWatch
	g.call(t, "PATCH", "/api/agents/"+agent.ID, api.UpdateAgentRequest{Share: &share}, http.StatusOK, nil)
	if code, b := desktopReq(t, g, bob.client, "", "POST", base+"/actions", desktop.Action{Action: "type", Text: "from-bob"}); code != http.StatusForbidden {
		t.Errorf("a watch-only sharee's action = %d %s, want 403", code, b)
	}

	// Every call is audited, refused ones included.
	var events []api.AuditEvent
	g.call(t, "GET", "/api/audit?agent="+agent.ID+"&limit=500", nil, http.StatusOK, &events)
	var shots, actions, refused409, bobRefused int
	for _, e := range events {
		switch {
		case e.Actor == "token:"+tok.ID && strings.HasSuffix(e.Action, "screenshot"):
			shots++
		case e.Actor == "token:"+tok.ID && strings.HasSuffix(e.Action, "action"):
			actions++
			if strings.Contains(e.Detail, "refused") && strings.Contains(e.Detail, "admin holds control") {
				refused409++
			}
		case e.Actor == "bob" && e.Action == "surface.refused" && e.Surface == api.SurfaceDesktop && strings.Contains(e.Detail, "/desktop/actions"):
			bobRefused++
		}
	}
	if shots < 3 || actions != 4 || refused409 != 1 || bobRefused != 1 {
		t.Errorf("audit: %d screenshots, %d actions (%d refused for control) by the token, %d refused actions by bob; want ≥3, 4 (1), 1; events: %+v",
			shots, actions, refused409, bobRefused, events)
	}
}
