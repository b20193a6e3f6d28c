//go:build !js

package terminal

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// term is one terminal on the gateway: its helper stream, scrollback ring and viewers.
type term struct {
	id      uint32
	agentID string
	user    string // the account it counts against (Service.users); set before it is listed
	svc     *Service
	log     *slog.Logger
	stream  net.Conn
	rd      *hReader // read only by the reader goroutine

	wmu sync.Mutex // serializes frames to the helper

	mu         sync.Mutex
	cond       sync.Cond // reader waits here while paused; signalled by acks, detaches, finish
	ring       ring
	viewers    []*attachment
	cols, rows uint16
	title      string
	osc        oscParser
	finishing  bool // finish has begun (once)
	ended      bool
	exitCode   int32
	exitReason string
	idle       *time.Timer
	seen       uint64    // the furthest position any viewer was sent (see pausedLocked)
	lastOut    time.Time // when output last arrived (the dashboard's most active terminal)
}

// attachment is one session's view of one terminal; fields guarded by term.mu.
type attachment struct {
	t        *term
	s        *session
	mode     Mode
	cursor   uint64 // next byte to send
	acked    uint64 // position the client has written up to (skipped gaps count)
	cols     uint16 // this client's size; 0 = unknown
	rows     uint16
	ready    bool // set by term.attach; nothing is sent before
	exitSent bool
	detached bool
	lastNote time.Time // last Mode note for dropped input
}

// run is the terminal's reader goroutine (owner: Service.wg): helper stream → ring.
// It pauses while the fastest attached client is more than HighWater behind, and
// exits when the stream ends or the terminal is finished.
func (t *term) run() {
	defer t.svc.wg.Done()
	for {
		t.mu.Lock()
		for !t.ended && t.pausedLocked() {
			t.cond.Wait()
		}
		ended := t.ended
		t.mu.Unlock()
		if ended {
			return
		}
		typ, p, err := t.rd.next()
		if err != nil {
			t.log.Warn("terminal stream ended", "err", err)
			t.finish(-1, ErrHelperExited.Error(), false)
			return
		}
		switch typ {
		case hOutput:
			t.output(p)
		case hExit:
			code := int32(-1)
			if len(p) == 4 {
				code = int32(binary.BigEndian.Uint32(p))
			}
			t.finish(code, "shell exited", false)
			return
		case hError:
			msg := "helper error"
			if len(p) >= 2 {
				msg = string(p[2:])
			}
			t.finish(-1, msg, false)
			return
		}
	}
}

// pausedLocked reports whether reading from the helper waits: while the fastest attached
// driver is more than HighWater behind. Only drivers hold the agent back: a watcher (who
// may be anyone the agent is shared with) that stops acknowledging falls behind and gets a
// gap marker instead; with no driver attached the terminal keeps reading into the ring.
//
// With no viewer at all, reading stops once the ring holds a whole ring of output nobody was
// sent: the helper stream then stops, the helper stops reading the PTY, and the program blocks
// in write, as behind a terminal after XOFF (instead of the agent spinning for nobody). The
// next attach resumes it, and the viewer gets the ring's content first.
func (t *term) pausedLocked() bool {
	if len(t.viewers) == 0 {
		return t.ring.end-t.seen >= uint64(t.ring.size)
	}
	fastest, ok := t.fastestDriverLocked(func(a *attachment) uint64 { return a.acked })
	return ok && t.ring.end-fastest > uint64(t.svc.cfg.HighWater)
}

// fastestDriverLocked returns the highest pos over the attached drivers, and whether there is one.
func (t *term) fastestDriverLocked(pos func(*attachment) uint64) (uint64, bool) {
	var fastest uint64
	found := false
	for _, a := range t.viewers {
		if a.mode == ModeDrive {
			fastest, found = max(fastest, pos(a)), true
		}
	}
	return fastest, found
}

// output appends p to the ring. It never overwrites bytes the fastest attached driver
// has not been sent yet: it waits for room instead (backpressure towards the helper).
func (t *term) output(p []byte) {
	var title string
	var changed bool
	t.mu.Lock()
	if ti, ok := t.osc.feed(p); ok {
		title, changed = ti, true
		t.title = ti
	}
	for len(p) > 0 {
		room := len(p)
		for !t.ended {
			fastest, ok := t.fastestDriverLocked(func(a *attachment) uint64 { return a.cursor })
			if !ok {
				break
			}
			if room = t.ring.size - int(t.ring.end-fastest); room > 0 {
				break
			}
			t.cond.Wait()
		}
		if t.ended {
			break
		}
		n := min(room, len(p))
		t.ring.write(p[:n])
		t.lastOut = time.Now()
		p = p[n:]
		for _, a := range t.viewers {
			a.s.wakeup()
		}
	}
	t.mu.Unlock()
	if changed {
		t.svc.broadcast(t.agentID, Encode(Title{ID: t.id, Title: title}))
	}
	t.svc.changed(t.agentID)
}

