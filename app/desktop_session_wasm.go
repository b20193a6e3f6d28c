//go:build js && wasm

package app

import (
	"fmt"
	"net/url"
	"sync"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
)

// deskSession is the browser half of a DesktopPanel: the WebSocket, the canvas (through
// window.porthole.desk, assets/static/desktop.js) and reconnection. Every entry point takes
// mu; desktop.js calls back into Go only from events and microtasks, never inside a call Go
// made, so mu is never re-entered. UI state reaches the panel through ctx.Dispatch, at most
// one queued at a time; input events (pointer moves) do not re-render.
type deskSession struct {
	ctx     app.Context
	panel   *DesktopPanel
	agentID string

	mu       sync.Mutex
	c        *deskClient
	h        js.Value // the desktop.js handle
	ws       js.Value // the current WebSocket (null between connections)
	wsFuncs  []js.Func
	funcs    []js.Func // the handle's callbacks
	attempt  int
	conns    int
	timer    *time.Timer
	status   string
	notice   string
	phone    bool
	fullKeys bool // the keys bar got noBlur
	stopped  bool
	queued   bool
	cleanups []func()
}

func newDeskSession(ctx app.Context, p *DesktopPanel) deskDriver {
	return newDeskSessionTry(ctx, p, 0)
}

// newDeskSessionTry waits up to 5 s for the deferred desktop.js.
func newDeskSessionTry(ctx app.Context, p *DesktopPanel, try int) deskDriver {
	glue := js.Global().Get("porthole")
	host := js.Global().Get("document").Call("getElementById", p.hostID)
	if !glue.Truthy() || !glue.Get("desk").Truthy() || !host.Truthy() {
		if try >= 50 {
			p.ui.Status = "desktop viewer unavailable: desktop.js did not load"
			return nil
		}
		agent := p.AgentID
		ctx.After(100*time.Millisecond, func(ctx app.Context) {
			if p.sess == nil && p.started == agent && p.Mounted() {
				p.sess = newDeskSessionTry(ctx, p, try+1)
			}
		})
		return nil
	}
	s := &deskSession{ctx: ctx, panel: p, agentID: p.AgentID, ws: js.Null(), status: "connecting…"}
	mode := desktop.ModeWatch
	if p.Mode == api.LevelDrive {
		mode = desktop.ModeDrive
	}
	s.c = newDeskClient(s, mode)

	fn := func(refresh bool, f func(args []js.Value)) js.Func {
		jf := js.FuncOf(func(this js.Value, args []js.Value) any {
			if refresh {
				s.do(func() { f(args) })
			} else {
				s.quiet(func() { f(args) })
			}
			return nil
		})
		s.funcs = append(s.funcs, jf)
		return jf
	}
	opts := map[string]any{
		"onViewport": fn(false, func(a []js.Value) { s.c.viewport(a[0].Float(), a[1].Float()) }),
		"onScroll":   fn(false, func(a []js.Value) { s.c.scrolled(a[0].Float(), a[1].Float()) }),
		"onPointer": fn(false, func(a []js.Value) {
			kind, typ := a[0].String(), a[1].String()
			x, y := a[3].Float(), a[4].Float()
			if typ == "touch" {
				s.c.touch(kind, a[2].Int(), x, y, time.Now())
				return
			}
			if kind == "cancel" {
				return
			}
			s.c.mouse(x, y, a[5].Int())
		}),
		"onWheel": fn(false, func(a []js.Value) {
			s.c.wheelEvent(a[0].Float(), a[1].Float(), a[2].Float(), a[3].Float(), a[4].Int())
		}),
		"onKey":  fn(false, func(a []js.Value) { s.c.key(a[0].Bool(), a[1].String()) }),
		"onText": fn(true, func(a []js.Value) { s.c.text(a[0].String()) }),
		"onDrawn": fn(false, func(a []js.Value) {
			s.c.drawn(uint32(a[0].Int()))
		}),
		"onClipboard": fn(true, func(a []js.Value) {
			s.notice = s.c.setClipboard(a[0].String())
			if s.notice == "" {
				s.notice = "Pasted into the desktop's clipboard."
			}
		}),
		"onNotice": fn(true, func(a []js.Value) { s.notice = a[0].String() }),
	}
	s.h = glue.Get("desk").Call("create", host, opts)

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

	s.mu.Lock()
	s.connect()
	s.mu.Unlock()
	p.ui = s.snapshot()
	return s
}

// do runs f under the lock and queues a UI refresh.
func (s *deskSession) do(f func()) {
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
		s.ctx.Dispatch(s.refresh)
	}
}

// quiet runs f under the lock; the UI is refreshed only if what it shows changed.
func (s *deskSession) quiet(f func()) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	before := s.snapshot()
	f()
	changed := s.snapshot() != before
	q := changed && !s.queued
	if q {
		s.queued = true
	}
	s.mu.Unlock()
	if q {
		s.ctx.Dispatch(s.refresh)
	}
}

