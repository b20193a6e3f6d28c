package app

import (
	"strings"
	"time"

	"github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
)

// bvSink is what the browser view's client drives: the WebSocket and the desktop viewer's
// canvas (window.porthole.desk) in the browser (browserview_session_wasm.go), a recorder in
// tests. Called with the session's lock held.
type bvSink interface {
	sendBV(m browser.Message)
	// The canvas half, as the desktop's (deskSink).
	setSize(w, h int)
	setView(v deskView)
	frameEnd(seq uint32)
	cursorShape(c desktop.CursorShape)
	cursorPos(x, y int, local bool)
	setCapture(on bool)
	after(d time.Duration, f func(time.Time))
}

// bvClient is the protocol and input logic of one BrowserPanel, independent of the browser.
// The canvas viewer, its view geometry, pointer mapping, phone gestures, keys bar and
// control text are the desktop viewer's (deskClient): bvClient feeds it the browser's
// messages as desktop ones, and turns the desktop input it produces into the browser's
// (deskInput). Not safe for concurrent use: the session serializes calls with its lock.
type bvClient struct {
	sink bvSink
	desk *deskClient

	automating bool
	tabs       []browser.TabInfo
	nav        browser.Nav
	dialog     browser.Dialog
	chooser    browser.FileChooser
	downloads  []browser.DownloadInfo
	sel        browser.SelectPopup // the open <select> popup (Open false: none)
	pageW      int                 // the page's size (CSS px) as the last frame showed it
	pageH      int
	mods       map[string]bool // modifier keys held down (by code), for the Modifiers fields
}

func newBVClient(sink bvSink, mode browser.Mode) *bvClient {
	c := &bvClient{sink: sink, mods: map[string]bool{}}
	c.desk = newDeskClient(bvDeskSink{c}, desktop.Mode(mode))
	return c
}

// bvDeskSink is the desktop client's sink: canvas calls go to the real sink, input frames
// are translated into the browser protocol.
type bvDeskSink struct{ c *bvClient }

func (s bvDeskSink) send(m desktop.Message)                   { s.c.deskInput(m) }
func (s bvDeskSink) setSize(w, h int)                         { s.c.sink.setSize(w, h) }
func (s bvDeskSink) setView(v deskView)                       { s.c.sink.setView(v) }
func (s bvDeskSink) frameEnd(seq uint32)                      { s.c.sink.frameEnd(seq) }
func (s bvDeskSink) cursorShape(cs desktop.CursorShape)       { s.c.sink.cursorShape(cs) }
func (s bvDeskSink) cursorPos(x, y int, local bool)           { s.c.sink.cursorPos(x, y, local) }
func (s bvDeskSink) setCapture(on bool)                       { s.c.sink.setCapture(on) }
func (s bvDeskSink) after(d time.Duration, f func(time.Time)) { s.c.sink.after(d, f) }

var _ deskSink = bvDeskSink{}

// modifierBits maps modifier key codes to the wire's bits.
var modifierBits = map[string]uint8{
	"ShiftLeft": browser.ModShift, "ShiftRight": browser.ModShift,
	"ControlLeft": browser.ModCtrl, "ControlRight": browser.ModCtrl,
	"AltLeft": browser.ModAlt, "AltRight": browser.ModAlt,
	"MetaLeft": browser.ModMeta, "MetaRight": browser.ModMeta,
}

func (c *bvClient) modifiers() uint8 {
	var m uint8
	for code := range c.mods {
		m |= modifierBits[code]
	}
	return m
}

// deskInput turns one of the desktop client's frames into the browser's.
func (c *bvClient) deskInput(m desktop.Message) {
	switch m := m.(type) {
	case desktop.Pointer:
		c.sink.sendBV(browser.Pointer{X: m.X, Y: m.Y, Buttons: m.Buttons, Modifiers: c.modifiers()})
	case desktop.Wheel:
		// The desktop counts wheel steps; a page scrolls by CSS px (a notch is 100 px).
		c.sink.sendBV(browser.Wheel{X: m.X, Y: m.Y, DX: clampI16(int(m.DX) * 100), DY: clampI16(int(m.DY) * 100), Modifiers: c.modifiers()})
	case desktop.Key:
		if _, ok := modifierBits[m.Code]; ok {
			if m.Down {
				c.mods[m.Code] = true
			} else {
				delete(c.mods, m.Code)
			}
		}
		c.sink.sendBV(browser.Key{Down: m.Down, Code: m.Code, Modifiers: c.modifiers()})
	case desktop.Text:
		c.sink.sendBV(browser.Text{Text: m.Text})
	case desktop.Ack:
		c.sink.sendBV(browser.Ack{Seq: m.Seq})
	case desktop.TakeControl:
		c.sink.sendBV(browser.TakeControl{})
	case desktop.ReleaseControl:
		c.sink.sendBV(browser.ReleaseControl{})
	case desktop.Refresh:
		c.sink.sendBV(browser.Refresh{})
	}
	// ResizeRequest and SetClipboard have no browser counterpart.
}

