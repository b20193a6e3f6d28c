//go:build linux && !js

package desktop

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/internal/wire"
)

// clipboard is the display's CLIPBOARD selection, text only, through its own X connection:
// set makes the helper the owner (answering TARGETS, UTF8_STRING, STRING and TEXT), and a
// change of owner (XFixes) makes it read the new text and report it with onChange. Text
// larger than one X request travels in pieces both ways (ICCCM INCR transfers). What the
// display holds beyond MaxClipboard is cut: onChange gets the first MaxClipboard bytes (on a
// rune boundary) and the size it saw.
type clipboard struct {
	conn     *xgb.Conn
	win      xproto.Window
	onChange func(text string, size int)
	chunk    int // bytes of text one property change carries

	atomClipboard, atomUTF8, atomTargets, atomText, atomProp, atomIncr xproto.Atom

	mu   sync.Mutex
	text string // what we own
	done chan struct{}

	// The event loop's own (run).
	in  *incrIn              // the INCR transfer we are receiving, if any
	out map[incrKey]*incrOut // INCR transfers we are sending, by requestor and property
}

// incrIn is an INCR transfer of the selection to us: its pieces so far.
type incrIn struct {
	buf  []byte
	size int // bytes seen, kept or not
}

type incrKey struct {
	win  xproto.Window
	prop xproto.Atom
}

// incrOut is an INCR transfer of our text to a requestor: what is left to send.
type incrOut struct {
	typ  xproto.Atom
	rest []byte
	sent bool // the zero-length end piece was written
}

const (
	maxIncrOut   = 8        // INCR transfers out at once (more: the oldest is dropped)
	maxIncrBytes = 64 << 20 // bytes of an INCR transfer in read before it is abandoned
	clipChunk    = 256 << 10
)

func openClipboard(display string, onChange func(text string, size int)) (*clipboard, error) {
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("clipboard: connect to %s: %w", display, err)
	}
	c := &clipboard{conn: conn, onChange: onChange, done: make(chan struct{}), out: map[incrKey]*incrOut{}}
	if err := c.init(); err != nil {
		conn.Close()
		return nil, err
	}
	go c.run() // owner: the clipboard; exits when close closes the connection
	return c, nil
}

func (c *clipboard) init() error {
	setup := xproto.Setup(c.conn)
	scr := setup.DefaultScreen(c.conn)
	// One request carries at most MaximumRequestLength 4-byte units, minus ChangeProperty's header.
	c.chunk = min(clipChunk, int(setup.MaximumRequestLength)*4-64)
	for _, a := range []struct {
		name string
		dst  *xproto.Atom
	}{{"CLIPBOARD", &c.atomClipboard}, {"UTF8_STRING", &c.atomUTF8}, {"TARGETS", &c.atomTargets},
		{"TEXT", &c.atomText}, {"PORTHOLE_CLIPBOARD", &c.atomProp}, {"INCR", &c.atomIncr}} {
		r, err := xproto.InternAtom(c.conn, false, uint16(len(a.name)), a.name).Reply()
		if err != nil {
			return fmt.Errorf("clipboard: intern %s: %w", a.name, err)
		}
		*a.dst = r.Atom
	}
	win, err := xproto.NewWindowId(c.conn)
	if err != nil {
		return fmt.Errorf("clipboard: window id: %w", err)
	}
	c.win = win
	if err := xproto.CreateWindowChecked(c.conn, scr.RootDepth, win, scr.Root, -1, -1, 1, 1, 0,
		xproto.WindowClassInputOutput, scr.RootVisual, xproto.CwEventMask,
		[]uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return fmt.Errorf("clipboard: create window: %w", err)
	}
	if err := xfixes.Init(c.conn); err != nil {
		return fmt.Errorf("clipboard: XFIXES: %w", err)
	}
	if _, err := xfixes.QueryVersion(c.conn, 5, 0).Reply(); err != nil {
		return fmt.Errorf("clipboard: XFIXES version: %w", err)
	}
	return xfixes.SelectSelectionInputChecked(c.conn, win, c.atomClipboard,
		xfixes.SelectionEventMaskSetSelectionOwner).Check()
}

// set makes text the display's clipboard (the helper owns the selection).
func (c *clipboard) set(text string) error {
	if len(text) > MaxClipboard {
		return fmt.Errorf("clipboard text of %d bytes is over the %d-byte limit", len(text), MaxClipboard)
	}
	c.mu.Lock()
	c.text = text
	c.mu.Unlock()
	return xproto.SetSelectionOwnerChecked(c.conn, c.win, c.atomClipboard, xproto.TimeCurrentTime).Check()
}

func (c *clipboard) close() {
	c.conn.Close()
	<-c.done
}

func (c *clipboard) run() {
	defer close(c.done)
	for {
		ev, err := c.conn.WaitForEvent()
		if ev == nil && err == nil {
			return // connection closed
		}
		switch e := ev.(type) {
		case xproto.SelectionRequestEvent:
			c.answer(e)
		case xfixes.SelectionNotifyEvent:
			if e.Owner != c.win && e.Owner != 0 {
				// Someone else copied: ask for the text as UTF-8.
				c.in = nil
				xproto.ConvertSelection(c.conn, c.win, c.atomClipboard, c.atomUTF8, c.atomProp, e.Timestamp)
			}
		case xproto.SelectionNotifyEvent:
			if e.Requestor == c.win && e.Property == c.atomProp {
				c.readConverted()
			}
		case xproto.PropertyNotifyEvent:
			switch {
			case e.Window == c.win && e.Atom == c.atomProp && e.State == xproto.PropertyNewValue && c.in != nil:
				c.readPiece()
			case e.State == xproto.PropertyDelete:
				c.sendPiece(incrKey{e.Window, e.Atom})
			}
		}
	}
}

