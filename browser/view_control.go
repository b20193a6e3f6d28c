//go:build !js

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// handle acts on one viewer message, on the viewer's reader goroutine.
func (h *viewHub) handle(ctx context.Context, s *viewSession, m Message) {
	switch m := m.(type) {
	case Ack:
		h.mu.Lock()
		if d := m.Seq - s.acked; d != 0 && d <= s.seq-s.acked {
			s.acked = m.Seq
			s.wakeup()
		}
		h.mu.Unlock()
	case Refresh:
		h.mu.Lock()
		if s.shot == nil {
			s.shot = h.last
		}
		s.wakeup()
		h.mu.Unlock()
	case Resize:
		h.mu.Lock()
		s.vw = max(min(m.W, MaxViewSize), MinViewSize)
		s.vh = max(min(m.H, MaxViewSize), MinViewSize)
		if w, hh := h.wantSizeLocked(); w != h.scW || hh != h.scH {
			h.wake()
		}
		h.mu.Unlock()
	case TakeControl:
		h.takeControl(s)
	case ReleaseControl: // a no-op unless s holds control here
		h.s.cfg.Handoff.Release(h.agent.ID, api.SurfaceBrowser, ConnID(s.v))
	default:
		if !IsInput(m.Op()) {
			s.queueErr(ErrCodeBadMessage, fmt.Sprintf("opcode 0x%02x is not sent by viewers", uint8(m.Op())))
			return
		}
		session, ok := h.mayDrive(s)
		if !ok {
			return
		}
		if err := h.command(ctx, s, session, m); err != nil && ctx.Err() == nil {
			s.queueErr(ErrCodeRefused, err.Error())
		}
	}
}

// takeControl makes s the driver, through the handoff the browser shares with the agent's
// desktop (surface.Handoff.Take): when nobody holds control, when s is the same person
// (another tab, or the desktop), or when s is the agent's owner or an admin (take-back).
// Whoever held it loses it on the desktop too.
func (h *viewHub) takeControl(s *viewSession) {
	if s.mode != ModeDrive {
		s.queueErr(ErrCodeWatchOnly, "you are watching this browser: only drivers can take control")
		return
	}
	cur, err := h.s.cfg.Handoff.Take(h.agent.ID, api.SurfaceBrowser,
		surface.Claim{Person: s.v.ID, Name: s.v.Name, Conn: ConnID(s.v), Owner: s.isOwner()})
	if err != nil {
		s.queueErr(ErrCodeNotHolder, err.Error())
		return
	}
	h.mu.Lock()
	h.applyHandoffLocked(cur)
	h.mu.Unlock()
}

// mayDrive checks that s drives and holds control, and returns the active tab's CDP
// session. A watcher's input is dropped here: it never reaches Chromium.
func (h *viewHub) mayDrive(s *viewSession) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.mode != ModeDrive {
		s.noteLocked(ErrCodeWatchOnly, "you are watching this browser: your input was dropped")
		return "", false
	}
	if h.holder != s {
		who := "nobody"
		if h.holder != nil {
			who = h.holder.v.Name
		} else if h.elsewhere.person != "" {
			who = h.elsewhere.name + " (on the desktop)"
		}
		s.noteLocked(ErrCodeNotHolder, fmt.Sprintf("your input was dropped: %s holds control; take control first", who))
		return "", false
	}
	if h.session == "" {
		s.noteLocked(ErrCodeBrowser, "no tab is shown yet")
		return "", false
	}
	return h.session, true
}

func buttonName(b uint8) string {
	switch b {
	case ButtonLeft:
		return "left"
	case ButtonMiddle:
		return "middle"
	case ButtonRight:
		return "right"
	}
	return "none"
}

// cdpButtons maps the wire's button mask to CDP's (left 1, right 2, middle 4).
func cdpButtons(b uint8) int {
	n := 0
	if b&ButtonLeft != 0 {
		n |= 1
	}
	if b&ButtonRight != 0 {
		n |= 2
	}
	if b&ButtonMiddle != 0 {
		n |= 4
	}
	return n
}