func (s *deskSession) refresh(ctx app.Context) {
	s.mu.Lock()
	s.queued = false
	ui := s.snapshot()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return
	}
	s.panel.ui = ui
	if ui.Phone && ui.Holding {
		s.keysNoBlur()
	}
}

// keysNoBlur keeps the keys bar's taps from blurring the keyboard input (once the bar exists).
func (s *deskSession) keysNoBlur() {
	s.ctx.Defer(func(app.Context) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fullKeys || s.stopped {
			return
		}
		term := js.Global().Get("porthole").Get("term")
		bar := js.Global().Get("document").Call("querySelector", "#"+s.panel.hostID+" ~ .desktop-keys-wrap .terminal-keys")
		if term.Truthy() && bar.Truthy() {
			s.fullKeys = true
			stop := term.Call("noBlur", bar)
			s.cleanups = append(s.cleanups, func() { stop.Invoke() })
		}
	})
}

func (s *deskSession) snapshot() deskUI {
	c := s.c
	u := deskUI{
		Status: s.status, Connected: c.connected, Watching: c.mode != desktop.ModeDrive, Holding: c.holding(),
		Control: c.controlText(), Viewers: c.viewersText(), Err: c.err, Clipboard: c.clipboard,
		Fit: c.view.Fit, Trackpad: c.trackpad(), Phone: s.phone, Mods: c.mods, Conns: s.conns, Notice: s.notice,
	}
	if c.w > 0 {
		u.Size = fmt.Sprintf("%d×%d", c.w, c.h)
	}
	return u
}

// connect opens the WebSocket (mu held).
func (s *deskSession) connect() {
	loc := js.Global().Get("location")
	scheme := "ws:"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss:"
	}
	u := scheme + "//" + loc.Get("host").String() + "/api/agents/" + url.PathEscape(s.agentID) + "/desktop"
	ws := js.Global().Get("WebSocket").New(u)
	ws.Set("binaryType", "arraybuffer")
	s.ws = ws
	s.status = "connecting…"
	onMessage := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.message(ws, args[0].Get("data"))
		return nil
	})
	var funcs []js.Func
	onClose := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.do(func() {
			for _, f := range funcs {
				f.Release()
			}
			if !s.ws.Equal(ws) {
				return
			}
			s.closed(args[0])
		})
		return nil
	})
	funcs = []js.Func{onMessage, onClose}
	ws.Set("onmessage", onMessage)
	ws.Set("onclose", onClose)
	s.wsFuncs = funcs
}

// closed handles the end of the current connection (mu held): schedule a reconnect.
func (s *deskSession) closed(ev js.Value) {
	s.ws = js.Null()
	s.wsFuncs = nil
	s.c.disconnected()
	s.h.Call("resetFrames")
	if s.stopped {
		return
	}
	d := termBackoff(s.attempt)
	s.attempt++
	reason := ""
	if r := ev.Get("reason"); r.Truthy() {
		reason = r.String()
	}
	s.status = deskCloseStatus(ev.Get("code").Int(), reason, d)
	s.timer = time.AfterFunc(d, func() {
		s.do(func() {
			s.timer = nil
			if s.ws.IsNull() {
				s.connect()
			}
		})
	})
}

// rectHeader is a Rect frame's bytes before its data: op, x, y, w, h, encoding, flags.
const rectHeader = desktop.RectHeader

