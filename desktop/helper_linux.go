//go:build linux && !js

package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jezek/xgb"

	"github.com/porthole/porthole/desktop/internal/x11cap"
)

// The helper half: one desktop stream is one capture engine (x11cap: one X connection, one
// MIT-SHM segment, XDamage) on the session's shared display, its frames written to the
// stream, and the gateway's input replayed on the display. The gateway opens one stream per
// agent for all its viewers (its hub fans the frames out), so one engine per stream encodes
// each change once; a second stream (a second gateway, a test) gets its own engine on the
// same display.

const (
	// maxInFrame bounds a frame from the gateway: the longest is SetClipboard.
	maxInFrame = MaxClipboard + 64
	// outQueue is how many batches of frames wait for the stream writer; the capture loop
	// blocks beyond it (the engine keeps accumulating damage meanwhile: latest wins).
	outQueue = 4
	// lagPerFrame converts the gateway's Lag (frames behind) to the engine's viewer lag.
	lagPerFrame = 50 * time.Millisecond
)

// inputMu serialises input replay: robotgo keeps one X connection per process.
var inputMu sync.Mutex

var quietXGB sync.Once

// ServeHelperStream serves one desktop stream inside the agent's sandbox (the helper's
// handler of StreamKind): it starts the session's display on first use, then streams the
// screen and replays input until the stream or the session ends.
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	// xgb logs "Could not get authority info" on every connection (the agent's display needs no
	// cookie: only the jail can reach its socket); that noise would bury a crash's real cause in
	// the helper's stderr, which the gateway reports.
	quietXGB.Do(func() { xgb.Logger.SetOutput(io.Discard) })
	defer stream.Close()
	log := slog.Default().With("surface", "desktop")
	if err := serveHelper(ctx, stream, log); err != nil && ctx.Err() == nil {
		log.Warn("desktop stream ended", "err", err)
	}
}

type helperStream struct {
	stream  net.Conn
	capt    *x11cap.Capturer
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelCauseFunc
	out     chan [][]byte
	inj     injector
	injErr  error
	clip    *clipboard
	display string

	mu          sync.Mutex
	refresh     bool
	nextCancel  context.CancelFunc
	screenW     int
	screenH     int
	frameSeq    uint32
	warnedInput bool
}

