//go:build !js

package browser

// The live view (docs/browser-protocol.md): one CDP client per agent (not per viewer) runs
// Page.startScreencast on the active tab and fans its frames out to the agent's viewers as
// binary JPEG messages; viewers who drive and hold control send input through the CDP Input
// domain. view_hub.go is the per-agent hub, view_session.go one viewer's WebSocket.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

const (
	defaultViewGrace = 30 * time.Second // the view's CDP client outlives its last viewer this long
	viewWindow       = 3                // frames a viewer may have unacknowledged
	defaultScreenW   = 1280             // screencast bounds before any viewer said its size
	defaultScreenH   = 1280
	viewCallTimeout  = 30 * time.Second
	viewOpenTimeout  = 60 * time.Second
	viewReadLimit    = MaxChunk + 1024
	viewMaxErrs      = 32 // errors queued per viewer (more are dropped)
	viewNoteEvery    = time.Second
	automationPoll   = time.Second // how often the view checks whether the agent's automation is connected
	maxTrackedPages  = 2 * MaxTabs // pages the view keeps track of (Chromium's ids are untrusted)
	downloadsDir     = "/home/agent/Downloads"
)

// Sentinel errors of the live view.
var (
	// errViewClosed: the service was closed (gateway shutdown).
	errViewClosed = errors.New("browser service closed")
	// errViewIdle ends a hub once nobody watched for its grace period.
	errViewIdle = errors.New("browser view idle")
	// errBrowserGone: the browser could not be reached, or its connection ended.
	errBrowserGone = errors.New("browser unavailable")
)

// viewState is the live view's part of Service.
type viewState struct {
	vctx    context.Context // ends at Close
	vcancel context.CancelCauseFunc

	hubs *surface.Hubs[*viewHub] // owns the hubs' goroutines

	// viewClient opens the live view's CDP client of an agent's browser: newClient(ctx,
	// agent, "view") by default; tests give a client of a local Chromium.
	viewClient func(ctx context.Context, agent api.Agent) (cdpClient, error)
	viewGrace  time.Duration
	// openFiles opens the agent's files stream (FilesStreamKind: uploads, downloads); set by
	// NewGateway, nil = no file transfer.
	openFiles func(ctx context.Context, agent api.Agent) (net.Conn, error)
}

func (s *Service) initView() {
	s.vctx, s.vcancel = context.WithCancelCause(context.Background())
	// The CDP side refuses the agent's automation input while a person holds control of
	// the agent's screens (here or on its desktop: surface.Handoff).
	s.cdpInputAllowed = func(agentID string) (bool, string) {
		c := s.cfg.Handoff.Holder(agentID)
		return c.Person == "", c.Name
	}
	s.viewClient = func(ctx context.Context, agent api.Agent) (cdpClient, error) {
		return s.newClient(ctx, agent, "view")
	}
	s.viewGrace = defaultViewGrace
	s.hubs = surface.NewHubs[*viewHub](func() time.Duration { return s.viewGrace }, errViewIdle)
}

// ModeOf maps a granted level to the wire's Mode.
func ModeOf(l api.Level) Mode {
	if l.AtLeast(api.LevelDrive) {
		return ModeDrive
	}
	return ModeWatch
}

// ConnID is the id a viewer has on the wire (Hello, Control, Viewers): "<person id>#<conn>",
// as on the desktop, so a client knows whether its own tab holds control.
func ConnID(v Viewer) string { return fmt.Sprintf("%s#%d", v.ID, v.Conn) }

// acquireView returns a use of the agent's hub, starting it if needed; the caller releases it.
func (s *Service) acquireView(agent api.Agent) (*surface.HubUse[*viewHub], error) {
	u, ok := s.hubs.Acquire(agent.ID, func() *viewHub {
		h := newViewHub(s, agent)
		h.stopWatch = s.cfg.Handoff.Watch(agent.ID, h.syncHandoff)
		h.syncHandoff()
		return h
	})
	if !ok {
		return nil, errViewClosed
	}
	return u, nil
}

// viewRoutes: GET download?id= sends a finished download to the viewer's device (drive).
func (s *Service) viewRoutes() []surface.Route {
	return []surface.Route{{Method: "GET", Path: "download", Level: api.LevelDrive, HTTP: s.serveDownload}}
}

// closeViewAgent ends the agent's live view and every viewer of it.
func (s *Service) closeViewAgent(agentID string) {
	s.hubs.End(agentID, fmt.Errorf("%w: the agent was stopped", errBrowserGone))
}

// closeView ends every hub and viewer and waits for the hubs' goroutines.
func (s *Service) closeView() {
	s.vcancel(errViewClosed)
	s.hubs.Close(errViewClosed)
}

// serveView runs one viewer's WebSocket until it closes or ctx ends; the server has
// authenticated, authorized (at least watch) and upgraded it. It is the only writer of ws
// (through the session's writer goroutine, which it owns and waits for).
func (s *Service) serveView(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopSvc := context.AfterFunc(s.vctx, func() { cancel(errViewClosed) })
	defer stopSvc()

	use, err := s.acquireView(agent)
	if err != nil {
		return err
	}
	defer use.Release()
	h := use.Hub
	sess := newViewSession(h, ws, v, cancel)
	if err := h.join(ctx, sess); err != nil {
		ws.SetWriteDeadline(time.Now().Add(time.Second))
		ws.WriteMessage(websocket.BinaryMessage, Encode(ErrorMsg{Code: ErrCodeBrowser, Message: err.Error()}))
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "browser unavailable"), time.Now().Add(time.Second))
		return err
	}
	defer h.leave(sess)

	sess.log.Debug("browser viewer connected", "mode", sess.mode)
	err = sess.conn.Serve(ctx, cancel, surface.ViewerLoop{
		ReadLimit: viewReadLimit,
		Flush:     sess.flush, Close: sess.closeWS,
		Text: func() {
			sess.queueErr(ErrCodeBadMessage, "text messages are not part of the browser protocol; send binary messages")
		},
		Frame: func(data []byte) {
			m, err := Decode(data)
			if err != nil {
				sess.queueErr(ErrCodeBadMessage, err.Error())
				return
			}
			h.handle(ctx, sess, m)
		},
	})
	if sess.up != nil {
		sess.up.abort() // an upload the viewer left half-way
	}
	sess.log.Debug("browser viewer disconnected", "cause", context.Cause(ctx))
	return err
}
