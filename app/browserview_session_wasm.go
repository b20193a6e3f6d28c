//go:build js && wasm

package app

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
)

// bvSession is the browser half of a BrowserPanel: the WebSocket, the canvas (the desktop
// viewer's, window.porthole.desk of assets/static/desktop.js, with its decoder worker,
// scale-to-fit, pan and pointer events) and reconnection. Every entry point takes mu;
// desktop.js calls back into Go only from events and microtasks, never inside a call Go
// made, so mu is never re-entered. UI state reaches the panel through ctx.Dispatch.
type bvSession struct {
	ctx     app.Context
	panel   *BrowserPanel
	agentID string

	mu        sync.Mutex
	c         *bvClient
	h         js.Value // the desktop.js handle
	ws        js.Value
	wsFuncs   []js.Func
	funcs     []js.Func
	attempt   int
	conns     int
	timer     *time.Timer
	status    string
	notice    string
	uploading string
	phone     bool
	fullKeys  bool
	stopped   bool
	queued    bool
	cleanups  []func()
	vw, vh    float64 // the viewport (CSS px)
}

func newBVSession(ctx app.Context, p *BrowserPanel) bvDriver { return newBVSessionTry(ctx, p, 0) }

// newBVSessionTry waits up to 5 s for the deferred desktop.js.
func newBVSessionTry(ctx app.Context, p *BrowserPanel, try int) bvDriver {
	glue := js.Global().Get("porthole")
	host := js.Global().Get("document").Call("getElementById", p.hostID)
	if !glue.Truthy() || !glue.Get("desk").Truthy() || !host.Truthy() {
		if try >= 50 {
			p.ui.Status = "browser viewer unavailable: desktop.js did not load"
			return nil
		}
		agent := p.AgentID
		ctx.After(100*time.Millisecond, func(ctx app.Context) {
			if p.sess == nil && p.started == agent && p.Mounted() {
				p.sess = newBVSessionTry(ctx, p, try+1)
			}
		})
		return nil
	}
	s := &bvSession{ctx: ctx, panel: p, agentID: p.AgentID, ws: js.Null(), status: "connecting…"}
	mode := browser.ModeWatch
	if p.Mode == api.LevelDrive {
		mode = browser.ModeDrive
	}
	s.c = newBVClient(s, mode)
	d := s.c.desk

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
		"onViewport": fn(false, func(a []js.Value) {
			s.vw, s.vh = a[0].Float(), a[1].Float()
			d.viewport(s.vw, s.vh)
			s.sendResize()
		}),
		"onScroll": fn(false, func(a []js.Value) { d.scrolled(a[0].Float(), a[1].Float()) }),
		"onPointer": fn(false, func(a []js.Value) {
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
		}),
		"onWheel": fn(false, func(a []js.Value) {
			d.wheelEvent(a[0].Float(), a[1].Float(), a[2].Float(), a[3].Float(), a[4].Int())
		}),
		"onKey":    fn(false, func(a []js.Value) { d.key(a[0].Bool(), a[1].String()) }),
		"onText":   fn(true, func(a []js.Value) { d.text(a[0].String()) }),
		"onDrawn":  fn(false, func(a []js.Value) { d.drawn(uint32(a[0].Int())) }),
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

// sendResize tells the gateway our drawing size in device pixels (mu held).
func (s *bvSession) sendResize() {
	if s.vw <= 0 || s.vh <= 0 {
		return
	}
	dpr := js.Global().Get("devicePixelRatio").Float()
	if !(dpr >= 1) {
		dpr = 1
	}
	w, h := s.vw*dpr, s.vh*dpr
	s.sendBV(browser.Resize{W: uint16(min(w, browser.MaxViewSize)), H: uint16(min(h, browser.MaxViewSize))})
}

func (s *bvSession) do(f func()) {
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

func (s *bvSession) quiet(f func()) {
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

func (s *bvSession) refresh(ctx app.Context) {
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

func (s *bvSession) keysNoBlur() {
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

func (s *bvSession) snapshot() bvUI {
	c, d := s.c, s.c.desk
	u := bvUI{
		Status: s.status, Connected: d.connected, Watching: d.mode != 2, Holding: d.holding(),
		Automating: c.automating, Control: c.controlText(), Viewers: d.viewersText(), Err: d.err,
		Notice: s.notice, Fit: d.view.Fit, Trackpad: d.trackpad(), Phone: s.phone, Mods: d.mods,
		Conns: s.conns, Frames: d.frames, Nav: c.nav, Dialog: c.dialog, Chooser: c.chooser,
		Uploading: s.uploading,
	}
	if d.w > 0 {
		u.Size = fmt.Sprintf("%d×%d", d.w, d.h)
	}
	var tabs strings.Builder
	for _, t := range c.tabs {
		fmt.Fprintf(&tabs, "%q %q %q %q %v\n", t.ID, t.Title, t.URL, t.Favicon, t.Active)
	}
	u.Tabs = tabs.String()
	lines := make([]string, len(c.downloads))
	for i, dl := range c.downloads {
		done := "0"
		if dl.State == browser.DownloadCompleted {
			done = "1"
		}
		lines[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(dl.ID) + "\t" +
			strings.NewReplacer("\t", " ", "\n", " ").Replace(downloadText(dl)) + "\t" + done
	}
	u.Downloads = strings.Join(lines, "\n")
	if c.sel.Open {
		opts := make([]string, len(c.sel.Options))
		for i, o := range c.sel.Options {
			d := "0"
			if o.Disabled {
				d = "1"
			}
			opts[i] = d + "\t" + strings.NewReplacer("\n", " ", "\t", " ").Replace(o.Label)
		}
		u.Select = strings.Join(opts, "\n")
		if u.Select == "" {
			u.Select = "1\t(no options)"
		}
		u.Selected = int(c.sel.Selected)
	}
	return u
}

func (s *bvSession) tabList() []browser.TabInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]browser.TabInfo(nil), s.c.tabs...)
}

// connect opens the WebSocket (mu held).
func (s *bvSession) connect() {
	loc := js.Global().Get("location")
	scheme := "ws:"
	if loc.Get("protocol").String() == "https:" {
		scheme = "wss:"
	}
	u := scheme + "//" + loc.Get("host").String() + "/api/agents/" + url.PathEscape(s.agentID) + "/browser"
	ws := js.Global().Get("WebSocket").New(u)
	ws.Set("binaryType", "arraybuffer")
	s.ws = ws
	s.status = "connecting…"
	onMessage := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.message(ws, args[0].Get("data"))
		return nil
	})
	onOpen := js.FuncOf(func(this js.Value, args []js.Value) any {
		s.quiet(func() {
			if s.ws.Equal(ws) {
				s.sendResize()
			}
		})
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
	funcs = []js.Func{onMessage, onOpen, onClose}
	ws.Set("onmessage", onMessage)
	ws.Set("onopen", onOpen)
	ws.Set("onclose", onClose)
	s.wsFuncs = funcs
}

func (s *bvSession) closed(ev js.Value) {
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
	s.status = strings.Replace(deskCloseStatus(ev.Get("code").Int(), reason, d), "this desktop", "this browser", 1)
	s.timer = time.AfterFunc(d, func() {
		s.do(func() {
			s.timer = nil
			if s.ws.IsNull() {
				s.connect()
			}
		})
	})
}

// frameHeader is a Frame message's bytes before its JPEG: op, seq, w, h, scroll x, scroll y.
const frameHeader = 17

// message handles one message from the gateway. A frame's JPEG never enters Go: the header
// is decoded here and the buffer goes to desktop.js (and its decoding worker).
func (s *bvSession) message(ws js.Value, data js.Value) {
	if data.Type() != js.TypeObject {
		return
	}
	n := data.Get("byteLength").Int()
	if n == 0 {
		return
	}
	u8 := js.Global().Get("Uint8Array")
	if browser.Op(u8.New(data, 0, 1).Index(0).Int()) == browser.OpFrame && n > frameHeader {
		hdr := make([]byte, frameHeader+1)
		js.CopyBytesToGo(hdr, u8.New(data, 0, frameHeader+1))
		m, err := browser.Decode(hdr)
		if err != nil {
			js.Global().Get("console").Call("warn", "porthole browser: "+err.Error())
			return
		}
		f := m.(browser.Frame)
		if f.W == 0 || f.H == 0 {
			return
		}
		s.quiet(func() {
			if !s.ws.Equal(ws) {
				return
			}
			s.h.Call("rect", data, frameHeader, 0, 0, int(f.W), int(f.H), 1)
			s.c.handle(f)
		})
		return
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, u8.New(data))
	m, err := browser.Decode(b)
	if err != nil {
		js.Global().Get("console").Call("warn", "porthole browser: "+err.Error())
		return
	}
	s.do(func() {
		if !s.ws.Equal(ws) {
			return
		}
		s.c.handle(m)
		if _, ok := m.(browser.Hello); ok {
			s.attempt = 0
			s.conns++
			s.status = ""
			s.sendResize()
		}
	})
}

// The bvSink half: called by the client with mu held.

func (s *bvSession) sendBV(m browser.Message) {
	if s.ws.IsNull() || s.ws.Get("readyState").Int() != 1 {
		return
	}
	b := browser.Encode(m)
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	s.ws.Call("send", u)
}

func (s *bvSession) setSize(w, h int) { s.h.Call("setSize", w, h) }

func (s *bvSession) setView(v deskView) {
	ox, oy := v.off()
	s.h.Call("setView", v.Scale, ox, oy, v.ScrollX, v.ScrollY)
}

func (s *bvSession) frameEnd(seq uint32) { s.h.Call("frameEnd", int(seq)) }

func (s *bvSession) cursorShape(c desktop.CursorShape) {} // the page's cursor is not sent

func (s *bvSession) cursorPos(x, y int, local bool) { s.h.Call("cursorPos", x, y, local) }

func (s *bvSession) setCapture(on bool) { s.h.Call("setCapture", on) }

func (s *bvSession) after(d time.Duration, f func(time.Time)) {
	time.AfterFunc(d, func() { s.quiet(func() { f(time.Now()) }) })
}

// The panel's actions (bvDriver), on the UI goroutine.

func (s *bvSession) takeControl() { s.do(s.c.desk.takeControl) }
func (s *bvSession) release()     { s.do(s.c.desk.release) }
func (s *bvSession) setFit(fit bool) {
	s.do(func() { s.c.desk.setFit(fit) })
}
func (s *bvSession) setTrackpad(on bool) {
	s.do(func() {
		s.c.desk.setTrackpad(on)
		s.h.Call("setTrackpad", on)
	})
}
func (s *bvSession) keyboard() { s.do(func() { s.h.Call("focusKeyboard") }) }
func (s *bvSession) barKey(name string) {
	s.do(func() {
		s.c.desk.barKey(name)
		s.h.Call("focusKeyboard")
	})
}
func (s *bvSession) fullscreen() { s.do(func() { s.h.Call("fullscreen") }) }

func (s *bvSession) navigate(u string) {
	s.do(func() {
		s.notice = ""
		if !s.c.navigate(u) {
			s.notice = "Take control to open an address."
		}
	})
}
func (s *bvSession) history(a uint8) { s.do(func() { s.c.command(browser.History{Action: a}) }) }
func (s *bvSession) tabNew()         { s.do(func() { s.c.command(browser.TabNew{}) }) }
func (s *bvSession) tabSwitch(id string) {
	s.do(func() { s.c.command(browser.TabSwitch{ID: id}) })
}
func (s *bvSession) tabClose(id string) { s.do(func() { s.c.command(browser.TabClose{ID: id}) }) }
func (s *bvSession) answerDialog(accept bool, prompt string) {
	s.do(func() { s.c.answerDialog(accept, prompt) })
}
func (s *bvSession) choose(i int)   { s.do(func() { s.c.choose(i) }) }
func (s *bvSession) cancelChooser() { s.do(func() { s.c.command(browser.FileDone{Cancel: true}) }) }

// upload reads the chosen files (at most browser.MaxFiles, each at most browser.MaxUpload
// bytes) and sends them in chunks, then FileDone.
func (s *bvSession) upload(inputID string) {
	input := js.Global().Get("document").Call("getElementById", inputID)
	if !input.Truthy() {
		return
	}
	files := input.Get("files")
	n := files.Get("length").Int()
	if n == 0 {
		return
	}
	if n > browser.MaxFiles {
		s.do(func() { s.notice = fmt.Sprintf("At most %d files at once.", browser.MaxFiles) })
		return
	}
	var list []js.Value
	for i := 0; i < n; i++ {
		f := files.Call("item", i)
		if f.Get("size").Float() > browser.MaxUpload {
			s.do(func() {
				s.notice = fmt.Sprintf("%s is over the %d MiB upload limit.", f.Get("name").String(), browser.MaxUpload>>20)
			})
			return
		}
		list = append(list, f)
	}
	s.do(func() { s.uploading = "uploading…" })
	s.uploadNext(list, 0)
}

func (s *bvSession) uploadNext(list []js.Value, i int) {
	if i == len(list) {
		s.do(func() {
			s.uploading = ""
			s.c.command(browser.FileDone{})
		})
		return
	}
	f := list[i]
	var then, fail js.Func
	release := func() { then.Release(); fail.Release() }
	then = js.FuncOf(func(this js.Value, args []js.Value) any {
		release()
		buf := js.Global().Get("Uint8Array").New(args[0])
		size := buf.Get("length").Int()
		ok := true
		s.do(func() {
			s.uploading = fmt.Sprintf("uploading %s…", f.Get("name").String())
			if !s.c.command(browser.FileBegin{Name: f.Get("name").String(), Size: uint32(size)}) {
				ok = false
				return
			}
			chunk := make([]byte, browser.MaxChunk)
			for off := 0; off < size; off += browser.MaxChunk {
				end := min(off+browser.MaxChunk, size)
				js.CopyBytesToGo(chunk[:end-off], buf.Call("subarray", off, end))
				s.c.command(browser.FileData{Data: chunk[:end-off]})
			}
		})
		if ok {
			s.uploadNext(list, i+1)
		}
		return nil
	})
	fail = js.FuncOf(func(this js.Value, args []js.Value) any {
		release()
		s.do(func() { s.uploading, s.notice = "", "Could not read the file." })
		return nil
	})
	f.Call("arrayBuffer").Call("then", then, fail)
}

func (s *bvSession) reconnect() {
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

func (s *bvSession) stop() {
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
		s.ws.Set("onopen", js.Null())
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

var _ bvSink = (*bvSession)(nil)
var _ bvDriver = (*bvSession)(nil)
