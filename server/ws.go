package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
		CheckOrigin: func(r *http.Request) bool {
			o := r.Header.Get("Origin")
			return o == "" || s.originAllowed(r, o)
		},
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			writeJSONError(w, status, reason.Error())
		},
	}
}

// socketInfo is who holds an open WebSocket, so that a change of their access can end it.
type socketInfo struct {
	userID  string
	session string // hex SHA-256 of the session cookie ("" for a token)
	tokenID string
	agentID string
	// A surface's WebSocket (the dashboard shows who is attached): "" for the dashboard's own.
	surface api.Surface
	mode    api.Level
	name    string // the viewer's name
}

// track registers an open WebSocket for Shutdown and kick; false once the gateway is closing.
func (s *Server) track(ws *websocket.Conn, info socketInfo) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	s.sockets[ws] = info
	s.mu.Unlock()
	if info.agentID != "" {
		s.dash.attached(info.agentID)
	}
	return true
}

func (s *Server) untrack(ws *websocket.Conn) {
	s.mu.Lock()
	info, ok := s.sockets[ws]
	delete(s.sockets, ws)
	s.mu.Unlock()
	if ok && info.agentID != "" {
		s.dash.attached(info.agentID)
	}
}

// kick closes every WebSocket that match selects, with close code 1008 and reason: the access
// it was authorized with has changed (password, permissions, share, token revoked, agent or user
// deleted). A client that reconnects is authorized afresh; terminals keep running meanwhile.
func (s *Server) kick(match func(socketInfo) bool, reason string) int {
	s.mu.Lock()
	var socks []*websocket.Conn
	for ws, info := range s.sockets {
		if match(info) {
			socks = append(socks, ws)
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	for _, ws := range socks {
		// WriteControl and Close may run concurrently with the session's one writer.
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, reason), deadline)
		ws.Close()
	}
	if len(socks) > 0 {
		s.log.Info("closed websockets after an access change", "count", len(socks), "reason", reason)
	}
	return len(socks)
}

// surface serves GET /api/agents/:id/<surface>: the WebSocket of the surface's gateway half,
// or 501 when no surface of that name is registered. require has already authenticated the
// caller and checked at least watch on the surface, so every refusal so far was plain JSON.
func (s *Server) surface(sf api.Surface) echo.HandlerFunc {
	return func(c echo.Context) error {
		gw := s.surfaceOf(sf)
		if gw == nil {
			return errorf(http.StatusNotImplemented, nil, "the %s surface is not available yet: this gateway was built without it", sf)
		}
		return s.serveWS(c, sf, "", gw.Serve)
	}
}

// surfaceRoute serves one of a surface's extra routes; require has checked the route's level.
func (s *Server) surfaceRoute(sf api.Surface, r surface.Route) echo.HandlerFunc {
	if r.WebSocket != nil {
		return func(c echo.Context) error { return s.serveWS(c, sf, r.Path, r.WebSocket) }
	}
	return func(c echo.Context) error {
		r.HTTP(c.Response(), c.Request(), agentOf(c), s.viewerOf(c, sf))
		return nil
	}
}

// viewerOf is who calls c, with their level on sf and a new connection id. Terminals count
// against the user (a token's against its agent's owner); only an admin's own session may use
// the admins' reserve.
func (s *Server) viewerOf(c echo.Context, sf api.Surface) surface.Viewer {
	p := principalOf(c)
	v := surface.Viewer{ID: p.user.ID, Name: p.user.Username, Mode: agentOf(c).Access.Get(sf),
		User: p.user.ID, Admin: p.user.Admin, Conn: s.conns.Add(1)}
	if p.token != nil {
		v.ID = "token:" + p.token.ID
		v.Name = p.user.Username + " (agent token)"
		v.Admin = false
		v.Token = p.token.ID
	}
	return v
}

// serveWS upgrades c and runs serve on the WebSocket: tracked for Shutdown and kick, counted,
// audited (surface.attach and surface.detach; path names an extra route).
func (s *Server) serveWS(c echo.Context, sf api.Surface, path string,
	serve func(ctx context.Context, ws *websocket.Conn, agent api.Agent, v surface.Viewer) error) error {
	a := agentOf(c)
	p := principalOf(c)
	mode := a.Access.Get(sf)
	if !c.IsWebSocket() {
		return errorf(http.StatusBadRequest, nil, "this route is a WebSocket: send an Upgrade: websocket request")
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errorf(http.StatusServiceUnavailable, nil, "the server is shutting down")
	}
	s.wsWG.Add(1)
	s.mu.Unlock()
	defer s.wsWG.Done()

	ws, err := s.upgrader().Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader has answered (JSON, via its Error func)
	}
	c.Set(upgradedKey, true)
	v := s.viewerOf(c, sf)
	info := socketInfo{userID: p.user.ID, agentID: a.ID, surface: sf, mode: mode, name: v.Name}
	if p.token != nil {
		info.tokenID = p.token.ID
	} else {
		info.session = hex.EncodeToString(p.sessionHash)
	}
	if !s.track(ws, info) {
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return nil
	}
	defer s.untrack(ws)
	gauge := s.metrics.websockets.WithLabelValues(string(sf))
	gauge.Inc()
	defer gauge.Dec()

	log := s.log.With("agent", a.ID, "surface", sf, "actor", p.actor(), "mode", mode, "remote", c.RealIP(), "conn", v.Conn)
	if path != "" {
		log = log.With("route", path)
	}
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	start := time.Now()
	s.audit(c, api.AuditEvent{Action: "surface.attach", AgentID: a.ID, Surface: sf, Mode: mode, Detail: path})
	log.Info("surface attached")

	err = serve(ctx, ws, a, v)
	ws.Close()

	detail := "after " + time.Since(start).Round(time.Second).String()
	if path != "" {
		detail = path + " " + detail
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrShutdown) {
		detail += ": " + cause.Error()
	} else if err != nil && !isNormalClose(err) {
		detail += fmt.Sprintf(": %v", err)
	}
	s.audit(c, api.AuditEvent{Action: "surface.detach", AgentID: a.ID, Surface: sf, Mode: mode, Detail: detail})
	log.Info("surface detached", "detail", detail)
	return nil
}

func isNormalClose(err error) bool {
	return errors.Is(err, context.Canceled) ||
		websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived)
}
