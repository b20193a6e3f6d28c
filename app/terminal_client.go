package app

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/porthole/porthole/terminal"
)

// termSink is what the terminal client drives: the WebSocket and the xterm.js
// screens in the browser (terminal_session_wasm.go), a recorder in tests.
// Its methods are called with the client's lock held: they must not call back
// into the client synchronously.
type termSink interface {
	send(m terminal.Message)
	create(id uint32)                          // make a screen for terminal id
	remove(id uint32)                          // drop terminal id's screen
	notice(id uint32, text string)             // write a local notice line (not terminal output) into id's screen
	size(id uint32) (cols, rows uint16)        // id's screen size (0, 0 = unknown)
	setReadOnly(id uint32, readOnly bool)      // watchers' keystrokes go nowhere
	setFixedSize(id uint32, cols, rows uint16) // watchers: show the PTY's size, scaled; (0, 0) = fit the container
}

// termState is the client's view of one terminal of the agent.
type termState struct {
	id       uint32
	seq      uint64 // sequence number of the next output byte this client expects
	attached bool   // on the current connection
	title    string
	viewers  []terminal.ViewerInfo
	mode     terminal.Mode // this terminal's mode for us; 0 = the connection's
	cols     uint16        // the PTY's size (from List or Size)
	rows     uint16
	sent     [2]uint16 // the size we last reported on this connection
	exited   bool
	reason   string
	// listedGone: marked ended because a List no longer had it; its Exit
	// (reason, status) may still come.
	listedGone bool
}

// termClient is the protocol logic of one TerminalPanel, independent of the
// browser: it turns server frames into screen operations and UI state, and
// user actions into client frames. It is not safe for concurrent use; the
// session serializes calls with its lock.
type termClient struct {
	sink      termSink
	connected bool // Hello received on the current connection
	everList  bool // a List was received at least once (auto-open only then)
	mode      terminal.Mode
	window    uint32
	me        string // our viewer id, from Hello
	terms     map[uint32]*termState
	order     []uint32 // tabs, in the order they appeared
	active    uint32
	nextTag   uint32
	pending   map[uint32]bool // Open tags not yet answered
	err       string          // last error from the server, shown as text
	errCode   terminal.ErrCode
	want      uint32 // the terminal to show once listed (?term=), 0 = none
}

func newTermClient(sink termSink, mode terminal.Mode) *termClient {
	return &termClient{sink: sink, mode: mode, terms: map[uint32]*termState{}, pending: map[uint32]bool{}}
}

// modeOf returns our effective mode on terminal st.
func (c *termClient) modeOf(st *termState) terminal.Mode {
	if st != nil && st.mode != 0 {
		return st.mode
	}
	return c.mode
}

// driving reports whether our keystrokes reach terminal id.
func (c *termClient) driving(id uint32) bool {
	st := c.terms[id]
	return st != nil && !st.exited && c.modeOf(st) == terminal.ModeDrive
}

// disconnected is called when the WebSocket closed: nothing is attached any more.
func (c *termClient) disconnected() {
	c.connected = false
	for _, st := range c.terms {
		st.attached = false
		st.sent = [2]uint16{}
	}
	clear(c.pending)
}

// add makes a tab for terminal id (once).
func (c *termClient) add(id uint32) *termState {
	if st, ok := c.terms[id]; ok {
		return st
	}
	st := &termState{id: id}
	c.terms[id] = st
	c.order = append(c.order, id)
	c.sink.create(id)
	c.applyMode(st)
	if c.active == 0 {
		c.active = id
	}
	return st
}

// applyMode sets read-only and sizing of st's screen from our mode.
func (c *termClient) applyMode(st *termState) {
	watch := c.modeOf(st) != terminal.ModeDrive || st.exited
	c.sink.setReadOnly(st.id, watch)
	if c.modeOf(st) == terminal.ModeWatch && st.cols > 0 && st.rows > 0 {
		c.sink.setFixedSize(st.id, st.cols, st.rows)
	} else {
		c.sink.setFixedSize(st.id, 0, 0)
	}
}