func serveHelper(ctx context.Context, stream net.Conn, log *slog.Logger) error {
	d, err := sharedDisplay(ctx, log)
	if err != nil {
		return err
	}
	capt, err := x11cap.Open(d.name, x11cap.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("%w: capture: %v", ErrDisplay, err)
	}
	defer capt.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	defer stop()
	h := &helperStream{stream: stream, capt: capt, log: log, ctx: ctx, cancel: cancel,
		out: make(chan [][]byte, outQueue), display: d.name}
	inputMu.Lock()
	h.inj, h.injErr = newInjector(d.name)
	inputMu.Unlock()
	if clip, err := openClipboard(d.name, h.sendClipboard); err != nil {
		log.Warn("desktop: clipboard unavailable", "err", err)
	} else {
		h.clip = clip
		defer clip.close()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // owner: serveHelper (wg); exits when ctx ends or a write fails
		defer wg.Done()
		h.writer()
	}()
	go func() { // owner: serveHelper (wg); exits when ctx ends or the capture fails
		defer wg.Done()
		h.captureLoop()
	}()
	err = h.reader()
	cancel(err)
	wg.Wait()
	if h.inj != nil {
		inputMu.Lock()
		h.inj.releaseAll()
		inputMu.Unlock()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// writer is the stream's only writer.
func (h *helperStream) writer() {
	for {
		select {
		case batch := <-h.out:
			for _, f := range batch {
				if err := WriteRawStreamFrame(h.stream, f); err != nil {
					h.cancel(fmt.Errorf("write the desktop stream: %w", err))
					return
				}
			}
		case <-h.ctx.Done():
			return
		}
	}
}

func (h *helperStream) send(batch ...[]byte) bool {
	select {
	case h.out <- batch:
		return true
	case <-h.ctx.Done():
		return false
	}
}

// captureLoop turns the engine's frames into wire frames: Screen when the size changed,
// the Rects and a FrameEnd, then the cursor.
func (h *helperStream) captureLoop() {
	for {
		h.mu.Lock()
		refresh := h.refresh
		h.refresh = false
		nctx, ncancel := context.WithCancel(h.ctx)
		h.nextCancel = ncancel
		h.mu.Unlock()
		var f x11cap.Frame
		var err error
		if !refresh {
			f, err = h.capt.Next(nctx)
			if errors.Is(err, context.Canceled) && h.ctx.Err() == nil {
				f, err = h.capt.Keyframe() // Refresh interrupted the wait
			}
		} else {
			f, err = h.capt.Keyframe()
		}
		ncancel()
		if err != nil {
			if h.ctx.Err() == nil {
				h.cancel(fmt.Errorf("capture: %w", err))
			}
			return
		}
		if !h.send(h.frames(f)...) {
			return
		}
	}
}

// frames encodes one engine frame for the stream.
func (h *helperStream) frames(f x11cap.Frame) [][]byte {
	var batch [][]byte
	if f.Resized || f.Width != h.screenW || f.Height != h.screenH {
		h.screenW, h.screenH = f.Width, f.Height
		batch = append(batch, Encode(Screen{W: uint16(f.Width), H: uint16(f.Height)}))
	}
	for _, c := range f.Copies { // before the Rects: they are applied first, in order
		batch = append(batch, Encode(Copy{SrcX: uint16(c.SrcX), SrcY: uint16(c.SrcY), X: uint16(c.X), Y: uint16(c.Y),
			W: uint16(c.W), H: uint16(c.H)}))
	}
	for _, r := range f.Rects {
		var flags uint8
		if r.Scaled {
			flags = RectScaled
		}
		batch = append(batch, Encode(Rect{X: uint16(r.X), Y: uint16(r.Y), W: uint16(r.W), H: uint16(r.H),
			Enc: r.Enc, Flags: flags, Data: r.Data}))
	}
	if len(f.Rects) > 0 || len(f.Copies) > 0 || f.Resized {
		h.frameSeq++
		batch = append(batch, Encode(FrameEnd{Seq: h.frameSeq}))
	}
	if c := f.Cursor; c != nil && c.W <= MaxCursor && c.H <= MaxCursor {
		batch = append(batch, Encode(CursorShape{W: uint16(c.W), H: uint16(c.H), HotX: uint16(c.HotX),
			HotY: uint16(c.HotY), RGBA: c.RGBA}))
	}
	if p := f.Pointer; p != nil {
		batch = append(batch, Encode(CursorPos{X: uint16(p.X), Y: uint16(p.Y)}))
	}
	return batch
}

// requestRefresh makes the capture loop send a keyframe next.
func (h *helperStream) requestRefresh() {
	h.mu.Lock()
	h.refresh = true
	c := h.nextCancel
	h.mu.Unlock()
	if c != nil {
		c()
	}
}

// sendClipboard sends the display's clipboard text, and says when it was cut (size bytes in
// all, over MaxClipboard).
func (h *helperStream) sendClipboard(text string, size int) {
	h.send(Encode(Clipboard{Text: text}))
	if size > MaxClipboard {
		h.send(Encode(ClipboardCut{Size: uint32(size)})) // at most maxIncrBytes and a piece
	}
}

// reader reads the gateway's frames (bounded) until the stream ends.
func (h *helperStream) reader() error {
	var buf []byte
	for {
		frame, err := ReadStreamFrame(h.stream, buf, maxInFrame)
		if err != nil {
			if h.ctx.Err() != nil {
				return context.Cause(h.ctx)
			}
			return err
		}
		m, err := Decode(frame)
		if err != nil {
			return fmt.Errorf("from the gateway: %w", err)
		}
		h.handle(m)
		if buf = frame; cap(buf) > 64<<10 {
			buf = nil
		}
	}
}

// handle acts on one frame from the gateway (which has checked who drives, and clamped
// coordinates to the display; the helper clamps again to the display it has).
func (h *helperStream) handle(m Message) {
	switch m := m.(type) {
	case Pointer, Wheel, Key, Text:
		h.input(m)
	case Refresh:
		h.requestRefresh()
	case Lag:
		h.capt.SetViewerLag(time.Duration(m.Frames) * lagPerFrame)
	case ResizeRequest:
		w, hh := clampSize(int(m.W), int(m.H))
		if err := h.capt.Resize(w, hh); err != nil {
			h.log.Warn("desktop: resize", "w", w, "h", hh, "err", err)
		}
	case SetClipboard:
		if h.clip != nil {
			if err := h.clip.set(m.Text); err != nil {
				h.log.Warn("desktop: set clipboard", "err", err)
			}
		}
	case ScreenshotRequest:
		shot, err := screenshot(h.display, m.Format, m.Scale)
		if err != nil {
			h.log.Warn("desktop: screenshot", "err", err)
		}
		h.send(Encode(shot))
	default:
		h.log.Debug("desktop: ignored a frame from the gateway", "op", fmt.Sprintf("0x%02x", uint8(m.Op())))
	}
}

// input replays one input frame, clamped to the display's current size.
func (h *helperStream) input(m Message) {
	if h.inj == nil {
		h.mu.Lock()
		warn := !h.warnedInput
		h.warnedInput = true
		h.mu.Unlock()
		if warn {
			h.log.Warn("desktop: input dropped", "err", h.injErr)
		}
		return
	}
	w, hh := h.capt.Size()
	cx := func(x uint16) int { return min(int(x), max(w-1, 0)) }
	cy := func(y uint16) int { return min(int(y), max(hh-1, 0)) }
	inputMu.Lock()
	defer inputMu.Unlock()
	var err error
	switch m := m.(type) {
	case Pointer:
		err = h.inj.pointer(cx(m.X), cy(m.Y), m.Buttons&buttonsAll)
		h.capt.NotePointerInput()
	case Wheel:
		const maxSteps = 100
		err = h.inj.wheel(cx(m.X), cy(m.Y), min(max(int(m.DX), -maxSteps), maxSteps), min(max(int(m.DY), -maxSteps), maxSteps))
		h.capt.NotePointerInput()
	case Key:
		err = h.inj.key(m.Code, m.Down)
	case Text:
		err = h.inj.text(m.Text)
	}
	if err != nil {
		h.log.Debug("desktop: input", "err", err)
	}
}
