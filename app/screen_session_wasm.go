//go:build js && wasm

package app

import (
	"strings"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// screenSession is what the desktop's and the browser's sessions share: both drive the
// canvas viewer (window.porthole.desk, assets/static/desktop.js, with its decoder worker,
// scale-to-fit, pan and pointer events) through a deskClient, over a wsSession. U is the
// panel's UI state; desktop.js calls back into Go only from events and microtasks, never
// inside a call Go made, so mu is never re-entered. Input events (pointer moves) re-render
// only if what the panel shows changed.
type screenSession[U comparable] struct {
	wsSession
	hostID string
	desk   *deskClient // the viewer's protocol and input logic
	h      js.Value    // the desktop.js handle
	funcs  []js.Func   // the handle's callbacks

	notice   string
	fullKeys bool // the keys bar got noBlur

	snap func() U // the panel's state (mu held)
	show func(U)  // puts it into the panel (UI goroutine)
	lost func()   // the client's side of a lost connection (mu held)
}

// init sets up the shared parts; the caller sets desk, snap, show and lost before open.
func (s *screenSession[U]) init(ctx app.Context, agentID, surface, hostID string) {
	s.ctx, s.agentID, s.surface, s.hostID = ctx, agentID, surface, hostID
	s.ws, s.status = js.Null(), "connecting…"
	s.onRefresh, s.onClosed = s.refresh, s.closed
}

// screenGlue returns desktop.js's viewer and the panel's host element, if both exist yet.
func screenGlue(hostID string) (desk, host js.Value, ok bool) {
	glue := js.Global().Get("porthole")
	host = js.Global().Get("document").Call("getElementById", hostID)
	if !glue.Truthy() || !glue.Get("desk").Truthy() || !host.Truthy() {
		return js.Undefined(), js.Undefined(), false
	}
	return glue.Get("desk"), host, true
}

// callback makes one of the handle's callbacks: f runs under the lock, then the UI is
// refreshed (always, or with refresh false only if what it shows changed).
func (s *screenSession[U]) callback(refresh bool, f func(args []js.Value)) js.Func {
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

// open creates the canvas in host with the viewer's callbacks (extra, made with callback,
// adds to them or replaces some), follows the phone layout and connects.
func (s *screenSession[U]) open(desk, host js.Value, extra map[string]any) {
	d := s.desk
	opts := extra
	if opts == nil {
		opts = map[string]any{}
	}
	set := func(name string, refresh bool, f func(args []js.Value)) {
		if _, ok := opts[name]; !ok {
			opts[name] = s.callback(refresh, f)
		}
	}
	set("onViewport", false, func(a []js.Value) { d.viewport(a[0].Float(), a[1].Float()) })
	set("onScroll", false, func(a []js.Value) { d.scrolled(a[0].Float(), a[1].Float()) })
	set("onPointer", false, func(a []js.Value) {
		kind, typ := a[0].String(), a[1].String()
		x, y := a[3].Float(), a[4].Float()
		if typ == "touch" {
			d.touch(kind, a[2].Int(), x, y, time.Now())
			return
		}
		if kind == "cancel" {
			return
		}
		d.mouse(x, y, a[5].Int())
	})
	set("onWheel", false, func(a []js.Value) {
		d.wheelEvent(a[0].Float(), a[1].Float(), a[2].Float(), a[3].Float(), a[4].Int())
	})
	set("onKey", false, func(a []js.Value) { d.key(a[0].Bool(), a[1].String()) })
	set("onText", true, func(a []js.Value) { d.text(a[0].String()) })
	set("onDrawn", false, func(a []js.Value) { d.drawn(uint32(a[0].Int())) })
	set("onNotice", true, func(a []js.Value) { s.notice = a[0].String() })
	s.h = desk.Call("create", host, opts)
	s.watchPhone()

	s.mu.Lock()
	s.connect()
	s.mu.Unlock()
}

// quiet runs f under the lock; the UI is refreshed only if what it shows changed.
func (s *screenSession[U]) quiet(f func()) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	before := s.snap()
	f()
	changed := s.snap() != before
	q := changed && !s.queued
	if q {
		s.queued = true
	}
	s.mu.Unlock()
	if q {
		s.ctx.Dispatch(s.refresh)
	}
}

func (s *screenSession[U]) refresh(ctx app.Context) {
	s.mu.Lock()
	s.queued = false
	ui := s.snap()
	keys := s.phone && s.desk.holding()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return
	}
	s.show(ui)
	if keys {
		s.keysNoBlur()
	}
}

// keysNoBlur keeps the keys bar's taps from blurring the keyboard input (once the bar exists).
func (s *screenSession[U]) keysNoBlur() {
	s.ctx.Defer(func(app.Context) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fullKeys || s.stopped {
			return
		}
		term := js.Global().Get("porthole").Get("term")
		bar := js.Global().Get("document").Call("querySelector", "#"+s.hostID+" ~ .desktop-keys-wrap .terminal-keys")
		if term.Truthy() && bar.Truthy() {
			s.fullKeys = true
			stop := term.Call("noBlur", bar)
			s.cleanups = append(s.cleanups, func() { stop.Invoke() })
		}
	})
}

// closed handles the end of the current connection (mu held): schedule a reconnect.
func (s *screenSession[U]) closed(code int, reason string) {
	s.lost()
	s.h.Call("resetFrames")
	if s.stopped {
		return
	}
	d := s.backoff()
	s.status = strings.Replace(deskCloseStatus(code, reason, d), "this desktop", "this "+s.surface, 1)
}

// The canvas half of the client's sink (deskSink, bvSink): called with mu held.

func (s *screenSession[U]) setSize(w, h int) { s.h.Call("setSize", w, h) }

func (s *screenSession[U]) setView(v deskView) {
	ox, oy := v.off()
	s.h.Call("setView", v.Scale, ox, oy, v.ScrollX, v.ScrollY)
}

func (s *screenSession[U]) frameEnd(seq uint32) { s.h.Call("frameEnd", int(seq)) }

func (s *screenSession[U]) cursorPos(x, y int, local bool) { s.h.Call("cursorPos", x, y, local) }

func (s *screenSession[U]) setCapture(on bool) { s.h.Call("setCapture", on) }

func (s *screenSession[U]) after(d time.Duration, f func(time.Time)) {
	time.AfterFunc(d, func() { s.quiet(func() { f(time.Now()) }) })
}

// The panel's actions (deskDriver, bvDriver), on the UI goroutine.

func (s *screenSession[U]) takeControl() { s.do(s.desk.takeControl) }
func (s *screenSession[U]) release()     { s.do(s.desk.release) }
func (s *screenSession[U]) setFit(fit bool) {
	s.do(func() { s.desk.setFit(fit) })
}
func (s *screenSession[U]) setTrackpad(on bool) {
	s.do(func() {
		s.desk.setTrackpad(on)
		s.h.Call("setTrackpad", on)
	})
}
func (s *screenSession[U]) keyboard() { s.do(func() { s.h.Call("focusKeyboard") }) }
func (s *screenSession[U]) barKey(name string) {
	s.do(func() {
		s.desk.barKey(name)
		s.h.Call("focusKeyboard")
	})
}
func (s *screenSession[U]) fullscreen() { s.do(func() { s.h.Call("fullscreen") }) }

func (s *screenSession[U]) reconnect() { s.do(s.redial) }

// stop closes the WebSocket and disposes of the canvas; the display (or browser) keeps running.
func (s *screenSession[U]) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.halt() {
		return
	}
	s.h.Call("dispose")
	for _, f := range s.funcs {
		f.Release()
	}
	s.finish()
}
