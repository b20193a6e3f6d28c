//go:build js && wasm

package app

import (
	"fmt"
	"strings"
	"syscall/js"
	"time"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
)

// bvSession is the browser half of a BrowserPanel: the WebSocket, the canvas (the desktop
// viewer's, window.porthole.desk of assets/static/desktop.js) and reconnection, all
// screenSession's; what is its own is the browser protocol's messages, the drawing size it
// asks for, the page's commands (address, history, tabs, dialogs, choosers) and uploads.
type bvSession struct {
	screenSession[bvUI]
	c         *bvClient
	uploading string
	vw, vh    float64 // the viewport (CSS px)
}

func newBVSession(ctx app.Context, p *BrowserPanel) bvDriver { return newBVSessionTry(ctx, p, 0) }

// newBVSessionTry waits up to 5 s for the deferred desktop.js.
func newBVSessionTry(ctx app.Context, p *BrowserPanel, try int) bvDriver {
	glue, host, ok := screenGlue(p.hostID)
	if !ok {
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
	s := &bvSession{}
	s.init(ctx, p.AgentID, "browser", p.hostID)
	mode := browser.ModeWatch
	if p.Mode == api.LevelDrive {
		mode = browser.ModeDrive
	}
	s.c = newBVClient(s, mode)
	s.desk, s.snap, s.lost = s.c.desk, s.snapshot, s.c.disconnected
	s.show = func(ui bvUI) { p.ui = ui }
	s.onMessage = s.message
	s.onOpen = func(ws js.Value) {
		s.quiet(func() {
			if s.ws.Equal(ws) {
				s.sendResize()
			}
		})
	}

	d := s.c.desk
	s.open(glue, host, map[string]any{
		"onViewport": s.callback(false, func(a []js.Value) {
			s.vw, s.vh = a[0].Float(), a[1].Float()
			d.viewport(s.vw, s.vh)
			s.sendResize()
		}),
	})
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
			s.hello()
			s.sendResize()
		}
	})
}

// The rest of the bvSink half: called by the client with mu held.

func (s *bvSession) sendBV(m browser.Message) {
	s.sendBytes(func() []byte { return browser.Encode(m) })
}

func (s *bvSession) cursorShape(c desktop.CursorShape) {} // the page's cursor is not sent

// The rest of the panel's actions (bvDriver), on the UI goroutine.

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

var _ bvSink = (*bvSession)(nil)
var _ bvDriver = (*bvSession)(nil)
