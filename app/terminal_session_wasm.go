//go:build js && wasm

package app

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/terminal"
)

// phoneQuery decides when the keys bar is shown.
const phoneQuery = "(max-width: 700px), (pointer: coarse)"

// termSession is the browser half of a TerminalPanel: the WebSocket and
// reconnection (wsSession's, with its own rule for a close on an access change)
// and the xterm.js screens (through window.porthole.term,
// assets/static/terminal.js). Every entry point takes mu; JavaScript calls made
// under it never call back synchronously (terminal.js defers its callbacks), so
// it is never re-entered. UI state reaches the panel through ctx.Dispatch, at
// most one queued at a time.
type termSession struct {
	wsSession
	panel  *TerminalPanel
	hostID string

	c        *termClient
	screens  map[uint32]*termScreen
	blocked  bool   // no automatic reconnect (access removed, agent gone): the user decides
	flashMsg string // a passing message (paste refused)
	noticeT  *time.Timer
	mods     termMods
	found    string
	shown    uint32
	noBlur   bool // the keys bar keeps the focus on the terminal
}

// termScreen is one xterm.js instance.
type termScreen struct {
	h     js.Value // the handle from porthole.term.create
	funcs []js.Func
}

func newTermSession(ctx app.Context, p *TerminalPanel) termDriver {
	return newTermSessionTry(ctx, p, 0)
}

// newTermSessionTry waits up to 5 s for the deferred scripts (xterm.js, terminal.js).
func newTermSessionTry(ctx app.Context, p *TerminalPanel, try int) termDriver {
	glue := js.Global().Get("porthole")
	if !glue.Truthy() || !glue.Get("term").Truthy() || !js.Global().Get("Terminal").Truthy() {
		if try >= 50 {
			p.ui.Status = "terminal unavailable: xterm.js did not load"
			return nil
		}
		agent := p.AgentID
		ctx.After(100*time.Millisecond, func(ctx app.Context) {
			if p.sess == nil && p.started == agent && p.Mounted() {
				p.sess = newTermSessionTry(ctx, p, try+1)
			}
		})
		return nil
	}
	s := &termSession{panel: p, hostID: p.hostID, screens: map[uint32]*termScreen{}}
	s.ctx, s.agentID, s.surface, s.ws = ctx, p.AgentID, "terminal", js.Null()
	s.onMessage, s.onClosed, s.onRefresh = s.message, s.closed, s.refresh
	s.c = newTermClient(s, terminal.ModeOf(p.Mode))
	s.c.want = p.Term
	s.status = "connecting…"

	// Phone layout: follow the media query.
	s.watchPhone()
	// The visual viewport (soft keyboard): refit the shown screen.
	onVV := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.do(func() {
			if sc := s.screens[s.c.active]; sc != nil {
				sc.h.Call("fit")
			}
		})
		return nil
	})
	stopVV := glue.Get("term").Call("watchViewport", onVV)
	s.cleanups = append(s.cleanups, func() {
		stopVV.Invoke()
		onVV.Release()
	})

	s.mu.Lock()
	s.connect()
	s.mu.Unlock()
	p.ui = s.snapshot()
	return s
}

// refresh copies the state into the panel (on the UI goroutine) and shows the active screen.
func (s *termSession) refresh(ctx app.Context) {
	s.mu.Lock()
	s.queued = false
	ui := s.snapshot()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.syncShown()
	s.mu.Unlock()
	s.panel.ui = ui
}

func (s *termSession) snapshot() termUI {
	return termUI{View: s.c.view(), Status: s.status, Blocked: s.blocked, Connected: s.c.connected, Mods: s.mods,
		Found: s.found, Phone: s.phone, Conns: s.conns, Notice: s.flashMsg}
}

// syncShown shows the active screen only; a newly shown screen is fitted and focused.
func (s *termSession) syncShown() {
	active := s.c.active
	for id, sc := range s.screens {
		sc.h.Call("show", id == active)
	}
	if active != s.shown {
		s.shown = active
		if sc := s.screens[active]; sc != nil {
			sc.h.Call("fit")
			sc.h.Call("focus")
		}
	}
}

// closed handles the end of the current connection (mu held): detach, then reconnect. A close
// for an access change (1008: share, permissions, password, agent deleted) first asks the API
// whether the user may still watch this terminal: if so it reconnects at once, else it says
// why in a sentence and waits for the user. Anything else reconnects with backoff.
func (s *termSession) closed(code int, reason string) {
	s.c.disconnected()
	for _, sc := range s.screens {
		sc.h.Call("resetAcks")
	}
	if s.stopped {
		return
	}
	if code == 1008 {
		s.status = "Your access changed: checking it…"
		go s.checkAccess() // owner: this session; one API call, then it returns
		return
	}
	why := "Connection lost"
	if code == 1001 {
		why = "The server is restarting"
	}
	s.retry(why)
}