// attach asks for st's output after the last byte we have.
func (c *termClient) attach(st *termState) {
	if st.attached || st.exited || !c.connected {
		return
	}
	cols, rows := c.sink.size(st.id)
	if c.modeOf(st) != terminal.ModeDrive {
		cols, rows = 0, 0 // a watcher's size does not count
	}
	c.sink.send(terminal.Attach{ID: st.id, Since: st.seq, Cols: cols, Rows: rows})
	st.attached = true
	st.sent = [2]uint16{cols, rows}
}

// handle applies one server frame other than Output (see output).
func (c *termClient) handle(m terminal.Message) {
	switch m := m.(type) {
	case terminal.Hello:
		c.connected = true
		c.mode = m.Mode
		c.window = m.Window
		c.me = m.ViewerID
		c.err, c.errCode = "", 0
		for _, st := range c.terms {
			c.applyMode(st)
		}
		c.sink.send(terminal.ListRequest{})
	case terminal.List:
		c.list(m)
	case terminal.Opened:
		delete(c.pending, m.Tag)
		st := c.add(m.ID)
		st.attached = true // Open attaches from seq 0
		c.active = m.ID    // its screen reports its size once fitted (resized)
		c.attachListed()
	case terminal.Gap:
		st := c.terms[m.ID]
		if st == nil {
			return
		}
		if m.To > st.seq {
			c.sink.notice(m.ID, fmt.Sprintf("… %s of output skipped …", termBytes(m.To-max(m.From, st.seq))))
			st.seq = m.To
		}
	case terminal.Exit:
		st := c.terms[m.ID]
		if st == nil || (st.exited && !st.listedGone) {
			return
		}
		st.exited, st.attached, st.listedGone = true, false, false
		st.reason = m.Reason
		if st.reason == "" {
			st.reason = "ended"
		}
		if m.Code >= 0 {
			st.reason = fmt.Sprintf("%s (status %d)", st.reason, m.Code)
		}
		c.sink.notice(m.ID, "terminal ended: "+endedText(st.reason)) // a sentence, never the helper's raw words
		c.applyMode(st)
	case terminal.Title:
		if st := c.terms[m.ID]; st != nil {
			st.title = terminal.SanitizeTitle(m.Title)
		}
	case terminal.ErrorMsg:
		c.err, c.errCode = m.Message, m.Code
		switch m.Code {
		case terminal.ErrCodeLimit, terminal.ErrCodeWatchOnly:
			clear(c.pending) // the Open failed
			c.attachListed()
		case terminal.ErrCodeNotFound:
			if st := c.terms[m.ID]; st != nil && !st.exited {
				st.exited, st.attached, st.reason = true, false, "no longer exists"
				c.applyMode(st)
			}
		}
	case terminal.Viewers:
		if st := c.terms[m.ID]; st != nil {
			st.viewers = m.Viewers
		}
	case terminal.ModeMsg:
		if m.ID == 0 {
			c.mode = m.Mode
			for _, st := range c.terms {
				c.applyMode(st)
			}
		} else if st := c.terms[m.ID]; st != nil {
			st.mode = m.Mode
			c.applyMode(st)
		}
	case terminal.Size:
		if st := c.terms[m.ID]; st != nil {
			st.cols, st.rows = m.Cols, m.Rows
			c.applyMode(st)
		}
	}
}

