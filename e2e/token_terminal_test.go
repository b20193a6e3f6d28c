package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/terminal"
)

// TestAgentTokenDrivesTerminal: an agent program, with its agent token in the Authorization
// header (never the URL), opens the terminal WebSocket, types into a shell inside the jail and
// reads the answer; the attach is in the audit log under the token.
func TestAgentTokenDrivesTerminal(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	g := startGateway(t)
	a := g.createAgent(t, "token-driven")
	var tok api.Token
	g.call(t, "POST", "/api/agents/"+a.ID+"/tokens", nil, http.StatusCreated, &tok)

	wsURL := "ws" + strings.TrimPrefix(g.URL, "http") + "/api/agents/" + a.ID + "/terminal"
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + tok.Secret}})
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial terminal with agent token: %v (HTTP %d)", err, code)
	}
	defer ws.Close()
	send := func(m terminal.Message) {
		t.Helper()
		if err := ws.WriteMessage(websocket.BinaryMessage, terminal.Encode(m)); err != nil {
			t.Fatalf("send %T: %v", m, err)
		}
	}
	send(terminal.Open{Tag: 1, Cols: 80, Rows: 24})

	var id uint32
	var out bytes.Buffer
	typed := false
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "token-drove-5") {
		if time.Now().After(deadline) {
			t.Fatalf("no output %q from the token's terminal; got %q", "token-drove-5", out.String())
		}
		ws.SetReadDeadline(deadline)
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (output so far %q)", err, out.String())
		}
		m, err := terminal.Decode(b)
		if err != nil {
			t.Fatalf("decode server frame: %v", err)
		}
		switch m := m.(type) {
		case terminal.Hello:
			if m.Mode != terminal.ModeOf(api.LevelDrive) {
				t.Fatalf("hello mode = %v, want drive (the owner's level)", m.Mode)
			}
		case terminal.Opened:
			id = m.ID
		case terminal.ErrorMsg:
			t.Fatalf("server error: %+v", m)
		case terminal.Output:
			out.Write(m.Data)
			send(terminal.Ack{ID: m.ID, N: uint32(len(m.Data))})
			if !typed && id != 0 {
				typed = true
				send(terminal.Input{ID: id, Data: []byte("echo token-drove-$((2+3))\r")})
			}
		}
	}

	var events []api.AuditEvent
	g.call(t, "GET", "/api/audit?agent="+a.ID, nil, http.StatusOK, &events)
	want := map[string]bool{"surface.attach": false, "terminal.open": false}
	for _, e := range events {
		if _, ok := want[e.Action]; ok && e.Actor == "token:"+tok.ID && e.Surface == api.SurfaceTerminal {
			want[e.Action] = true
		}
	}
	for action, seen := range want {
		if !seen {
			t.Errorf("audit has no %s by token:%s on the terminal; events: %+v", action, tok.ID, events)
		}
	}
}