// retry schedules a reconnect with backoff (mu held).
func (s *termSession) retry(why string) {
	d := s.backoff()
	s.status = why + ": reconnecting in " + d.Round(100*time.Millisecond).String() + "…"
}

// checkAccess runs off the lock: may the user still watch this agent's terminal?
func (s *termSession) checkAccess() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := apiClient.Agent(ctx, s.agentID)
	s.do(func() {
		if s.stopped || !s.ws.IsNull() {
			return
		}
		switch {
		case errors.Is(err, ErrUnauthorized):
			s.blocked, s.status = true, "You were logged out (your password changed, or the session was ended)."
			forgetUser()
			s.ctx.Dispatch(func(ctx app.Context) { ctx.Navigate(loginURL(ctx.Page().URL())) })
		case errors.Is(err, ErrNotFound):
			s.blocked, s.status = true, "This agent was deleted, or it is no longer shared with you."
		case err != nil:
			s.retry("The server cannot be reached")
		case !a.Access.Terminal.AtLeast(api.LevelWatch):
			s.blocked, s.status = true, "Your access to this agent's terminal was removed."
		default:
			s.attempt = 0
			s.connect() // still allowed (perhaps at another level): the server's Hello says which
		}
	})
}

// message handles one frame from the server.
func (s *termSession) message(ws js.Value, data js.Value) {
	if data.Type() != js.TypeObject {
		return // text frames are not part of the protocol
	}
	n := data.Get("byteLength").Int()
	if n == 0 {
		return
	}
	u8 := js.Global().Get("Uint8Array")
	first := u8.New(data, 0, 1).Index(0).Int()
	if terminal.Op(first) == terminal.OpOutput && n >= terminal.OutputHeaderLen {
		// Output: decode only the header in Go; the bytes go straight to xterm.js.
		hdr := make([]byte, terminal.OutputHeaderLen)
		js.CopyBytesToGo(hdr, u8.New(data, 0, terminal.OutputHeaderLen))
		m, err := terminal.Decode(hdr)
		if err != nil {
			return
		}
		out := m.(terminal.Output)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped || !s.ws.Equal(ws) {
			return
		}
		skip, write := s.c.output(out.ID, out.Seq, n-terminal.OutputHeaderLen)
		if sc := s.screens[out.ID]; write && sc != nil {
			sc.h.Call("write", u8.New(data, terminal.OutputHeaderLen+skip))
		}
		return
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, u8.New(data))
	m, err := terminal.Decode(b)
	if err != nil {
		js.Global().Get("console").Call("warn", "porthole terminal: "+err.Error())
		return
	}
	s.do(func() {
		if !s.ws.Equal(ws) {
			return
		}
		s.c.handle(m)
		if _, ok := m.(terminal.Hello); ok {
			s.hello()
			s.blocked = false
			ack := s.c.ackBytes()
			for _, sc := range s.screens {
				sc.h.Call("setAckBytes", ack)
			}
		}
	})
}

// send implements termSink.
func (s *termSession) send(m terminal.Message) {
	s.sendBytes(func() []byte { return terminal.Encode(m) })
}

// create implements termSink: a new xterm.js screen in the panel's host element.
func (s *termSession) create(id uint32) {
	host := js.Global().Get("document").Call("getElementById", s.hostID)
	if !host.Truthy() {
		return
	}
	sc := &termScreen{}
	fn := func(f func(args []js.Value)) js.Func {
		jf := js.FuncOf(func(this js.Value, args []js.Value) any {
			s.do(func() { f(args) })
			return nil
		})
		sc.funcs = append(sc.funcs, jf)
		return jf
	}
	opts := map[string]any{
		"readOnly": !s.c.driving(id),
		"ackBytes": s.c.ackBytes(),
		"fontSize": termFontSize(),
		"onNotice": fn(func(a []js.Value) { s.flash(a[0].String()) }),
		"onFontSize": fn(func(a []js.Value) {
			// A pinch changed the size: every terminal follows, and this device remembers it.
			localSet(termFontKey, strconv.Itoa(clampFont(a[0].Int())))
		}),
		"onData": fn(func(a []js.Value) {
			data := a[0].String()
			if s.mods.any() {
				data = termApplyMods(data, s.mods)
				s.mods = termMods{}
			}
			s.c.input(id, []byte(data))
		}),
		"onBinary": fn(func(a []js.Value) {
			str := a[0].String()
			b := make([]byte, 0, len(str))
			for _, r := range str {
				b = append(b, byte(r))
			}
			s.c.input(id, b)
		}),
		"onResize": fn(func(a []js.Value) { s.c.resized(id, a[0].Int(), a[1].Int()) }),
		"onTitle":  fn(func(a []js.Value) { s.c.setTitle(id, a[0].String()) }),
		"onAck":    fn(func(a []js.Value) { s.c.ack(id, a[0].Int()) }),
		"onSearch": fn(func(a []js.Value) {
			i, n := a[0].Int(), a[1].Int()
			switch {
			case n == 0:
				s.found = "no match"
			case i < 0:
				s.found = strconv.Itoa(n) + " matches"
			default:
				s.found = strconv.Itoa(i+1) + " of " + strconv.Itoa(n)
			}
		}),
	}
	sc.h = js.Global().Get("porthole").Get("term").Call("create", host, opts)
	sc.h.Call("show", false)
	s.screens[id] = sc
	if !s.noBlur {
		// Keep the keys bar's taps from blurring the terminal.
		if bar := js.Global().Get("document").Call("querySelector", "#"+s.hostID+" ~ .terminal-keys"); bar.Truthy() {
			s.noBlur = true
			stop := js.Global().Get("porthole").Get("term").Call("noBlur", bar)
			s.cleanups = append(s.cleanups, func() { stop.Invoke() })
		}
	}
}