// list reconciles the tabs with the agent's running terminals.
func (c *termClient) list(m terminal.List) {
	running := map[uint32]bool{}
	for _, t := range m.Terminals {
		running[t.ID] = true
		st := c.add(t.ID)
		if t.Title != "" {
			st.title = terminal.SanitizeTitle(t.Title)
		}
		st.viewers = t.Viewers
		if t.Cols > 0 && t.Rows > 0 && (t.Cols != st.cols || t.Rows != st.rows) {
			st.cols, st.rows = t.Cols, t.Rows
			c.applyMode(st)
		}
	}
	for _, st := range c.terms {
		if !running[st.id] && !st.exited {
			// An attached terminal also gets an Exit with the reason, which
			// may come after this List: it then completes the notice.
			if !st.attached {
				c.sink.notice(st.id, "terminal ended")
			}
			st.exited, st.attached, st.reason, st.listedGone = true, false, "ended", true
			c.applyMode(st)
		}
	}
	if c.want != 0 && running[c.want] {
		c.active, c.want = c.want, 0
	}
	first := !c.everList
	c.everList = true
	// A terminal we asked for may be in this List before its Opened: attach the
	// others only once no Open is pending, so ours is not attached twice.
	c.attachListed()
	if first && len(m.Terminals) == 0 && c.mode == terminal.ModeDrive && len(c.pending) == 0 {
		c.open()
	}
}

// attachListed attaches every known running terminal (unless an Open is pending).
func (c *termClient) attachListed() {
	if len(c.pending) > 0 {
		return
	}
	for _, id := range c.order {
		c.attach(c.terms[id])
	}
}

// output accounts for an Output frame of n bytes at seq for terminal id. It
// returns how many leading bytes the screen must skip (already shown before a
// reconnect) and whether the rest must be written; the skipped bytes are
// acknowledged at once.
func (c *termClient) output(id uint32, seq uint64, n int) (skip int, write bool) {
	st := c.terms[id]
	if st == nil || st.exited {
		if n > 0 {
			c.sink.send(terminal.Ack{ID: id, N: uint32(n)})
		}
		return n, false
	}
	end := seq + uint64(n)
	switch {
	case end <= st.seq: // all of it was shown already
		skip = n
	case seq < st.seq:
		skip = int(st.seq - seq)
	case seq > st.seq: // bytes missing without a Gap: say so rather than hide it
		c.sink.notice(id, fmt.Sprintf("… %s of output skipped …", termBytes(seq-st.seq)))
	}
	if skip > 0 {
		c.sink.send(terminal.Ack{ID: id, N: uint32(skip)})
	}
	if end > st.seq {
		st.seq = end
	}
	return skip, skip < n
}

// ackBytes is how many written bytes the screens acknowledge at once: a quarter
// of the server's window (it requires at least every window/2).
func (c *termClient) ackBytes() int {
	w := int(c.window)
	if w <= 0 {
		w = 256 << 10
	}
	return min(max(w/4, 1024), 64<<10)
}

// open asks for a new terminal at the active screen's size.
func (c *termClient) open() {
	if !c.connected || c.mode != terminal.ModeDrive {
		return
	}
	c.nextTag++
	c.pending[c.nextTag] = true
	cols, rows := uint16(0), uint16(0)
	if c.active != 0 {
		cols, rows = c.sink.size(c.active)
	}
	c.sink.send(terminal.Open{Tag: c.nextTag, Cols: cols, Rows: rows})
}

// closeTab ends terminal id (drivers), or forgets an ended one.
func (c *termClient) closeTab(id uint32) {
	st := c.terms[id]
	if st == nil {
		return
	}
	if !st.exited {
		if c.connected && c.driving(id) {
			c.sink.send(terminal.CloseTerminal{ID: id})
		}
		return // the tab goes when Exit arrives
	}
	delete(c.terms, id)
	i := slices.Index(c.order, id)
	c.order = slices.Delete(c.order, i, i+1)
	c.sink.remove(id)
	if c.active == id {
		c.active = 0
		if len(c.order) > 0 {
			c.active = c.order[min(i, len(c.order)-1)]
		}
	}
}

// input sends keystrokes to terminal id if we drive it.
func (c *termClient) input(id uint32, data []byte) {
	if len(data) == 0 || !c.connected || !c.driving(id) {
		return
	}
	for len(data) > 0 {
		n := min(len(data), terminal.MaxInputLen)
		c.sink.send(terminal.Input{ID: id, Data: data[:n]})
		data = data[n:]
	}
}