const (
	pressWait      = time.Second // how long a press may keep the viewer's reader (see pointer)
	multiClickTime = 500 * time.Millisecond
	multiClickDist = 4.0 // CSS px
)

// command runs one input or browser command of the control holder.
func (h *viewHub) command(ctx context.Context, s *viewSession, session string, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, viewCallTimeout)
	defer cancel()
	switch m := m.(type) {
	case Pointer:
		return h.pointer(ctx, session, m)
	case Wheel:
		x, y := h.clampPoint(m.X, m.Y)
		return h.cdp.send(ctx, session, "Input.dispatchMouseEvent", map[string]any{
			"type": "mouseWheel", "x": x, "y": y, "deltaX": int(m.DX), "deltaY": int(m.DY), "modifiers": int(m.Modifiers)})
	case Key:
		return h.cdp.send(ctx, session, "Input.dispatchKeyEvent", keyParams(m))
	case Text:
		return h.cdp.send(ctx, session, "Input.insertText", map[string]any{"text": m.Text})
	case Navigate:
		u, err := normalizeURL(m.URL)
		if err != nil {
			return err
		}
		var r struct {
			ErrorText string `json:"errorText"`
		}
		if err := h.callPage(ctx, session, "Page.navigate", map[string]any{"url": u}, &r); err != nil {
			return fmt.Errorf("open %s: %w", u, err)
		}
		if r.ErrorText != "" {
			return fmt.Errorf("open %s: %s", u, r.ErrorText)
		}
		return nil
	case History:
		return h.history(ctx, session, m.Action)
	case TabNew:
		u := "about:blank"
		if m.URL != "" {
			var err error
			if u, err = normalizeURL(m.URL); err != nil {
				return err
			}
		}
		var r struct {
			TargetID string `json:"targetId"`
		}
		if err := h.cdp.call(ctx, "", "Target.createTarget", map[string]any{"url": u}, &r); err != nil {
			return fmt.Errorf("open a tab: %w", err)
		}
		h.setActive(r.TargetID)
		return nil
	case TabSwitch:
		if !h.setActive(m.ID) {
			return fmt.Errorf("no tab %q", m.ID)
		}
		return nil
	case TabClose:
		if !h.hasPage(m.ID) {
			return fmt.Errorf("no tab %q", m.ID)
		}
		if err := h.cdp.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": m.ID}, nil); err != nil {
			return fmt.Errorf("close the tab: %w", err)
		}
		return nil
	case DialogAnswer:
		p := map[string]any{"accept": m.Accept}
		if m.Prompt != "" {
			p["promptText"] = m.Prompt
		}
		if err := h.callPage(ctx, session, "Page.handleJavaScriptDialog", p, nil); err != nil {
			return fmt.Errorf("answer the dialog: %w", err)
		}
		return nil
	case FileBegin, FileData, FileDone:
		return h.upload(ctx, s, session, m)
	case SelectChoose:
		return h.chooseSelect(ctx, session, m.Index)
	}
	return fmt.Errorf("opcode 0x%02x is not handled", uint8(m.Op()))
}

