package cdpmux

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

type nopConn struct{}

func (nopConn) Read([]byte) (int, error)    { select {} }
func (nopConn) Write(b []byte) (int, error) { return len(b), nil }
func (nopConn) Close() error                { return nil }

// FuzzFromBrowser: any message from the browser (the sandbox) is routed or dropped without a
// panic, and whatever reaches a client is valid JSON of bounded size.
func FuzzFromBrowser(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"result":{"sessionId":"P1"},"sessionId":"S"}`,
		`{"method":"Target.attachedToTarget","sessionId":"S","params":{"sessionId":"P2","targetInfo":{}}}`,
		`{"method":"Target.detachedFromTarget","sessionId":"S","params":{"sessionId":"P2"}}`,
		`{"method":"Page.screencastFrame","sessionId":"P1","params":{"data":"AAAA","sessionId":1}}`,
		`{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"T"}}}`,
		`{"method":"Porthole.browserExited","params":{"message":"bye"}}`,
		`{"id":2147483647,"error":{"code":-32000,"message":"x"}}`,
		`{"id":1,"result":{},"sessionId":"\u0000"}`,
		`[1,2]`, `{"id":1e9}`, `null`,
		`{"id":1,"result":{"sessionId":"P1"},"sessionId":"P1"}`,
		`{"method":"Target.detachedFromTarget","params":{"sessionId":"S"}}`,
		`{"method":"Target.attachedToTarget","sessionId":"S","params":{"sessionId":"` + strings.Repeat("L", 200) + `"}}`,
		`{"method":"A.b","sessionId":"` + strings.Repeat("L", 200) + `"}`,
		`{"method":"A.b","params":` + strings.Repeat("[", 20000) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &Mux{cfg: Config{MaxMessage: 1 << 20, MaxPending: 8, MaxSessions: 8, QueueMessages: 64, QueueBytes: 1 << 20,
			MuxQueueBytes: 2 << 20, OutBytes: 1 << 20, ExitMethod: "Porthole.browserExited"},
			log: slog.New(slog.NewTextHandler(io.Discard, nil)), conn: nopConn{}, out: make(chan []byte, 64),
			done: make(chan struct{}), pending: map[uint32]*call{}, sessions: map[string]*Client{}, clients: map[*Client]struct{}{}}
		c := &Client{m: m, name: "c", root: "S", sessions: map[string]struct{}{"P1": {}}, notify: make(chan struct{}, 1), closed: make(chan struct{})}
		m.clients[c] = struct{}{}
		m.sessions["S"], m.sessions["P1"] = c, c
		m.pending[1] = &call{client: c, clientID: json.RawMessage(`7`), method: "Target.attachToTarget"}
		c.inFlight = 1
		m.fromBrowser(b)
		m.fromBrowser(b)
		for _, out := range c.queue {
			if !json.Valid(out) || !utf8.Valid(out) || bytes.IndexByte(out, 0) >= 0 {
				t.Fatalf("a client got %q from %q", out, b)
			}
		}
		if len(c.sessions) > m.cfg.MaxSessions || len(m.sessions) > m.cfg.MaxSessions+1 {
			t.Fatalf("sessions over the bound: %d", len(c.sessions))
		}
		for sid := range m.sessions {
			if len(sid) > MaxSessionID {
				t.Fatalf("a session id of %d bytes is tracked", len(sid))
			}
		}
		if m.queued.Load() != int64(c.qbytes) {
			t.Fatalf("queued bytes %d, the client's queue %d", m.queued.Load(), c.qbytes)
		}
		// A reply names only the session the client used (none here: pending 1 was sent
		// to its browser session).
		for _, out := range c.queue {
			var r struct {
				ID        *int    `json:"id"`
				SessionID *string `json:"sessionId"`
			}
			if json.Unmarshal(out, &r) == nil && r.ID != nil && r.SessionID != nil {
				t.Fatalf("a reply names session %q: %q", *r.SessionID, out)
			}
		}
	})
}

// FuzzReadMessage: the framing never returns more than max bytes or a NUL inside a message.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte("{}\x00{\"id\":1}\x00"))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\x00b\x00"))
	f.Add([]byte("\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(b), 16)
		for range 100 {
			m, err := ReadMessage(br, 20)
			if err == ErrTooLarge || (err != nil && bytes.Contains([]byte(err.Error()), []byte("size limit"))) {
				continue
			}
			if err != nil {
				return
			}
			if len(m) > 20 || bytes.IndexByte(m, 0) >= 0 {
				t.Fatalf("message %q", m)
			}
		}
	})
}
