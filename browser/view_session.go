//go:build !js

package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/surface"
)

// viewSession is one viewer's WebSocket (a surface.ViewerConn: its reader is serveView's
// goroutine, its only writer runs flush). Everything it has to send is latest-wins state, never a queue that
// grows with time: the newest frame (one slot), the newest Tabs, Nav, Dialog, Control, ...,
// and at most viewMaxErrs errors.
type viewSession struct {
	h      *viewHub
	v      Viewer
	mode   Mode
	ws     *websocket.Conn
	conn   *surface.ViewerConn
	cancel context.CancelCauseFunc
	log    *slog.Logger

	// The writer's (flush only).
	batch [][]byte
	hdr   []byte

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
	return &viewSession{h: h, v: v, mode: mode, ws: ws, conn: surface.NewViewerConn(ws), cancel: cancel,
		log:       h.log.With("viewer", v.ID, "conn", v.Conn),
		hello:     Encode(Hello{Version: ProtocolVersion, Mode: mode, ViewerID: ConnID(v), ViewerName: v.Name}),
		modeFrame: Encode(ModeMsg{Mode: mode})}
}

func (s *viewSession) wakeup() { s.conn.Wake() }

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

// flush writes what the viewer is owed now (surface.ViewerLoop.Flush).
func (s *viewSession) flush(ctx context.Context) (bool, error) {
	batch, sh, seq := s.h.take(s, s.batch[:0])
	s.batch = batch
	for _, f := range batch {
		s.ws.SetWriteDeadline(time.Now().Add(surface.WriteTimeout))
		if err := s.ws.WriteMessage(websocket.BinaryMessage, f); err != nil {
			return false, fmt.Errorf("write: %w", err)
		}
	}
	if sh != nil {
		// The viewer can draw another frame: let Chromium send the next one.
		s.h.ackOwed(ctx)
		// The JPEG is written as it came (one copy for every viewer), after a header of
		// this viewer's own seq.
		s.hdr = Frame{Seq: seq, W: sh.w, H: sh.h, ScrollX: sh.sx, ScrollY: sh.sy}.appendTo(append(s.hdr[:0], byte(OpFrame)))
		s.ws.SetWriteDeadline(time.Now().Add(surface.WriteTimeout))
		w, err := s.ws.NextWriter(websocket.BinaryMessage)
		if err == nil {
			if _, err = w.Write(s.hdr); err == nil {
				if _, err = w.Write(sh.data); err == nil {
					err = w.Close()
				}
			}
		}
		if err != nil {
			return false, fmt.Errorf("write frame: %w", err)
		}
	}
	clear(batch)
	return len(batch) > 0 || sh != nil, nil
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