// pointer turns a viewer's pointer state into CDP mouse events: a move, and a press or
// release for each button that changed (with the click count of a double or triple click).
func (h *viewHub) pointer(ctx context.Context, session string, m Pointer) error {
	x, y := h.clampPoint(m.X, m.Y)
	h.mu.Lock()
	old := h.buttons
	h.buttons = m.Buttons
	h.lastX, h.lastY = x, y
	type ev struct {
		typ, button string
		count       int
	}
	var evs []ev
	if old == m.Buttons {
		evs = append(evs, ev{"mouseMoved", "none", 0})
	}
	for _, b := range []uint8{ButtonLeft, ButtonMiddle, ButtonRight} {
		switch {
		case m.Buttons&b != 0 && old&b == 0:
			now, name := time.Now(), buttonName(b)
			c := &h.click
			if c.button == name && now.Sub(c.at) < multiClickTime && math.Hypot(x-c.x, y-c.y) <= multiClickDist {
				c.count++
			} else {
				c.count = 1
			}
			c.at, c.x, c.y, c.button = now, x, y, name
			evs = append(evs, ev{"mousePressed", name, c.count})
		case m.Buttons&b == 0 && old&b != 0:
			count := 1
			if h.click.button == buttonName(b) {
				count = h.click.count
			}
			evs = append(evs, ev{"mouseReleased", buttonName(b), count})
		}
	}
	wasOpen := h.selectFrame != nil
	h.mu.Unlock()
	pressed := false
	for _, e := range evs {
		p := map[string]any{"type": e.typ, "x": x, "y": y, "button": e.button,
			"buttons": cdpButtons(m.Buttons), "modifiers": int(m.Modifiers)}
		if e.count > 0 {
			p["clickCount"] = e.count
		}
		if e.typ == "mousePressed" && e.button == "left" {
			// Wait for the press to be handled (a <select> it focused opens its popup), but
			// briefly: a page that opens a dialog on mousedown holds the reply until the
			// dialog is answered, and this goroutine must stay free to read that answer.
			pressed = true
			pctx, cancel := context.WithTimeout(ctx, pressWait)
			err := h.cdp.call(pctx, session, "Input.dispatchMouseEvent", p, nil)
			cancel()
			if err != nil && ctx.Err() == nil && pctx.Err() == nil {
				return err
			}
			continue
		}
		if err := h.cdp.send(ctx, session, "Input.dispatchMouseEvent", p); err != nil {
			return err
		}
	}
	if pressed {
		if wasOpen {
			h.setSelect(nil) // a click elsewhere closed the popup
		}
		pctx, cancel := context.WithTimeout(ctx, pressWait)
		h.checkSelect(pctx, session)
		cancel()
	}
	return nil
}

// selectJS describes the focused <select> whose popup a press opened (null: none), bounded.
var selectJS = fmt.Sprintf(`(() => { const e = document.activeElement;
	if (!e || e.tagName !== "SELECT" || e.multiple || e.size > 1) return null;
	const os = Array.prototype.slice.call(e.options, 0, %d);
	return {s: e.selectedIndex, o: os.map(o => [String(o.label || o.text).slice(0, 200), !!o.disabled])}; })()`, MaxOptions)

// checkSelect tells the drivers about a <select> popup: headless Chromium does not draw it
// in the screencast, so the viewer shows the options and answers with SelectChoose.
func (h *viewHub) checkSelect(ctx context.Context, session string) {
	var r struct {
		Result struct {
			Value *struct {
				S int                  `json:"s"`
				O [][2]json.RawMessage `json:"o"`
			} `json:"value"`
		} `json:"result"`
	}
	if err := h.cdp.call(ctx, session, "Runtime.evaluate", map[string]any{"expression": selectJS, "returnByValue": true}, &r); err != nil || r.Result.Value == nil {
		return
	}
	v := r.Result.Value
	p := SelectPopup{Open: true, Selected: -1}
	for _, o := range v.O[:min(len(v.O), MaxOptions)] {
		var label string
		var disabled bool
		json.Unmarshal(o[0], &label)
		json.Unmarshal(o[1], &disabled)
		p.Options = append(p.Options, SelectOption{Label: label, Disabled: disabled})
	}
	if v.S >= 0 && v.S < len(p.Options) {
		p.Selected = int32(v.S)
	}
	h.setSelect(&p)
}

// setSelect records the open <select> popup (nil: closed) and tells the drivers.
func (h *viewHub) setSelect(p *SelectPopup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setSelectLocked(p)
}

func (h *viewHub) setSelectLocked(p *SelectPopup) {
	f := Encode(SelectPopup{Selected: -1})
	h.selectFrame = nil
	if p != nil {
		f = Encode(*p)
		h.selectFrame = f
	}
	for _, s := range h.sessions {
		if s.mode == ModeDrive {
			s.sel = f
			s.wakeup()
		}
	}
}

// chooseSelectJS sets the focused <select>'s option as a person's choice would.
const chooseSelectJS = `(i => { const e = document.activeElement;
	if (!e || e.tagName !== "SELECT" || i < 0 || i >= e.options.length || e.options[i].disabled) return false;
	if (e.selectedIndex !== i) { e.selectedIndex = i;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); }
	return true; })`

