package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/terminal"
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

// track registers an open WebSocket for Shutdown; false once the gateway is closing.
func (s *Server) track(ws *websocket.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.sockets[ws] = struct{}{}
	return true
}

func (s *Server) untrack(ws *websocket.Conn) {
	s.mu.Lock()
	delete(s.sockets, ws)
	s.mu.Unlock()
}

// surface serves GET /api/agents/:id/<surface>. require has already authenticated the
// caller and checked at least watch on the surface, so every refusal so far was plain JSON.
func (s *Server) surface(sf api.Surface) echo.HandlerFunc {
	return func(c echo.Context) error {
		a := agentOf(c)
		p := principalOf(c)
		mode := a.Access.Get(sf)
		if sf != api.SurfaceTerminal {
			return errorf(http.StatusNotImplemented, nil, "the %s surface is not available yet", sf)
		}
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
		if !s.track(ws) {
			ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
			ws.Close()
			return nil
		}
		defer s.untrack(ws)
		gauge := s.metrics.websockets.WithLabelValues(string(sf))
		gauge.Inc()
		defer gauge.Dec()

		v := terminal.Viewer{ID: p.user.ID, Name: p.user.Username, Mode: mode}
		if p.token != nil {
			v.ID = "token:" + p.token.ID
			v.Name = p.user.Username + " (agent token)"
		}
		log := s.log.With("agent", a.ID, "surface", sf, "actor", p.actor(), "mode", mode, "remote", c.RealIP())
		ctx, cancel := context.WithCancelCause(s.ctx)
		defer cancel(nil)
		start := time.Now()
		s.audit(c, api.AuditEvent{Action: "surface.attach", AgentID: a.ID, Surface: sf, Mode: mode})
		log.Info("surface attached")

		err = s.terms.Serve(ctx, ws, a, v)
		ws.Close()

		detail := "after " + time.Since(start).Round(time.Second).String()
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrShutdown) {
			detail += ": " + cause.Error()
		} else if err != nil && !isNormalClose(err) {
			detail += fmt.Sprintf(": %v", err)
		}
		s.audit(c, api.AuditEvent{Action: "surface.detach", AgentID: a.ID, Surface: sf, Mode: mode, Detail: detail})
		log.Info("surface detached", "detail", detail)
		return nil
	}
}

func isNormalClose(err error) bool {
	return errors.Is(err, context.Canceled) ||
		websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived)
}