// finish ends the terminal once: it stops reading, hangs up the helper side, removes the
// terminal from the service and lets every viewer get its last output and an Exit.
func (t *term) finish(code int32, reason string, hangup bool) {
	t.mu.Lock()
	if t.finishing {
		t.mu.Unlock()
		return
	}
	t.finishing = true
	t.mu.Unlock()

	// Free its slot first: a client that sees the Exit can open another at once.
	s := t.svc
	s.mu.Lock()
	if a := s.agents[t.agentID]; a != nil && a.terms[t.id] == t {
		delete(a.terms, t.id)
		s.releaseLocked(t.user)
		s.gcAgentLocked(t.agentID)
	}
	s.mu.Unlock()

	t.mu.Lock()
	t.ended, t.exitCode, t.exitReason = true, code, reason
	if t.idle != nil {
		t.idle.Stop()
	}
	t.cond.Broadcast()
	for _, a := range t.viewers {
		a.s.wakeup()
	}
	t.mu.Unlock()
	if hangup && t.wmu.TryLock() {
		// Best effort and brief: closing the stream hangs the shell up anyway.
		t.stream.SetWriteDeadline(time.Now().Add(time.Second))
		t.stream.Write(appendHFrame(nil, hHangup, nil))
		t.wmu.Unlock()
	}
	t.stream.Close()
	t.log.Info("terminal ended", "code", code, "reason", reason)
	s.broadcastList(t.agentID)
	s.changed(t.agentID)
}

// tail copies the last n bytes of the terminal's output (partial: not from its first byte),
// with its size.
func (t *term) tail(n int) (out []byte, partial bool, cols, rows uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := max(t.ring.start(), t.ring.end-min(t.ring.end, uint64(n)))
	x, y := t.ring.slice(from, int(t.ring.end-from))
	out = append(append(make([]byte, 0, len(x)+len(y)), x...), y...)
	return out, from > 0, t.cols, t.rows
}

// send writes one frame to the helper.
func (t *term) send(typ byte, payload []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.stream.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := t.stream.Write(appendHFrame(make([]byte, 0, hHeaderLen+len(payload)), typ, payload))
	return err
}

// attach adds (or resets) a session's attachment, resuming at since.
func (t *term) attach(a *attachment, since uint64) bool {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return false
	}
	a.cursor = min(since, t.ring.end)
	a.acked = a.cursor
	a.exitSent = false
	a.ready = true
	if !slices.Contains(t.viewers, a) {
		t.viewers = append(t.viewers, a)
	}
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	t.cond.Broadcast()
	t.mu.Unlock()
	a.s.wakeup()
	t.resizeToDrivers()
	t.svc.broadcast(t.agentID, Encode(t.viewersMsg()))
	return true
}

// detach removes an attachment; with nobody left, the idle timer starts.
func (t *term) detach(a *attachment) {
	t.mu.Lock()
	if a.detached {
		t.mu.Unlock()
		return
	}
	a.detached = true
	if i := slices.Index(t.viewers, a); i >= 0 {
		t.viewers = slices.Delete(t.viewers, i, i+1)
	}
	if len(t.viewers) == 0 && !t.ended && t.svc.cfg.IdleTimeout > 0 {
		t.idle = time.AfterFunc(t.svc.cfg.IdleTimeout, func() {
			t.mu.Lock()
			idle := len(t.viewers) == 0
			t.mu.Unlock()
			if idle {
				t.finish(-1, "idle timeout", true)
			}
		})
	}
	ended := t.ended
	t.cond.Broadcast()
	t.mu.Unlock()
	if !ended {
		t.resizeToDrivers()
		t.svc.broadcast(t.agentID, Encode(t.viewersMsg()))
	}
}

// resizeToDrivers sets the PTY to the smallest size among attached drivers that reported one.
func (t *term) resizeToDrivers() {
	t.mu.Lock()
	var cols, rows uint16
	for _, a := range t.viewers {
		if a.mode != ModeDrive || a.cols == 0 || a.rows == 0 {
			continue
		}
		if cols == 0 || a.cols < cols {
			cols = a.cols
		}
		if rows == 0 || a.rows < rows {
			rows = a.rows
		}
	}
	if cols == 0 || (cols == t.cols && rows == t.rows) || t.ended {
		t.mu.Unlock()
		return
	}
	t.cols, t.rows = cols, rows
	t.mu.Unlock()
	if err := t.send(hResize, sizePayload(cols, rows)); err != nil {
		t.log.Debug("resize", "err", err)
	}
	t.svc.broadcast(t.agentID, Encode(Size{ID: t.id, Cols: cols, Rows: rows}))
}

func (t *term) viewersMsg() Viewers {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Viewers{ID: t.id, Viewers: t.viewerInfoLocked()}
}

func (t *term) viewerInfoLocked() []ViewerInfo {
	vs := make([]ViewerInfo, 0, len(t.viewers))
	for _, a := range t.viewers {
		vs = append(vs, ViewerInfo{ID: a.s.v.ID, Name: a.s.v.Name, Mode: a.mode})
	}
	return vs
}