// chooseSelect answers the open <select> popup: closes it (Escape) and picks option i.
func (h *viewHub) chooseSelect(ctx context.Context, session string, i int32) error {
	h.mu.Lock()
	open := h.selectFrame != nil
	h.mu.Unlock()
	if !open {
		return errors.New("no <select> popup is open")
	}
	h.setSelect(nil)
	for _, down := range []bool{true, false} {
		if err := h.cdp.send(ctx, session, "Input.dispatchKeyEvent", keyParams(Key{Down: down, Code: "Escape"})); err != nil {
			return err
		}
	}
	if i < 0 {
		return nil
	}
	var r struct {
		Result struct {
			Value bool `json:"value"`
		} `json:"result"`
	}
	if err := h.cdp.call(ctx, session, "Runtime.evaluate", map[string]any{
		"expression": fmt.Sprintf("%s(%d)", chooseSelectJS, i), "returnByValue": true, "userGesture": true}, &r); err != nil {
		return fmt.Errorf("choose the option: %w", err)
	}
	if !r.Result.Value {
		return fmt.Errorf("option %d could not be chosen", i)
	}
	return nil
}

// clampPoint keeps a position inside the page as the last frame showed it.
func (h *viewHub) clampPoint(x, y uint16) (float64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && h.last.w > 0 && h.last.h > 0 {
		x, y = min(x, h.last.w-1), min(y, h.last.h-1)
	}
	return float64(x), float64(y)
}

func (h *viewHub) history(ctx context.Context, session string, action uint8) error {
	switch action {
	case HistReload:
		return h.callPage(ctx, session, "Page.reload", nil, nil)
	case HistStop:
		return h.callPage(ctx, session, "Page.stopLoading", nil, nil)
	}
	var hist navHistory
	if err := h.callPage(ctx, session, "Page.getNavigationHistory", nil, &hist); err != nil {
		return err
	}
	i := hist.CurrentIndex - 1
	if action == HistForward {
		i = hist.CurrentIndex + 1
	}
	if i < 0 || i >= len(hist.Entries) {
		return nil // nothing there: as a browser's greyed-out button
	}
	return h.callPage(ctx, session, "Page.navigateToHistoryEntry", map[string]any{"entryId": hist.Entries[i].ID}, nil)
}

func (h *viewHub) hasPage(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.pages {
		if p.id == id {
			return true
		}
	}
	return false
}

// setActive makes tab id the one the viewers see (false: no such tab).
func (h *viewHub) setActive(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	found := false
	for _, p := range h.pages {
		found = found || p.id == id
	}
	if !found && id != "" {
		// A tab we just created whose targetCreated has not arrived yet.
		if len(h.pages) >= maxTrackedPages {
			return false
		}
		h.pages = append(h.pages, &pageInfo{id: id})
		found = true
	}
	if found && h.active != id {
		h.active = id
		h.tabsChangedLocked()
		h.wake()
	}
	return found
}

// normalizeURL makes what a person types in an address bar a URL: "example.org/x" is
// https://example.org/x, "localhost:8080" is http://localhost:8080. Only http, https, file,
// about and data URLs load (never javascript:).
func normalizeURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("an empty address")
	}
	u, err := url.Parse(s)
	if err == nil && u.Scheme != "" && (u.Opaque != "" || u.Host != "" || u.Scheme == "file" || u.Scheme == "about" || u.Scheme == "data") {
		switch strings.ToLower(u.Scheme) {
		case "http", "https", "file", "about", "data":
			return u.String(), nil
		}
		if u.Host != "" || u.Scheme == "javascript" {
			return "", fmt.Errorf("%s: addresses of scheme %q do not load here", s, u.Scheme)
		}
	}
	scheme := "https://"
	host := s
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if strings.HasPrefix(host, "localhost") || strings.HasPrefix(host, "127.") || strings.HasPrefix(host, "[::1]") {
		scheme = "http://"
	}
	u, err = url.Parse(scheme + s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not an address", s)
	}
	return u.String(), nil
}
