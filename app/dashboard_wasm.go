//go:build js && wasm

package app

import (
	"context"
	"encoding/json"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// dashSession is the dashboard's WebSocket (GET /api/dashboard): JSON messages, applied to the
// page on the UI goroutine. It reconnects with the terminal's backoff; a close for an access
// change (1008: logged out, password changed) first asks who the user is, so an ended
// session goes to the login page instead of retrying.
type dashSession struct {
	ctx     app.Context
	page    *DashboardPage
	ws      js.Value
	funcs   []js.Func
	attempt int
	timer   *time.Timer
	stopped bool
}

func newDashSession(ctx app.Context, p *DashboardPage) dashDriver {
	s := &dashSession{ctx: ctx, page: p, ws: js.Null()}
	s.connect()
	return s
}

// connect opens the WebSocket; every callback runs on the UI goroutine (ctx.Dispatch).
func (s *dashSession) connect() {
	loc := js.Global().Get("location")
	scheme := "ws:"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss:"
	}
	ws := js.Global().Get("WebSocket").New(scheme + "//" + loc.Get("host").String() + "/api/dashboard")
	s.ws = ws
	onMessage := js.FuncOf(func(this js.Value, args []js.Value) any {
		data := args[0].Get("data")
		if data.Type() != js.TypeString {
			return nil
		}
		var m api.DashboardMessage
		if err := json.Unmarshal([]byte(data.String()), &m); err != nil {
			return nil
		}
		s.ctx.Dispatch(func(app.Context) {
			if s.stopped || !s.ws.Equal(ws) {
				return
			}
			if m.Type == api.DashSnapshot {
				s.attempt = 0
			}
			s.page.apply(m)
		})
		return nil
	})
	onClose := js.FuncOf(func(this js.Value, args []js.Value) any {
		code := args[0].Get("code").Int()
		s.ctx.Dispatch(func(app.Context) {
			if s.stopped || !s.ws.Equal(ws) {
				return
			}
			s.release()
			s.closed(code)
		})
		return nil
	})
	s.funcs = []js.Func{onMessage, onClose}
	ws.Set("onmessage", onMessage)
	ws.Set("onclose", onClose)
}

func (s *dashSession) release() {
	if !s.ws.IsNull() {
		s.ws.Set("onmessage", js.Null())
		s.ws.Set("onclose", js.Null())
	}
	for _, f := range s.funcs {
		f.Release()
	}
	s.funcs, s.ws = nil, js.Null()
}

// closed schedules a reconnect (on the UI goroutine).
func (s *dashSession) closed(code int) {
	if code == 1008 { // the session's access changed: still logged in?
		forgetUser()
		load(s.ctx, func(c context.Context) error {
			_, err := currentUser(c)
			return err
		}, func(ctx app.Context, err error) {
			if !s.stopped {
				s.retry()
			}
		})
		return
	}
	s.retry()
}

func (s *dashSession) retry() {
	d := termBackoff(s.attempt)
	s.attempt++
	s.page.live = "Live updates paused: reconnecting in " + d.Round(100*time.Millisecond).String() + "…"
	s.timer = time.AfterFunc(d, func() {
		s.ctx.Dispatch(func(app.Context) {
			if !s.stopped && s.ws.IsNull() {
				s.page.live = "reconnecting…"
				s.connect()
			}
		})
	})
}

func (s *dashSession) reconnect() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.ws.IsNull() && !s.stopped {
		s.page.live = "reconnecting…"
		s.connect()
	}
}

func (s *dashSession) stop() {
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if !s.ws.IsNull() {
		ws := s.ws
		s.release()
		ws.Call("close", 1000, "page closed")
	}
}

var _ dashDriver = (*dashSession)(nil)
