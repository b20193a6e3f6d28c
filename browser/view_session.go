//go:build !js

package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// viewSession is one viewer's WebSocket. Its reader is serveView's goroutine; its only
// writer is writeLoop. Everything it has to send is latest-wins state, never a queue that
// grows with time: the newest frame (one slot), the newest Tabs, Nav, Dialog, Control, ...,
// and at most viewMaxErrs errors.
type viewSession struct {
	h      *viewHub
	v      Viewer
	mode   Mode
	ws     *websocket.Conn
	cancel context.CancelCauseFunc
	log    *slog.Logger
	wake   chan struct{} // cap 1: "something to write"

	pmu   sync.Mutex // pongs only (the ping handler runs in serveView's reader)
	pongs [][]byte

	// Guarded by hub.mu.
	hello, modeFrame, control, viewers, tabs, nav, dialog, chooser, downloads, sel []byte
	errs                                                                           [][]byte
	shot                                                                           *shot // latest-wins slot: the newest frame not yet sent
	seq, acked                                                                     uint32
	vw, vh                                                                         uint16 // the viewer's size (Resize)
	lastNote                                                                       time.Time

	// The reader's own (serveView's goroutine): an upload in progress.
	up *upload
}

func newViewSession(h *viewHub, ws *websocket.Conn, v Viewer, cancel context.CancelCauseFunc) *viewSession {
	mode := ModeOf(v.Mode)
	return &viewSession{h: h, v: v, mode: mode, ws: ws, cancel: cancel, wake: make(chan struct{}, 1),
		log:       h.log.With("viewer", v.ID, "conn", v.Conn),
		hello:     Encode(Hello{Version: ProtocolVersion, Mode: mode, ViewerID: ConnID(v), ViewerName: v.Name}),
		modeFrame: Encode(ModeMsg{Mode: mode})}
}

func (s *viewSession) wakeup() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *viewSession) queuePong(data []byte) {
	s.pmu.Lock()
	if len(s.pongs) < 16 {
		s.pongs = append(s.pongs, data)
	}
	s.pmu.Unlock()
	s.wakeup()
}

// queueErr queues an Error message (dropped when viewMaxErrs are already waiting).
func (s *viewSession) queueErr(code ErrCode, msg string) {
	s.h.mu.Lock()
	s.queueErrLocked(code, msg)
	s.h.mu.Unlock()
}

func (s *viewSession) queueErrLocked(code ErrCode, msg string) {
	if len(s.errs) < viewMaxErrs {
		s.errs = append(s.errs, Encode(ErrorMsg{Code: code, Message: msg}))
		s.wakeup()
	}
}

// noteLocked queues an error at most once per viewNoteEvery (dropped input is frequent).
func (s *viewSession) noteLocked(code ErrCode, msg string) {
	if now := time.Now(); now.Sub(s.lastNote) >= viewNoteEvery {
		s.lastNote = now
		s.queueErrLocked(code, msg)
	}
}

func (s *viewSession) isOwner() bool {
	return s.v.Token == "" && (s.v.ID == s.h.agent.OwnerID || s.v.Admin)
}

// take returns the messages s should write now, and the frame to send after them (nil:
// none, or its window of unacknowledged frames is full). Taking a frame acknowledges to
// Chromium the frames it waits on.
func (h *viewHub) take(s *viewSession, out [][]byte) ([][]byte, *shot, uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	add := func(f *[]byte) {
		if *f != nil {
			out = append(out, *f)
			*f = nil
		}
	}
	add(&s.hello)
	add(&s.modeFrame)
	out = append(out, s.errs...)
	s.errs = nil
	add(&s.control)
	add(&s.viewers)
	add(&s.tabs)
	add(&s.nav)
	add(&s.dialog)
	add(&s.chooser)
	add(&s.downloads)
	add(&s.sel)
	var sh *shot
	if s.shot != nil && s.seq-s.acked < viewWindow {
		sh, s.shot = s.shot, nil
		s.seq++
	}
	return out, sh, s.seq
}

// writeLoop is the WebSocket's only writer.
func (s *viewSession) writeLoop(ctx context.Context) error {
	ping := time.NewTicker(viewPingEvery)
	defer ping.Stop()
	var batch [][]byte
	var hdr []byte
	for {
		if ctx.Err() != nil {
			s.closeWS(ctx)
			return nil
		}
		s.pmu.Lock()
		pongs := s.pongs
		s.pongs = nil
		s.pmu.Unlock()
		for _, p := range pongs {
			if err := s.ws.WriteControl(websocket.PongMessage, p, time.Now().Add(viewWriteTimeout)); err != nil {
				return fmt.Errorf("write pong: %w", err)
			}
		}
		var sh *shot
		var seq uint32
		batch, sh, seq = s.h.take(s, batch[:0])
		for _, f := range batch {
			s.ws.SetWriteDeadline(time.Now().Add(viewWriteTimeout))
			if err := s.ws.WriteMessage(websocket.BinaryMessage, f); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		if sh != nil {
			// The viewer can draw another frame: let Chromium send the next one.
			s.h.ackOwed(ctx)
			// The JPEG is written as it came (one copy for every viewer), after a header of
			// this viewer's own seq.
			hdr = Frame{Seq: seq, W: sh.w, H: sh.h, ScrollX: sh.sx, ScrollY: sh.sy}.appendTo(append(hdr[:0], byte(OpFrame)))
			s.ws.SetWriteDeadline(time.Now().Add(viewWriteTimeout))
			w, err := s.ws.NextWriter(websocket.BinaryMessage)
			if err == nil {
				if _, err = w.Write(hdr); err == nil {
					if _, err = w.Write(sh.data); err == nil {
						err = w.Close()
					}
				}
			}
			if err != nil {
				return fmt.Errorf("write frame: %w", err)
			}
		}
		if len(batch) > 0 || sh != nil {
			clear(batch)
			continue
		}
		select {
		case <-s.wake:
		case <-ping.C:
			if err := s.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(viewWriteTimeout)); err != nil {
				return fmt.Errorf("write ping: %w", err)
			}
		case <-ctx.Done():
		}
	}
}

// closeWS writes the errors still queued (the reason the view ended), then a close frame
// saying why the server ends the connection (best effort).
func (s *viewSession) closeWS(ctx context.Context) {
	s.h.mu.Lock()
	errs := s.errs
	s.errs = nil
	s.h.mu.Unlock()
	deadline := time.Now().Add(time.Second)
	s.ws.SetWriteDeadline(deadline)
	for _, f := range errs {
		if s.ws.WriteMessage(websocket.BinaryMessage, f) != nil {
			break
		}
	}
	cause := context.Cause(ctx)
	code, text := websocket.CloseNormalClosure, ""
	switch {
	case errors.Is(cause, errViewClosed):
		code, text = websocket.CloseGoingAway, "server shutting down"
	case errors.Is(cause, errBrowserGone):
		code, text = websocket.CloseTryAgainLater, "browser unavailable"
	}
	s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), deadline)
}
