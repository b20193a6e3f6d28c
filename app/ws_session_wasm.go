//go:build js && wasm

package app

import (
	"net/url"
	"sync"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// wsSession is what the browser halves of the desktop, browser and terminal panels share:
// the lock every entry point takes, the batching of UI refreshes (at most one queued at a
// time), the WebSocket to /api/agents/{agentID}/{surface} with its reconnect backoff, the
// phone media query and the cleanups run on stop. The session that embeds it sets the hooks
// before its first connect.
type wsSession struct {
	ctx     app.Context
	agentID string
	surface string // the WebSocket's last path element: "desktop", "browser", "terminal"

	mu       sync.Mutex
	ws       js.Value  // the current WebSocket (null between connections)
	wsFuncs  []js.Func // its handlers, released when it closes
	attempt  int       // reconnect attempts since the last Hello
	conns    int       // connections that got a Hello
	timer    *time.Timer
	status   string
	phone    bool
	stopped  bool
	queued   bool // a UI refresh is queued
	cleanups []func()

	onMessage func(ws, data js.Value)       // a message of ws, off the lock
	onOpen    func(ws js.Value)             // ws opened, off the lock (nil: not watched)
	onClosed  func(code int, reason string) // the current connection ended (mu held, ws already null)
	onRefresh func(app.Context)             // copies the state into the panel (UI goroutine)
}

// do runs f under the lock and queues a UI refresh.
func (s *wsSession) do(f func()) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	f()
	q := !s.queued
	s.queued = true
	s.mu.Unlock()
	if q {
		s.ctx.Dispatch(s.onRefresh)
	}
}

// watchPhone follows the media query that decides the phone layout (keys bar).
func (s *wsSession) watchPhone() {
	mq := js.Global().Call("matchMedia", phoneQuery)
	s.phone = mq.Get("matches").Bool()
	onMQ := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.do(func() { s.phone = args[0].Get("matches").Bool() })
		return nil
	})
	mq.Call("addEventListener", "change", onMQ)
	s.cleanups = append(s.cleanups, func() {
		mq.Call("removeEventListener", "change", onMQ)
		onMQ.Release()
	})
}

// connect opens the WebSocket (mu held).
func (s *wsSession) connect() {
	loc := js.Global().Get("location")
	scheme := "ws:"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss:"
	}
	u := scheme + "//" + loc.Get("host").String() + "/api/agents/" + url.PathEscape(s.agentID) + "/" + s.surface
	ws := js.Global().Get("WebSocket").New(u)
	ws.Set("binaryType", "arraybuffer")
	s.ws = ws
	s.status = "connecting…"

	onMessage := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.onMessage(ws, args[0].Get("data"))
		return nil
	})
	funcs := []js.Func{onMessage}
	if s.onOpen != nil {
		onOpen := js.FuncOf(func(this js.Value, args []js.Value) any {
			s.onOpen(ws)
			return nil
		})
		funcs = append(funcs, onOpen)
		ws.Set("onopen", onOpen)
	}
	onClose := js.FuncOf(func(this js.Value, args []js.Value) any {
		code, reason := args[0].Get("code").Int(), args[0].Get("reason").String()
		s.do(func() {
			for _, f := range funcs {
				f.Release() // allowed while one of them runs
			}
			if !s.ws.Equal(ws) {
				return // an old connection (reconnect now)
			}
			s.ws = js.Null()
			s.wsFuncs = nil
			s.onClosed(code, reason)
		})
		return nil
	})
	funcs = append(funcs, onClose)
	ws.Set("onmessage", onMessage)
	ws.Set("onclose", onClose)
	s.wsFuncs = funcs
}

// backoff schedules a reconnect after the next backoff delay and returns it (mu held).
func (s *wsSession) backoff() time.Duration {
	d := termBackoff(s.attempt)
	s.attempt++
	s.timer = time.AfterFunc(d, func() {
		s.do(func() {
			s.timer = nil
			if s.ws.IsNull() {
				s.connect()
			}
		})
	})
	return d
}

// hello counts a connection the server greeted: the backoff starts over (mu held).
func (s *wsSession) hello() {
	s.attempt = 0
	s.conns++
	s.status = ""
}

// redial drops the waiting time of a pending reconnect (mu held).
func (s *wsSession) redial() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.ws.IsNull() {
		s.connect()
	}
}

// sendBytes sends one binary message if the WebSocket is open (mu held); encode runs only then.
func (s *wsSession) sendBytes(encode func() []byte) {
	if s.ws.IsNull() || s.ws.Get("readyState").Int() != 1 {
		return
	}
	b := encode()
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	s.ws.Call("send", u)
}

// halt marks the session stopped, cancels a pending reconnect and closes the WebSocket
// (mu held); false if it was already stopped. The caller disposes of its own parts, then
// calls finish.
func (s *wsSession) halt() bool {
	if s.stopped {
		return false
	}
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if !s.ws.IsNull() {
		s.ws.Set("onmessage", js.Null())
		if s.onOpen != nil {
			s.ws.Set("onopen", js.Null())
		}
		s.ws.Set("onclose", js.Null())
		s.ws.Call("close", 1000, "panel closed")
		for _, f := range s.wsFuncs {
			f.Release()
		}
		s.ws, s.wsFuncs = js.Null(), nil
	}
	return true
}

// finish runs the cleanups (mu held, after halt).
func (s *wsSession) finish() {
	for _, f := range s.cleanups {
		f()
	}
}
