package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

// clipViewer is a driving viewer's WebSocket reduced to the clipboard: the Clipboard texts and
// the errors it was sent.
type clipViewer struct {
	ws    *websocket.Conn
	clips chan string
	mu    sync.Mutex
	errs  []desktop.ErrorMsg
	me    string
	held  bool
}

func dialClipViewer(t *testing.T, g *gateway, agentID string) *clipViewer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(g.wsURL("/api/agents/"+agentID+"/desktop"), g.sessionHeader())
	if err != nil {
		t.Fatalf("dial the desktop: %v", err)
	}
	v := &clipViewer{ws: ws, clips: make(chan string, 16)}
	t.Cleanup(func() { ws.Close() })
	go func() { // owner: this test; ends when the connection closes (cleanup)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			m, _ := desktop.Decode(b)
			v.mu.Lock()
			switch m := m.(type) {
			case desktop.Hello:
				v.me = m.ViewerID
			case desktop.Control:
				v.held = v.me != "" && m.HolderID == v.me
			case desktop.ErrorMsg:
				v.errs = append(v.errs, m)
			case desktop.Clipboard:
				select {
				case v.clips <- m.Text:
				default:
				}
			}
			v.mu.Unlock()
		}
	}()
	return v
}

// drain forgets the Clipboard frames received so far.
func (v *clipViewer) drain() {
	for {
		select {
		case <-v.clips:
		default:
			return
		}
	}
}

// errors returns the errors received so far.
func (v *clipViewer) errors() []desktop.ErrorMsg {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]desktop.ErrorMsg(nil), v.errs...)
}

// seqText is what `seq -f '%07g' 1 n` prints: n lines of 8 bytes.
func seqText(n int) string {
	var b strings.Builder
	b.Grow(8 * n)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%07d\n", i)
	}
	return b.String()
}

// TestDesktopClipboardSizeCap: through a real gateway and a real bwrap agent's display, an X
// program copies text to the CLIPBOARD selection (xclip) and the driving viewer gets it as a
// Clipboard frame: whole up to the documented cap (MaxClipboard, 1 MiB: the wire's lstr), and
// for a 2 MiB selection the first MaxClipboard bytes or nearly, with an Error{TooLarge} saying
// it was cut. The other way, text the viewer sets within the cap is what an X program pastes.
func TestDesktopClipboardSizeCap(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	testenv.LookPath(t, "xclip")
	g := startGateway(t)
	agent := g.createAgent(t, "e2e-desktop-clipboard")
	requireDesktopSurface(t, g, agent.ID)
	v := dialClipViewer(t, g, agent.ID)
	if err := v.ws.WriteMessage(websocket.BinaryMessage, desktop.Encode(desktop.TakeControl{})); err != nil {
		t.Fatal(err)
	}
	if code, b := desktopReq(t, g, g.client, "", "GET", "/api/agents/"+agent.ID+"/desktop/screenshot", nil); code != http.StatusOK {
		t.Fatalf("screenshot (starts the display) = %d %s", code, b)
	}

	// copy runs xclip as the selection's owner for one paste (it stays in the foreground: a
	// backgrounded xclip would die with its exec) until the test ends or 30 s passed.
	copyText := func(lines int) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { // owner: this test; ends with xclip (one paste, 30 s) or at cleanup
			defer close(done)
			body, _ := json.Marshal(api.ExecRequest{Command: []string{"sh", "-c",
				fmt.Sprintf(`seq -f '%%07g' 1 %d | timeout 30 xclip -quiet -selection clipboard -i -loops 1`, lines)}, TimeoutS: 40})
			req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/api/agents/"+agent.ID+"/exec", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", g.URL)
			if resp, err := (&http.Client{Jar: g.client.Jar}).Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	for _, c := range []struct {
		name  string
		lines int
	}{
		{"100 KiB", 100 << 10 / 8},
		{"700 KiB", 700 << 10 / 8},
		{"2 MiB", 2 << 20 / 8},
	} {
		want := seqText(c.lines)
		v.drain()
		nerr := len(v.errors())
		copyText(c.lines)
		var got string
		select {
		case got = <-v.clips:
		case <-time.After(30 * time.Second):
			t.Errorf("%s copied on the display: no Clipboard frame reached the viewer in 30 s (errors: %+v)", c.name, v.errors()[nerr:])
			continue
		}
		if len(want) <= desktop.MaxClipboard {
			if got != want {
				t.Errorf("%s copied on the display: the viewer got %d bytes (a prefix: %v), want the %d bytes whole", c.name, len(got), strings.HasPrefix(want, got), len(want))
			}
			continue
		}
		if len(got) > desktop.MaxClipboard || len(got) < desktop.MaxClipboard-4096 || !strings.HasPrefix(want, got) {
			t.Errorf("%s copied on the display: the viewer got %d bytes (a prefix: %v), want the first %d bytes or nearly",
				c.name, len(got), strings.HasPrefix(want, got), desktop.MaxClipboard)
		}
		said := false
		for deadline := time.Now().Add(5 * time.Second); !said && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, e := range v.errors()[nerr:] {
				said = said || (e.Code == desktop.ErrCodeTooLarge && strings.Contains(strings.ToLower(e.Message), "clipboard"))
			}
		}
		if !said {
			t.Errorf("%s copied on the display: the viewer was not told its clipboard was cut (an Error{TooLarge} naming the clipboard); errors: %+v", c.name, v.errors()[nerr:])
		}
	}

	// The other way: text the viewer sets, within the cap, is what an X program pastes.
	for _, c := range []struct {
		name  string
		lines int
	}{
		{"100 KiB", 100 << 10 / 8},
		{"700 KiB", 700 << 10 / 8},
	} {
		want := seqText(c.lines)
		if err := v.ws.WriteMessage(websocket.BinaryMessage, desktop.Encode(desktop.SetClipboard{Text: want})); err != nil {
			t.Fatal(err)
		}
		var out api.ExecResult
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			g.call(t, "POST", "/api/agents/"+agent.ID+"/exec", sh(`xclip -o -selection clipboard | md5sum; xclip -o -selection clipboard | wc -c`), http.StatusOK, &out)
			if strings.Contains(out.Stdout, fmt.Sprintf("\n%d\n", len(want))) || time.Now().After(deadline) {
				break
			}
		}
		if n := fmt.Sprintf("\n%d\n", len(want)); !strings.Contains(out.Stdout, n) {
			t.Errorf("SetClipboard of %s: an X program pastes %q (md5sum, bytes), want %d bytes; viewer errors: %+v", c.name, out.Stdout, len(want), v.errors())
		}
	}
	if errs := v.errors(); t.Failed() {
		t.Logf("the viewer's errors: %+v", errs)
	}
}
