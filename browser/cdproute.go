//go:build !js

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser/internal/cdpmux"
	"github.com/porthole/porthole/surface"
)

// The agent's own automation on the browser people watch (docs/browser-cdp.md):
//
//	GET /api/agents/:id/browser/cdp           a raw CDP WebSocket (text messages, one JSON each)
//	GET /api/agents/:id/browser/json/version  discovery, as Chromium's /json/version
//
// Both need drive on the browser (the server enforces it, and lets an agent token reach its
// own agent only) and, in addition, the caller must be the agent's own token or the agent's
// owner: a person the agent is shared with, even with drive, may watch and drive the live
// view but not attach an automation client. The discovery route answers such a caller 403;
// the WebSocket, already upgraded by the server when its handler runs, is closed with 1008
// and the same reason. Non-browser clients (Playwright, puppeteer, chromedp) send no Origin,
// which the server's upgrader accepts; a browser page's Origin must be the gateway's own.

const (
	// cdpWriteTimeout bounds one write to an automation client.
	cdpWriteTimeout = 30 * time.Second
	cdpPingEvery    = 30 * time.Second
	// maxAutomation is how many automation connections one agent's browser takes at once:
	// well under cdpmux.DefaultMaxClients, so that the agent's automation can never take
	// every client slot and lock the people watching (the live view) out.
	maxAutomation = 16
)

// cdpReadTimeout ends a connection from which nothing (no message, no pong to the pings)
// came for this long: a vanished client does not hold one of the agent's maxAutomation slots
// until TCP gives up. CDP client libraries answer pings. Tests shorten it
// (Service.cdpReadTimeout).
const cdpReadTimeout = 2*cdpPingEvery + 15*time.Second

// errNotOwner is the refusal of a caller who may drive but not automate.
var errNotOwner = errors.New("only the agent's own token or the agent's owner may connect a CDP client to its browser")

// errTooManyAutomation refuses an automation connection beyond maxAutomation.
var errTooManyAutomation = fmt.Errorf("too many automation connections to this agent's browser (at most %d at once): close one first", maxAutomation)

func (s *Service) cdpRoutes() []surface.Route {
	version := func(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer) {
		s.serveVersion(w, r, agent, v)
	}
	return []surface.Route{
		{Method: http.MethodGet, Path: "cdp", Level: api.LevelDrive, WebSocket: s.serveCDP},
		{Method: http.MethodGet, Path: "json/version", Level: api.LevelDrive, HTTP: version},
		{Method: http.MethodGet, Path: "json/version/", Level: api.LevelDrive, HTTP: version},
	}
}

// mayAutomate: the agent's own token (the server admits a token to its own agent only), or its owner.
func mayAutomate(agent api.Agent, v Viewer) bool {
	return v.Token != "" || (v.ID != "" && v.ID == agent.OwnerID)
}

// serveVersion answers as Chromium's /json/version, with webSocketDebuggerUrl pointing at
// the cdp route on the host and scheme the client used.
func (s *Service) serveVersion(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !mayAutomate(agent, v) {
		w.WriteHeader(http.StatusForbidden)
		json.NewEncoder(w).Encode(map[string]string{"error": errNotOwner.Error()})
		return
	}
	scheme := "ws"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "wss"
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	path = strings.TrimSuffix(path, "/json/version") + "/cdp"
	json.NewEncoder(w).Encode(map[string]string{
		"Browser":              "Chrome/porthole",
		"Protocol-Version":     "1.3",
		"User-Agent":           "porthole",
		"webSocketDebuggerUrl": scheme + "://" + r.Host + path,
	})
}