// remove implements termSink.
func (s *termSession) remove(id uint32) {
	if sc := s.screens[id]; sc != nil {
		sc.h.Call("dispose")
		for _, f := range sc.funcs {
			f.Release()
		}
		delete(s.screens, id)
	}
}

// notice implements termSink: a dim line of our own, not counted as output.
func (s *termSession) notice(id uint32, text string) {
	if sc := s.screens[id]; sc != nil {
		sc.h.Call("writeLocal", "\r\n\x1b[2m["+terminal.SanitizeTitle(text)+"]\x1b[0m\r\n")
	}
}

// size implements termSink.
func (s *termSession) size(id uint32) (uint16, uint16) {
	sc := s.screens[id]
	if sc == nil {
		return 0, 0
	}
	sz := sc.h.Call("size")
	return uint16(sz.Get("cols").Int()), uint16(sz.Get("rows").Int())
}

// setReadOnly implements termSink.
func (s *termSession) setReadOnly(id uint32, ro bool) {
	if sc := s.screens[id]; sc != nil {
		sc.h.Call("setReadOnly", ro)
	}
}

// setFixedSize implements termSink.
func (s *termSession) setFixedSize(id uint32, cols, rows uint16) {
	if sc := s.screens[id]; sc != nil {
		sc.h.Call("setFixedSize", int(cols), int(rows))
	}
}

// The panel's actions (termDriver), called on the UI goroutine.

func (s *termSession) open()              { s.do(s.c.open) }
func (s *termSession) closeTab(id uint32) { s.do(func() { s.c.closeTab(id) }) }
func (s *termSession) activate(id uint32) {
	s.do(func() {
		if _, ok := s.c.terms[id]; ok {
			s.c.active = id
			s.found = ""
			replaceURL(agentHref(s.agentID, api.SurfaceTerminal) + "&term=" + strconv.FormatUint(uint64(id), 10))
		}
	})
}

// flash shows a passing notice for a few seconds (mu held).
func (s *termSession) flash(text string) {
	s.flashMsg = text
	if s.noticeT != nil {
		s.noticeT.Stop()
	}
	s.noticeT = time.AfterFunc(6*time.Second, func() { s.do(func() { s.flashMsg = "" }) })
}

func (s *termSession) key(name string) {
	s.do(func() {
		switch name {
		case termKeyCtrl:
			s.mods.Ctrl = !s.mods.Ctrl
		case termKeyAlt:
			s.mods.Alt = !s.mods.Alt
		default:
			if seq, ok := termKeySeq(name, s.mods); ok {
				s.c.input(s.c.active, []byte(seq))
				s.mods = termMods{}
			}
		}
		if sc := s.screens[s.c.active]; sc != nil {
			sc.h.Call("focus")
		}
	})
}

func (s *termSession) search(text string, backwards bool) {
	s.do(func() {
		sc := s.screens[s.c.active]
		if sc == nil {
			return
		}
		if text == "" {
			sc.h.Call("clearSearch")
			s.found = ""
			return
		}
		sc.h.Call("search", text, backwards)
	})
}

func (s *termSession) clearSearch() {
	s.do(func() {
		if sc := s.screens[s.c.active]; sc != nil {
			sc.h.Call("clearSearch")
		}
		s.found = ""
	})
}

func (s *termSession) copySelection() {
	s.do(func() {
		if sc := s.screens[s.c.active]; sc != nil {
			sc.h.Call("copy")
		}
	})
}

func (s *termSession) paste() {
	s.do(func() {
		if sc := s.screens[s.c.active]; sc != nil && s.c.driving(s.c.active) {
			sc.h.Call("pasteClipboard")
		}
	})
}

// reconnect drops the waiting time of a pending reconnect.
func (s *termSession) reconnect() {
	s.do(func() {
		s.blocked = false
		s.redial()
	})
}

// stop closes the WebSocket and disposes of the screens; the terminals keep running.
func (s *termSession) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.halt() {
		return
	}
	if s.noticeT != nil {
		s.noticeT.Stop()
	}
	for id := range s.screens {
		s.remove(id)
	}
	s.finish()
}

var _ termSink = (*termSession)(nil)
var _ termDriver = (*termSession)(nil)
