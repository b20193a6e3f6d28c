//go:build js && wasm

package app

import (
	"fmt"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/desktop"
)

// deskSession is the browser half of a DesktopPanel: the WebSocket, the canvas (through
// window.porthole.desk, assets/static/desktop.js) and reconnection, all screenSession's; what
// is its own is the desktop protocol's messages, the cursor's image and the clipboard.
type deskSession struct {
	screenSession[deskUI]
	c *deskClient
}

func newDeskSession(ctx app.Context, p *DesktopPanel) deskDriver {
	return newDeskSessionTry(ctx, p, 0)
}

// newDeskSessionTry waits up to 5 s for the deferred desktop.js.
func newDeskSessionTry(ctx app.Context, p *DesktopPanel, try int) deskDriver {
	glue, host, ok := screenGlue(p.hostID)
	if !ok {
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
	s := &deskSession{}
	s.init(ctx, p.AgentID, "desktop", p.hostID)
	mode := desktop.ModeWatch
	if p.Mode == api.LevelDrive {
		mode = desktop.ModeDrive
	}
	s.c = newDeskClient(s, mode)
	s.desk, s.snap, s.lost = s.c, s.snapshot, s.c.disconnected
	s.show = func(ui deskUI) { p.ui = ui }
	s.onMessage = s.message

	s.open(glue, host, map[string]any{
		"onClipboard": s.callback(true, func(a []js.Value) {
			s.notice = s.c.setClipboard(a[0].String())
			if s.notice == "" {
				s.notice = "Pasted into the desktop's clipboard."
			}
		}),
	})
	p.ui = s.snapshot()
	return s
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
			s.hello()
		}
	}
	switch m.(type) {
	case desktop.FrameEnd, desktop.CursorPos:
		s.quiet(apply)
	default:
		s.do(apply)
	}
}

// The rest of the deskSink half: called by the client with mu held.

func (s *deskSession) send(m desktop.Message) {
	s.sendBytes(func() []byte { return desktop.Encode(m) })
}

func (s *deskSession) cursorShape(c desktop.CursorShape) {
	u := js.Global().Get("Uint8ClampedArray").New(len(c.RGBA))
	js.CopyBytesToJS(u, c.RGBA)
	s.h.Call("cursorShape", u, int(c.W), int(c.H), int(c.HotX), int(c.HotY))
}

// The rest of the panel's actions (deskDriver), on the UI goroutine.

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

var _ deskSink = (*deskSession)(nil)
var _ deskDriver = (*deskSession)(nil)