// message handles one frame from the gateway. A Rect's (and ClipRect's) image bytes never
// enter Go: the header is checked here and the buffer goes to desktop.js (and its decoding
// worker). A Copy goes to desktop.js in order with them.
func (s *deskSession) message(ws js.Value, data js.Value) {
	if data.Type() != js.TypeObject {
		return
	}
	n := data.Get("byteLength").Int()
	if n == 0 {
		return
	}
	u8 := js.Global().Get("Uint8Array")
	op := desktop.Op(u8.New(data, 0, 1).Index(0).Int())
	if (op == desktop.OpRect && n > rectHeader) || (op == desktop.OpClipRect && n > desktop.ClipRectHeader) {
		hl := rectHeader
		if op == desktop.OpClipRect {
			hl = desktop.ClipRectHeader
		}
		hdr := make([]byte, hl+1)
		js.CopyBytesToGo(hdr, u8.New(data, 0, hl+1))
		m, err := desktop.Decode(hdr)
		if err != nil {
			js.Global().Get("console").Call("warn", "porthole desktop: "+err.Error())
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped || !s.ws.Equal(ws) {
			return
		}
		switch r := m.(type) {
		case desktop.Rect:
			s.c.handle(r)
			s.h.Call("rect", data, hl, int(r.X), int(r.Y), int(r.W), int(r.H), int(r.Enc), int(r.Flags))
		case desktop.ClipRect:
			s.c.handle(desktop.Rect{X: r.CX, Y: r.CY, W: r.CW, H: r.CH, Enc: r.Enc, Flags: r.Flags})
			s.h.Call("rect", data, hl, int(r.X), int(r.Y), int(r.W), int(r.H), int(r.Enc), int(r.Flags),
				int(r.CX), int(r.CY), int(r.CW), int(r.CH))
		}
		return
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, u8.New(data))
	m, err := desktop.Decode(b)
	if err != nil {
		js.Global().Get("console").Call("warn", "porthole desktop: "+err.Error())
		return
	}
	if c, ok := m.(desktop.Copy); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopped && s.ws.Equal(ws) {
			s.h.Call("copy", int(c.SrcX), int(c.SrcY), int(c.X), int(c.Y), int(c.W), int(c.H))
		}
		return
	}
	apply := func() {
		if !s.ws.Equal(ws) {
			return
		}
		s.c.handle(m)
		if _, ok := m.(desktop.Hello); ok {
			s.attempt = 0
			s.conns++
			s.status = ""
		}
	}
	switch m.(type) {
	case desktop.FrameEnd, desktop.CursorPos:
		s.quiet(apply)
	default:
		s.do(apply)
	}
}

// The deskSink half: called by the client with mu held.

func (s *deskSession) send(m desktop.Message) {
	if s.ws.IsNull() || s.ws.Get("readyState").Int() != 1 {
		return
	}
	b := desktop.Encode(m)
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	s.ws.Call("send", u)
}

func (s *deskSession) setSize(w, h int) { s.h.Call("setSize", w, h) }

func (s *deskSession) setView(v deskView) {
	ox, oy := v.off()
	s.h.Call("setView", v.Scale, ox, oy, v.ScrollX, v.ScrollY)
}

func (s *deskSession) frameEnd(seq uint32) { s.h.Call("frameEnd", int(seq)) }

func (s *deskSession) cursorShape(c desktop.CursorShape) {
	u := js.Global().Get("Uint8ClampedArray").New(len(c.RGBA))
	js.CopyBytesToJS(u, c.RGBA)
	s.h.Call("cursorShape", u, int(c.W), int(c.H), int(c.HotX), int(c.HotY))
}

func (s *deskSession) cursorPos(x, y int, local bool) { s.h.Call("cursorPos", x, y, local) }

func (s *deskSession) setCapture(on bool) { s.h.Call("setCapture", on) }

func (s *deskSession) after(d time.Duration, f func(time.Time)) {
	time.AfterFunc(d, func() { s.quiet(func() { f(time.Now()) }) })
}

// The panel's actions (deskDriver), on the UI goroutine.

func (s *deskSession) takeControl() { s.do(s.c.takeControl) }
func (s *deskSession) release()     { s.do(s.c.release) }
func (s *deskSession) setFit(fit bool) {
	s.do(func() { s.c.setFit(fit) })
}
func (s *deskSession) setTrackpad(on bool) {
	s.do(func() {
		s.c.setTrackpad(on)
		s.h.Call("setTrackpad", on)
	})
}
func (s *deskSession) keyboard() { s.do(func() { s.h.Call("focusKeyboard") }) }
func (s *deskSession) barKey(name string) {
	s.do(func() {
		s.c.barKey(name)
		s.h.Call("focusKeyboard")
	})
}
func (s *deskSession) fullscreen() { s.do(func() { s.h.Call("fullscreen") }) }
func (s *deskSession) pasteLocal() { s.do(func() { s.notice = ""; s.h.Call("readClipboard") }) }
func (s *deskSession) sendClipboard(text string) {
	s.do(func() {
		s.notice = s.c.setClipboard(text)
		if s.notice == "" {
			s.notice = "Sent to the desktop's clipboard."
		}
	})
}
func (s *deskSession) copyLocal(text string) {
	s.do(func() { s.h.Call("writeClipboard", text) })
}

func (s *deskSession) reconnect() {
	s.do(func() {
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		if s.ws.IsNull() {
			s.connect()
		}
	})
}

// stop closes the WebSocket and disposes of the canvas; the display keeps running.
func (s *deskSession) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if !s.ws.IsNull() {
		s.ws.Set("onmessage", js.Null())
		s.ws.Set("onclose", js.Null())
		s.ws.Call("close", 1000, "panel closed")
		for _, f := range s.wsFuncs {
			f.Release()
		}
		s.ws, s.wsFuncs = js.Null(), nil
	}
	s.h.Call("dispose")
	for _, f := range s.funcs {
		f.Release()
	}
	for _, f := range s.cleanups {
		f()
	}
}

var _ deskSink = (*deskSession)(nil)
var _ deskDriver = (*deskSession)(nil)