// resized reports our screen size of terminal id (drivers only).
func (c *termClient) resized(id uint32, cols, rows int) {
	if !c.connected || !c.driving(id) || cols <= 0 || rows <= 0 {
		return
	}
	cc, rr := terminal.ClampSize(uint16(min(cols, 0xffff)), uint16(min(rows, 0xffff)))
	if st := c.terms[id]; st.sent != [2]uint16{cc, rr} {
		st.sent = [2]uint16{cc, rr}
		c.sink.send(terminal.Resize{ID: id, Cols: cc, Rows: rr})
	}
}

// ack reports n bytes of terminal id written to the screen.
func (c *termClient) ack(id uint32, n int) {
	if !c.connected || n <= 0 {
		return
	}
	if st := c.terms[id]; st == nil || !st.attached {
		return
	}
	c.sink.send(terminal.Ack{ID: id, N: uint32(n)})
}

// setTitle records a title xterm.js parsed from the output (OSC 0/2).
func (c *termClient) setTitle(id uint32, title string) {
	if st := c.terms[id]; st != nil {
		st.title = terminal.SanitizeTitle(title)
	}
}

// termTab is one tab as the panel renders it.
type termTab struct {
	ID     uint32
	Label  string
	Exited bool
}

// termView is the UI state of the panel, copied out of the client for rendering.
type termView struct {
	Tabs     []termTab
	Active   uint32
	Watching bool   // our mode on the active terminal (or the connection) is watch
	Title    string // the active terminal's window title
	Viewers  string // who is attached to the active terminal
	Ended    string // why the active terminal ended ("" = running)
	Err      string
	ErrCode  terminal.ErrCode
	CanOpen  bool
}

// view returns the state to render.
func (c *termClient) view() termView {
	v := termView{Active: c.active, Err: c.err, ErrCode: c.errCode, CanOpen: c.connected && c.mode == terminal.ModeDrive}
	for i, id := range c.order {
		st := c.terms[id]
		label := st.title
		if label == "" {
			label = fmt.Sprintf("Terminal %d", i+1)
		}
		v.Tabs = append(v.Tabs, termTab{ID: id, Label: label, Exited: st.exited})
	}
	st := c.terms[c.active]
	v.Watching = c.modeOf(st) == terminal.ModeWatch
	if st != nil {
		v.Title = st.title
		v.Viewers = termViewersText(st.viewers, c.me)
		if st.exited {
			v.Ended = st.reason
		}
	}
	return v
}

// termViewersText lists who is attached, e.g. "alice (you, driving), bob
// (watching, 2 connections)": one entry per person and mode.
func termViewersText(vs []terminal.ViewerInfo, me string) string {
	type key struct {
		id   string
		mode terminal.Mode
	}
	count := map[key]int{}
	var order []terminal.ViewerInfo
	for _, v := range vs {
		k := key{v.ID, v.Mode}
		if count[k] == 0 {
			order = append(order, v)
		}
		count[k]++
	}
	parts := make([]string, 0, len(order))
	for _, v := range order {
		name := v.Name
		if name == "" {
			name = v.ID
		}
		how := v.Mode.String()
		if me != "" && v.ID == me {
			how = "you, " + how
		}
		if n := count[key{v.ID, v.Mode}]; n > 1 {
			how += fmt.Sprintf(", %d connections", n)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", name, how))
	}
	return strings.Join(parts, ", ")
}

// termBytes formats a byte count for a notice.
func termBytes(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// termBackoff is the wait before reconnect attempt n (0-based): 0.5 s doubling
// to 15 s, with ±20 % jitter so that many tabs do not reconnect in step.
func termBackoff(n int) time.Duration {
	d := 15 * time.Second
	if n < 5 {
		d = min(d, 500*time.Millisecond<<n)
	}
	j := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * j)
}