func clampI16(n int) int16 { return int16(max(-32768, min(32767, n))) }

// handle applies one message from the gateway. A Frame's JPEG goes to the canvas from the
// session (rect); here it sets the page's size and ends the frame.
func (c *bvClient) handle(m browser.Message) {
	d := c.desk
	switch m := m.(type) {
	case browser.Hello:
		d.handle(desktop.Hello{Version: m.Version, Mode: desktop.Mode(m.Mode), ViewerID: m.ViewerID, ViewerName: m.ViewerName})
	case browser.ModeMsg:
		d.handle(desktop.ModeMsg{Mode: desktop.Mode(m.Mode)})
	case browser.Control:
		c.automating = m.Automating
		d.handle(desktop.Control{HolderID: m.HolderID, HolderName: m.HolderName})
	case browser.Viewers:
		vs := make([]desktop.ViewerInfo, len(m.Viewers))
		for i, v := range m.Viewers {
			vs[i] = desktop.ViewerInfo{ID: v.ID, Name: v.Name, Mode: desktop.Mode(v.Mode)}
		}
		d.handle(desktop.Viewers{Viewers: vs})
	case browser.Frame:
		if int(m.W) != c.pageW || int(m.H) != c.pageH {
			c.pageW, c.pageH = int(m.W), int(m.H)
			d.handle(desktop.Screen{W: m.W, H: m.H})
		}
		d.handle(desktop.Rect{W: m.W, H: m.H})
		d.handle(desktop.FrameEnd{Seq: m.Seq})
	case browser.ErrorMsg:
		d.handle(desktop.ErrorMsg{Message: m.Message})
	case browser.Tabs:
		c.tabs = m.Tabs
	case browser.Nav:
		c.nav = m
	case browser.Dialog:
		c.dialog = m
	case browser.FileChooser:
		c.chooser = m
	case browser.Downloads:
		c.downloads = m.Downloads
	case browser.SelectPopup:
		c.sel = m
	}
}

// disconnected: the WebSocket closed.
func (c *bvClient) disconnected() {
	c.desk.disconnected()
	clear(c.mods)
	c.automating = false
	c.dialog, c.chooser, c.sel = browser.Dialog{}, browser.FileChooser{}, browser.SelectPopup{}
	c.pageW, c.pageH = 0, 0
}

// command sends a browser command if we hold control (the gateway would drop it anyway).
func (c *bvClient) command(m browser.Message) bool {
	if !c.desk.holding() {
		return false
	}
	c.sink.sendBV(m)
	return true
}

func (c *bvClient) navigate(u string) bool {
	u = strings.TrimSpace(u)
	if u == "" || len(u) > browser.MaxURL {
		return false
	}
	return c.command(browser.Navigate{URL: u})
}

func (c *bvClient) answerDialog(accept bool, prompt string) bool {
	if !c.dialog.Open {
		return false
	}
	return c.command(browser.DialogAnswer{Accept: accept, Prompt: prompt})
}

// choose answers the open <select> popup with option i (-1: close it unchanged).
func (c *bvClient) choose(i int) bool {
	if !c.sel.Open || i < -1 || i >= len(c.sel.Options) || i >= 0 && c.sel.Options[i].Disabled {
		return false
	}
	if !c.command(browser.SelectChoose{Index: int32(i)}) {
		return false
	}
	c.sel = browser.SelectPopup{}
	return true
}

func (c *bvClient) activeTab() browser.TabInfo {
	for _, t := range c.tabs {
		if t.Active {
			return t
		}
	}
	return browser.TabInfo{}
}

// controlText says who drives, and whether the agent's automation is connected.
func (c *bvClient) controlText() string {
	s := c.desk.controlText()
	if c.automating && c.desk.connected {
		if c.desk.control.HolderID == "" {
			return "The agent is automating this browser"
		}
		s += "; the agent's automation is connected (its input is refused meanwhile)"
	}
	return s
}

// downloadText is one download's line (shown as text).
func downloadText(d browser.DownloadInfo) string {
	switch d.State {
	case browser.DownloadCompleted:
		return d.Name + " — done (" + byteSize(d.Received) + ")"
	case browser.DownloadCanceled:
		return d.Name + " — canceled"
	}
	if d.Total > 0 {
		return d.Name + " — " + byteSize(d.Received) + " of " + byteSize(d.Total)
	}
	return d.Name + " — " + byteSize(d.Received)
}

func byteSize(n uint64) string {
	switch {
	case n >= 1<<20:
		return trimFloat(float64(n)/(1<<20)) + " MB"
	case n >= 1<<10:
		return trimFloat(float64(n)/(1<<10)) + " KB"
	}
	return uitoa(n) + " B"
}

func trimFloat(f float64) string {
	n := uint64(f*10 + 0.5)
	s := uitoa(n / 10)
	if r := n % 10; r != 0 {
		s += "." + uitoa(r)
	}
	return s
}

func uitoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