func (t *term) info() TermInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TermInfo{ID: t.id, Cols: t.cols, Rows: t.rows, Seq: t.ring.end, Title: t.title, Viewers: t.viewerInfoLocked()}
}

// nextFrame returns the next frame for an attachment (a Gap, Output or the Exit), appended
// to buf[:0], or nil when there is nothing to send (caught up, or the window is full).
// done reports that the Exit was sent and the attachment can go.
func (t *term) nextFrame(a *attachment, buf []byte) (frame []byte, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !a.ready || a.detached || a.exitSent {
		return nil, false
	}
	if start := t.ring.start(); a.cursor < start {
		g := Gap{ID: t.id, From: a.cursor, To: start}
		a.acked += start - a.cursor
		a.cursor = start
		t.cond.Broadcast()
		return AppendEncode(buf[:0], g), false
	}
	if avail := t.ring.end - a.cursor; avail > 0 {
		inflight := a.cursor - a.acked
		window := uint64(t.svc.cfg.Window)
		if inflight >= window {
			return nil, false
		}
		n := int(min(avail, window-inflight, maxOutputFrame))
		buf = AppendOutputHeader(buf[:0], t.id, a.cursor)
		x, y := t.ring.slice(a.cursor, n)
		buf = append(append(buf, x...), y...)
		a.cursor += uint64(n)
		t.seen = max(t.seen, a.cursor)
		t.cond.Broadcast()
		return buf, false
	}
	if t.ended {
		a.exitSent = true
		return AppendEncode(buf[:0], Exit{ID: t.id, Code: t.exitCode, Reason: t.exitReason}), true
	}
	return nil, false
}

// ack records n bytes written by the client.
func (t *term) ack(a *attachment, n uint32) {
	t.mu.Lock()
	a.acked = min(a.acked+uint64(n), a.cursor)
	t.cond.Broadcast()
	t.mu.Unlock()
	a.s.wakeup()
}

// ring is a terminal's scrollback: the last size bytes of output, with byte sequence
// numbers. Byte seq lives at buf[seq%size]; buf grows up to size as output arrives.
type ring struct {
	buf  []byte
	size int
	end  uint64 // sequence number of the next byte
}

func (r *ring) start() uint64 {
	if r.end > uint64(r.size) {
		return r.end - uint64(r.size)
	}
	return 0
}

func (r *ring) write(p []byte) {
	if len(p) > r.size {
		r.end += uint64(len(p) - r.size)
		p = p[len(p)-r.size:]
	}
	if len(r.buf) < r.size && r.end+uint64(len(p)) > uint64(len(r.buf)) {
		n := min(max(2*len(r.buf), int(r.end)+len(p), 64<<10), r.size)
		nb := make([]byte, n)
		copy(nb, r.buf)
		r.buf = nb
	}
	for len(p) > 0 {
		off := int(r.end % uint64(r.size))
		c := copy(r.buf[off:], p)
		p = p[c:]
		r.end += uint64(c)
	}
}

// slice returns the n bytes from seq from as up to two slices; the caller checked bounds.
func (r *ring) slice(from uint64, n int) (a, b []byte) {
	off := int(from % uint64(r.size))
	if off+n <= len(r.buf) {
		return r.buf[off : off+n], nil
	}
	a = r.buf[off:]
	return a, r.buf[:n-len(a)]
}

// oscParser finds window titles (OSC 0 and 2) in the output byte stream, across reads.
type oscParser struct {
	state int // 0 ground, 1 after ESC, 2 OSC number, 3 OSC text, 4 ESC in OSC text
	num   int
	buf   []byte
}

const maxOSC = 4096

// feed scans p and returns the last complete title set in it.
func (o *oscParser) feed(p []byte) (title string, changed bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch o.state {
		case 0:
			j := bytes.IndexByte(p[i:], 0x1b)
			if j < 0 {
				return title, changed
			}
			i += j
			o.state = 1
		case 1:
			switch c {
			case ']':
				o.state, o.num, o.buf = 2, 0, o.buf[:0]
			case 0x1b:
			default:
				o.state = 0
			}
		case 2:
			switch {
			case c >= '0' && c <= '9':
				o.num = min(o.num*10+int(c-'0'), 100000)
			case c == ';':
				o.state = 3
			case c == 0x1b:
				o.state = 1
			default:
				o.state = 0
			}
		case 3:
			switch c {
			case 0x07:
				title, changed = o.done(title, changed)
			case 0x1b:
				o.state = 4
			case 0x18, 0x1a:
				o.state = 0
			default:
				if len(o.buf) < maxOSC {
					o.buf = append(o.buf, c)
				}
			}
		case 4:
			if c == '\\' {
				title, changed = o.done(title, changed)
			} else {
				o.state = 1
				i-- // reprocess as the byte after an ESC
			}
		}
	}
	return title, changed
}

func (o *oscParser) done(title string, changed bool) (string, bool) {
	o.state = 0
	if o.num == 0 || o.num == 2 {
		return SanitizeTitle(string(o.buf)), true
	}
	return title, changed
}
