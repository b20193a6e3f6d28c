//go:build linux && !js

package desktop

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
)

// clipboard is the display's CLIPBOARD selection, text only, through its own X connection:
// set makes the helper the owner (answering TARGETS, UTF8_STRING, STRING and TEXT), and a
// change of owner (XFixes) makes it read the new text and report it with onChange. Text is
// capped at MaxClipboard and at what one X request can carry (no INCR transfers).
type clipboard struct {
	conn     *xgb.Conn
	win      xproto.Window
	onChange func(string)
	maxBytes int

	atomClipboard, atomUTF8, atomTargets, atomText, atomProp, atomIncr xproto.Atom

	mu   sync.Mutex
	text string // what we own
	done chan struct{}
}

func openClipboard(display string, onChange func(string)) (*clipboard, error) {
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("clipboard: connect to %s: %w", display, err)
	}
	c := &clipboard{conn: conn, onChange: onChange, done: make(chan struct{})}
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
	c.maxBytes = min(MaxClipboard, int(setup.MaximumRequestLength)*4-64)
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
	if len(text) > c.maxBytes {
		return fmt.Errorf("clipboard text of %d bytes is over the %d-byte limit", len(text), c.maxBytes)
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
				xproto.ConvertSelection(c.conn, c.win, c.atomClipboard, c.atomUTF8, c.atomProp, e.Timestamp)
			}
		case xproto.SelectionNotifyEvent:
			if e.Property == c.atomProp {
				if text, err := c.read(); err == nil {
					c.onChange(text)
				}
			}
		}
	}
}

// read takes the converted text from our window's property.
func (c *clipboard) read() (string, error) {
	r, err := xproto.GetProperty(c.conn, true, c.win, c.atomProp, xproto.GetPropertyTypeAny, 0,
		uint32(MaxClipboard/4)).Reply()
	if err != nil {
		return "", err
	}
	if r.Type == c.atomIncr || r.BytesAfter > 0 {
		return "", errors.New("clipboard text too large")
	}
	if r.Format != 8 || !utf8.Valid(r.Value) {
		return "", errors.New("clipboard content is not UTF-8 text")
	}
	return string(r.Value), nil
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
		xproto.ChangeProperty(c.conn, xproto.PropModeReplace, e.Requestor, prop, typ, 8, uint32(len(text)), []byte(text))
	default:
		prop = 0 // refused
	}
	ev := xproto.SelectionNotifyEvent{Time: e.Time, Requestor: e.Requestor, Selection: e.Selection,
		Target: e.Target, Property: prop}
	xproto.SendEvent(c.conn, false, e.Requestor, 0, string(ev.Bytes()))
}