// serveCDP relays one automation client's raw CDP WebSocket to a client of the agent's mux.
// Its reader (this goroutine) sends calls; one writer goroutine is the only writer of ws.
func (s *Service) serveCDP(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	if !mayAutomate(agent, v) {
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.ClosePolicyViolation, errNotOwner.Error()), time.Now().Add(time.Second))
		return errNotOwner
	}
	if !s.reserveAutomation(agent.ID) {
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.ClosePolicyViolation, errTooManyAutomation.Error()), time.Now().Add(time.Second))
		return errTooManyAutomation
	}
	defer s.releaseAutomation(agent.ID)
	who := v.ID
	if v.Token != "" {
		who = "token:" + v.Token
	}
	c, err := s.newClient(ctx, agent, "automation:"+who)
	if err != nil {
		s.log.Warn("browser: automation client", "agent", agent.ID, "err", err)
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseInternalServerErr, cdpTruncate(err.Error(), 120)), time.Now().Add(time.Second))
		return err
	}
	defer c.Close()
	s.cdpAudit(agent, v, "automation.open", "")
	s.addAutomation(agent.ID, v)
	defer s.removeAutomation(agent.ID, v)
	start := time.Now()

	ws.SetReadLimit(cdpmux.DefaultMaxMessage)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: serveCDP (wg); the only writer of ws; exits when ctx ends or the client fails
		defer wg.Done()
		cancel(s.cdpWriter(ctx, ws, c))
	}()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	// A client disconnected as too slow is usually stuck in a write to a peer that does not
	// read: cut that write at once rather than after cdpWriteTimeout.
	if mc, ok := c.(*cdpmux.Client); ok {
		wg.Add(1)
		go func() { // owner: serveCDP (wg); exits when the client or ctx ends
			defer wg.Done()
			select {
			case <-mc.Done():
				if errors.Is(mc.Err(), cdpmux.ErrSlowClient) {
					ws.UnderlyingConn().SetWriteDeadline(time.Now())
				}
			case <-ctx.Done():
			}
		}()
	}
	var rerr error
	readTimeout := cdpReadTimeout
	if d := s.cdpReadTimeout.Load(); d > 0 {
		readTimeout = time.Duration(d)
	}
	ws.SetReadDeadline(time.Now().Add(readTimeout))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(readTimeout)) })
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			rerr = err
			break
		}
		ws.SetReadDeadline(time.Now().Add(readTimeout))
		if err := c.Send(ctx, b); err != nil {
			if errors.Is(err, cdpmux.ErrBadMessage) {
				continue // Chromium ignores what it cannot parse too
			}
			rerr = err
			break
		}
	}
	cancel(rerr)
	wg.Wait()
	end := context.Cause(ctx)
	if werr := c.(*cdpmux.Client).Err(); werr != nil && !errors.Is(werr, cdpmux.ErrClosed) {
		end = werr
	}
	detail := "after " + time.Since(start).Round(time.Second).String()
	if end != nil && !websocket.IsCloseError(end, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) &&
		!errors.Is(end, context.Canceled) {
		detail += ": " + end.Error()
	}
	s.cdpAudit(agent, v, "automation.close", detail)
	if websocket.IsCloseError(end, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
		return nil
	}
	return end
}

// cdpWriter writes the client's replies and events to ws; when the client ends (the browser
// exited, the client was too slow) it closes ws with the reason.
func (s *Service) cdpWriter(ctx context.Context, ws *websocket.Conn, c cdpClient) error {
	ping := time.NewTicker(cdpPingEvery)
	defer ping.Stop()
	msgs := make(chan []byte)
	errc := make(chan error, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() { // owner: cdpWriter; exits when rctx ends or Recv fails
		for {
			b, err := c.Recv(rctx)
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- b:
			case <-rctx.Done():
				errc <- rctx.Err()
				return
			}
		}
	}()
	defer func() { rcancel(); <-errc }()
	for {
		select {
		case b := <-msgs:
			ws.SetWriteDeadline(time.Now().Add(cdpWriteTimeout))
			if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
				return err
			}
		case err := <-errc:
			errc <- err // for the deferred drain
			if ctx.Err() == nil {
				ws.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(websocket.CloseGoingAway, cdpTruncate(err.Error(), 120)), time.Now().Add(time.Second))
			}
			return err
		case <-ping.C:
			ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// cdpTruncate cuts s to at most n bytes on a rune boundary (a close reason must be UTF-8;
// the text may come from the sandbox: the helper's exit notice).
func cdpTruncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (s *Service) cdpAudit(agent api.Agent, v Viewer, action, detail string) {
	if s.cfg.OnCall != nil {
		s.cfg.OnCall(agent, v, action, detail)
	}
}

// reserveAutomation takes one of agentID's maxAutomation connection slots (false: none left).
func (s *Service) reserveAutomation(agentID string) bool {
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	if s.autoSlots == nil {
		s.autoSlots = map[string]int{}
	}
	if s.autoSlots[agentID] >= maxAutomation {
		return false
	}
	s.autoSlots[agentID]++
	return true
}

func (s *Service) releaseAutomation(agentID string) {
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	if s.autoSlots[agentID]--; s.autoSlots[agentID] <= 0 {
		delete(s.autoSlots, agentID)
	}
}

func (s *Service) addAutomation(agentID string, v Viewer) {
	s.autoMu.Lock()
	m := s.automation[agentID]
	if m == nil {
		m = map[uint64]Viewer{}
		s.automation[agentID] = m
	}
	m[v.Conn] = v
	s.autoMu.Unlock()
	if s.cdpAutomationChanged != nil {
		s.cdpAutomationChanged(agentID)
	}
}

func (s *Service) removeAutomation(agentID string, v Viewer) {
	s.autoMu.Lock()
	delete(s.automation[agentID], v.Conn)
	if len(s.automation[agentID]) == 0 {
		delete(s.automation, agentID)
	}
	s.autoMu.Unlock()
	if s.cdpAutomationChanged != nil {
		s.cdpAutomationChanged(agentID)
	}
}