// readConverted takes the converted selection from our window's property: the text, or the
// start of an INCR transfer.
func (c *clipboard) readConverted() {
	r, err := xproto.GetProperty(c.conn, false, c.win, c.atomProp, xproto.GetPropertyTypeAny, 0,
		uint32(MaxClipboard/4)).Reply()
	if err != nil {
		return
	}
	if r.Type == c.atomIncr {
		// Deleting the property starts the transfer; its pieces come as PropertyNotify.
		c.in = &incrIn{}
		xproto.DeleteProperty(c.conn, c.win, c.atomProp)
		return
	}
	xproto.DeleteProperty(c.conn, c.win, c.atomProp)
	if r.Format != 8 {
		return
	}
	c.report(r.Value, len(r.Value)+int(r.BytesAfter))
}

// readPiece takes one piece of an INCR transfer; the empty piece ends it.
func (c *clipboard) readPiece() {
	in := c.in
	r, err := xproto.GetProperty(c.conn, true, c.win, c.atomProp, xproto.GetPropertyTypeAny, 0,
		uint32(maxIncrBytes/4)).Reply()
	if err != nil || r.Format != 8 && len(r.Value) > 0 {
		c.in = nil
		return
	}
	if len(r.Value) == 0 {
		c.in = nil
		c.report(in.buf, in.size)
		return
	}
	in.size += len(r.Value)
	if keep := MaxClipboard - len(in.buf); keep > 0 {
		in.buf = append(in.buf, r.Value[:min(keep, len(r.Value))]...)
	}
	if in.size > maxIncrBytes { // a transfer that never ends: give up on the rest
		c.in = nil
		c.report(in.buf, in.size)
	}
}

// report hands the text on: whole, or its first MaxClipboard bytes on a rune boundary when
// the selection held size bytes in all. Text that is not UTF-8 is not reported.
func (c *clipboard) report(b []byte, size int) {
	text := string(b)
	if size > MaxClipboard || len(text) > MaxClipboard {
		text = wire.CutUTF8(text, MaxClipboard)
	}
	if !utf8.ValidString(text) {
		return
	}
	c.onChange(text, size)
}

// answer serves another client's request for our selection.
func (c *clipboard) answer(e xproto.SelectionRequestEvent) {
	c.mu.Lock()
	text := c.text
	c.mu.Unlock()
	prop := e.Property
	if prop == 0 {
		prop = e.Target // obsolete clients
	}
	switch e.Target {
	case c.atomTargets:
		targets := []xproto.Atom{c.atomTargets, c.atomUTF8, xproto.AtomString, c.atomText}
		buf := make([]byte, 4*len(targets))
		for i, a := range targets {
			xgb.Put32(buf[4*i:], uint32(a))
		}
		xproto.ChangeProperty(c.conn, xproto.PropModeReplace, e.Requestor, prop, xproto.AtomAtom, 32, uint32(len(targets)), buf)
	case c.atomUTF8, xproto.AtomString, c.atomText:
		typ := e.Target
		if typ == c.atomText {
			typ = c.atomUTF8
		}
		if len(text) <= c.chunk {
			xproto.ChangeProperty(c.conn, xproto.PropModeReplace, e.Requestor, prop, typ, 8, uint32(len(text)), []byte(text))
			break
		}
		// Too large for one request: an INCR transfer, a piece each time the requestor deletes
		// the property (we watch its window's properties).
		if len(c.out) >= maxIncrOut {
			for k := range c.out {
				delete(c.out, k)
				break
			}
		}
		c.out[incrKey{e.Requestor, prop}] = &incrOut{typ: typ, rest: []byte(text)}
		xproto.ChangeWindowAttributes(c.conn, e.Requestor, xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange})
		var size [4]byte
		xgb.Put32(size[:], uint32(len(text)))
		xproto.ChangeProperty(c.conn, xproto.PropModeReplace, e.Requestor, prop, c.atomIncr, 32, 1, size[:])
	default:
		prop = 0 // refused
	}
	ev := xproto.SelectionNotifyEvent{Time: e.Time, Requestor: e.Requestor, Selection: e.Selection,
		Target: e.Target, Property: prop}
	xproto.SendEvent(c.conn, false, e.Requestor, 0, string(ev.Bytes()))
}

// sendPiece writes the next piece of an INCR transfer once the requestor deleted the last
// one; the empty piece ends it.
func (c *clipboard) sendPiece(k incrKey) {
	o := c.out[k]
	if o == nil {
		return
	}
	if o.sent {
		delete(c.out, k)
		return
	}
	n := min(c.chunk, len(o.rest))
	xproto.ChangeProperty(c.conn, xproto.PropModeReplace, k.win, k.prop, o.typ, 8, uint32(n), o.rest[:n])
	o.rest = o.rest[n:]
	o.sent = n == 0
}
