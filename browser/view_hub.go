//go:build !js

package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// viewHub is one agent's live view: one CDP client (its own id space on the agent's
// browser), the tabs, the active tab's screencast, the viewers and who holds control.
//
// Goroutines (all owned by run, which waits for them; run is owned by the Service):
//   - the CDP reader (cdpCaller.run), which handles events under mu and never waits for a
//     reply;
//   - run itself, the worker: setup, attaching to the active tab, screencast restarts,
//     navigation state — everything that waits for Chromium's replies;
//   - the favicon worker (iconLoop, view_favicon.go), which asks the page for its icon
//     after a load without holding up the worker.
//
// Viewer sessions call into the hub from their own goroutines (commands wait for replies).
type viewHub struct {
	s      *Service
	agent  api.Agent
	log    *slog.Logger
	ctx    context.Context // ends when the hub ends
	cancel context.CancelCauseFunc
	ready  chan struct{} // closed once set up, or the hub ended
	kick   chan struct{} // cap 1: the worker has something to do
	// iconKick (cap 1): the favicon worker (iconLoop) should look at the shown tab.
	iconKick chan struct{}
	// The favicon worker's isolated world (its execution context id, and the session and
	// frame it is in); only iconLoop uses them.
	iconWorld   int64
	iconWorldIn string
	cdp         *cdpCaller // set before ready

	mu             sync.Mutex
	ended          bool
	endErr         error
	setUp          bool // the initial targets are known: a new page is now a new tab to follow
	sessions       []*viewSession
	holder         *viewSession // who holds control here (nil: nobody, or a person elsewhere)
	elsewhere      elsewhere    // a person who holds control on the agent's desktop (holder nil)
	handoff        surface.HandoffState
	stopWatch      func()      // ends the hub's watch of the agent's handoff
	automating     bool        // the agent's automation is connected
	pages          []*pageInfo // page targets, oldest first
	active         string      // target id the viewers should see
	attached       string      // target id the view's CDP session is attached to
	session        string      // that CDP session's id
	scW, scH       int         // the running screencast's max size (0: not running)
	scSession      int         // Chromium's screencast session id (acks name it)
	owed           int         // frames received and not yet acknowledged to Chromium
	last           *shot       // the newest frame
	gotFrame       bool        // a frame of the attached tab arrived
	navDirty       bool
	nav            Nav
	navFrame       []byte
	tabsFrame      []byte
	dialog         []byte // the open dialog's frame (nil: none)
	selectFrame    []byte // the open <select> popup's frame (nil: none)
	chooser        *chooserState
	downloads      []DownloadInfo
	dlFrame        []byte
	buttons        uint8 // pointer buttons down (the holder's)
	releaseButtons bool
	lastX, lastY   float64 // the pointer's last position
	click          clickState
}

// elsewhere is a person who holds control of the agent's screens on its desktop
// (surface.Handoff): the browser's input is theirs to give, not a viewer's here.
type elsewhere struct{ person, name, conn string }

// pageInfo is one page target (a tab).
type pageInfo struct {
	id, title, url string
	icon           string // sanitised favicon data URL ("" none)
	iconFor        string // the page URL (iconKey) the icon was fetched for
}

// shot is one screencast frame: the JPEG and its metadata.
type shot struct {
	w, h   uint16
	sx, sy int32
	data   []byte
}

type clickState struct {
	at     time.Time
	x, y   float64
	button string
	count  int
}

type chooserState struct {
	backendNodeID int64
	multiple      bool
}

func newViewHub(s *Service, agent api.Agent) *viewHub {
	ctx, cancel := context.WithCancelCause(s.vctx)
	return &viewHub{s: s, agent: agent, log: s.log.With("agent", agent.ID, "part", "view"),
		ctx: ctx, cancel: cancel, ready: make(chan struct{}), kick: make(chan struct{}, 1),
		iconKick: make(chan struct{}, 1)}
}

func (h *viewHub) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

var _ surface.Hub = (*viewHub)(nil)

// Run opens the CDP client, sets the view up and works until the hub ends (surface.Hub: the
// Service's Hubs own the goroutine).
func (h *viewHub) Run() {
	err := h.serve()
	h.end(err)
	h.s.statusChanged(h.agent.ID) // the dashboard: the browser is no longer connected
}

// End makes the hub end with cause (surface.Hub).
func (h *viewHub) End(cause error) { h.cancel(cause) }

// Ending reports whether the hub ended or is ending (surface.Hub).
func (h *viewHub) Ending() bool { return h.ctx.Err() != nil }

func (h *viewHub) serve() error {
	octx, ocancel := context.WithTimeout(h.ctx, viewOpenTimeout)
	c, err := h.s.viewClient(octx, h.agent)
	ocancel()
	if err != nil {
		if h.ctx.Err() != nil {
			return context.Cause(h.ctx)
		}
		return fmt.Errorf("%w: %v", errBrowserGone, err)
	}
	defer c.Close()
	h.cdp = newCDPCaller(c, h.event)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: serve, which waits for it; exits when the client fails or is closed
		defer wg.Done()
		err := h.cdp.run(h.ctx)
		h.cancel(fmt.Errorf("%w: %v", errBrowserGone, err))
	}()
	defer wg.Wait()
	defer c.Close() // unblocks the reader
	if err := h.setup(); err != nil {
		h.cancel(err)
		return context.Cause(h.ctx)
	}
	h.pollAutomation()
	wg.Add(1)
	go func() { defer wg.Done(); h.iconLoop() }() // owner: serve (wg); exits when the hub ends
	h.wantIcon()
	close(h.ready)
	h.log.Info("browser view started")
	h.s.statusChanged(h.agent.ID) // the dashboard: the browser is connected
	poll := time.NewTicker(automationPoll)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			h.pollAutomation()
			h.pollTargets()
		case <-h.kick:
			if err := h.work(); err != nil && h.ctx.Err() == nil {
				h.log.Warn("browser view", "err", err)
				h.broadcastErr(ErrCodeBrowser, err.Error())
			}
		case <-h.ctx.Done():
			return context.Cause(h.ctx)
		}
	}
}

// end marks the hub ended and ends every viewer with the reason.
func (h *viewHub) end(err error) {
	h.cancel(err)
	if h.stopWatch != nil {
		h.stopWatch()
	}
	h.mu.Lock()
	if !h.ended {
		h.ended, h.endErr = true, context.Cause(h.ctx)
		select {
		case <-h.ready:
		default:
			close(h.ready)
		}
	}
	sessions := slices.Clone(h.sessions)
	for _, s := range sessions {
		if !errors.Is(h.endErr, errViewIdle) {
			s.queueErrLocked(ErrCodeBrowser, h.endErr.Error())
		}
	}
	h.mu.Unlock()
	for _, s := range sessions {
		s.cancel(h.endErr)
	}
	h.log.Info("browser view ended", "cause", h.endErr)
}

func (h *viewHub) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.ctx, viewCallTimeout)
}

// setup discovers the tabs, sets downloads up, and picks the active tab.
func (h *viewHub) setup() error {
	ctx, cancel := h.callCtx()
	defer cancel()
	var targets struct {
		TargetInfos []targetInfo `json:"targetInfos"`
	}
	if err := h.cdp.call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		return fmt.Errorf("%w: %v", errBrowserGone, err)
	}
	h.mu.Lock()
	for _, t := range targets.TargetInfos {
		h.pageChangedLocked(t)
	}
	h.mu.Unlock()
	if err := h.cdp.call(ctx, "", "Target.setDiscoverTargets", map[string]any{"discover": true}, nil); err != nil {
		return fmt.Errorf("%w: %v", errBrowserGone, err)
	}
	dir, err := h.downloadsDir(ctx)
	if err != nil {
		h.log.Debug("browser downloads folder", "err", err)
		dir = downloadsDir
	}
	if err := h.cdp.call(ctx, "", "Browser.setDownloadBehavior", map[string]any{
		"behavior": "allow", "downloadPath": dir, "eventsEnabled": true}, nil); err != nil {
		h.log.Warn("browser downloads not enabled", "err", err)
	}
	h.mu.Lock()
	h.setUp = true
	empty := len(h.pages) == 0
	if !empty && h.active == "" {
		h.active = h.pages[len(h.pages)-1].id
	}
	h.mu.Unlock()
	if empty {
		var r struct {
			TargetID string `json:"targetId"`
		}
		if err := h.cdp.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &r); err != nil {
			return fmt.Errorf("%w: open a tab: %v", errBrowserGone, err)
		}
		h.mu.Lock()
		h.active = r.TargetID
		h.mu.Unlock()
	}
	return h.work()
}

// work brings the view to what the state asks: attached to the active tab with a screencast
// of the largest viewer's size, and fresh navigation state.
func (h *viewHub) work() error {
	ctx, cancel := h.callCtx()
	defer cancel()
	h.mu.Lock()
	active, attached, session := h.active, h.attached, h.session
	h.mu.Unlock()
	attachedNow := false
	if active != attached {
		if session != "" {
			h.cdp.call(ctx, session, "Page.stopScreencast", nil, nil)
			h.cdp.call(ctx, "", "Target.detachFromTarget", map[string]any{"sessionId": session}, nil)
		}
		h.mu.Lock()
		h.attached, h.session, h.scW, h.scH, h.owed = "", "", 0, 0, 0
		h.dialog, h.chooser = nil, nil
		if h.selectFrame != nil {
			h.setSelectLocked(nil)
		}
		h.mu.Unlock()
		if active == "" {
			return nil
		}
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if err := h.cdp.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": active, "flatten": true}, &r); err != nil {
			return fmt.Errorf("show the tab: %w", err)
		}
		session = r.SessionID
		h.cdp.call(ctx, "", "Target.activateTarget", map[string]any{"targetId": active}, nil)
		for _, c := range []struct {
			method string
			params any
		}{
			{"Page.enable", nil},
			{"Page.setInterceptFileChooserDialog", map[string]any{"enabled": true}},
			{"Page.bringToFront", nil},
		} {
			if err := h.callPage(ctx, session, c.method, c.params, nil); err != nil {
				h.log.Debug("browser view setup", "method", c.method, "err", err)
			}
		}
		h.mu.Lock()
		h.attached, h.session, h.navDirty, h.gotFrame = active, session, true, false
		attachedNow = true
		h.sessionsChangedLocked(true)
		h.mu.Unlock()
	}
	if session == "" {
		return nil
	}
	h.mu.Lock()
	var held uint8
	if h.releaseButtons {
		h.releaseButtons = false
		held, h.buttons = h.buttons, 0
	}
	x, y := h.lastX, h.lastY
	h.mu.Unlock()
	for _, b := range []uint8{ButtonLeft, ButtonMiddle, ButtonRight} {
		if held&b != 0 {
			h.cdp.send(ctx, session, "Input.dispatchMouseEvent", map[string]any{
				"type": "mouseReleased", "x": x, "y": y, "button": buttonName(b), "clickCount": 1})
		}
	}
	h.mu.Lock()
	w, hh := h.wantSizeLocked()
	restart := w != h.scW || hh != h.scH
	running := h.scW != 0
	navDirty := h.navDirty
	h.navDirty = false
	h.mu.Unlock()
	if restart {
		if running {
			h.cdp.call(ctx, session, "Page.stopScreencast", nil, nil)
		}
		if err := h.callPage(ctx, session, "Page.startScreencast", map[string]any{
			"format": "jpeg", "quality": 80, "maxWidth": w, "maxHeight": hh, "everyNthFrame": 1}, nil); err != nil {
			return fmt.Errorf("start the screencast: %w", err)
		}
		h.mu.Lock()
		h.scW, h.scH, h.owed = w, hh, 0
		h.mu.Unlock()
	}
	if attachedNow {
		h.wantIcon()
		h.firstFrame(ctx, session)
	}
	if navDirty {
		h.refreshNav(ctx, session)
	}
	return nil
}

// wantSizeLocked is the screencast's max size: the largest viewer's.
func (h *viewHub) wantSizeLocked() (int, int) {
	w, hh := 0, 0
	for _, s := range h.sessions {
		w, hh = max(w, int(s.vw)), max(hh, int(s.vh))
	}
	if w == 0 || hh == 0 {
		return defaultScreenW, defaultScreenH
	}
	return w, hh
}

// callPage is cdp.call on a page's session, tried again for up to a second while Chromium
// says "Not attached to an active page": right after an attach or at a cross-document
// navigation, the page's frame host is being swapped.
func (h *viewHub) callPage(ctx context.Context, session, method string, params, result any) error {
	for try := 0; ; try++ {
		err := h.cdp.call(ctx, session, method, params, result)
		if err == nil || try == 20 || !strings.Contains(err.Error(), "Not attached to an active page") {
			return err
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

type navHistory struct {
	CurrentIndex int `json:"currentIndex"`
	Entries      []struct {
		ID  int64  `json:"id"`
		URL string `json:"url"`
	} `json:"entries"`
}

func (h *viewHub) refreshNav(ctx context.Context, session string) {
	var hist navHistory
	if err := h.callPage(ctx, session, "Page.getNavigationHistory", nil, &hist); err != nil {
		h.log.Debug("browser navigation history", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.session != session {
		return
	}
	if i := hist.CurrentIndex; i >= 0 && i < len(hist.Entries) {
		h.nav.URL = hist.Entries[i].URL
	}
	h.nav.CanBack = hist.CurrentIndex > 0
	h.nav.CanForward = hist.CurrentIndex < len(hist.Entries)-1
	h.navChangedLocked()
}

// targetInfo is CDP's Target.TargetInfo (the fields the view reads).
type targetInfo struct {
	TargetID string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
	OpenerID string `json:"openerId"`
}

// pageChangedLocked records a page target's creation or change; a new page after setup
// becomes the active tab (as a browser shows a tab the page or the agent opened).
func (h *viewHub) pageChangedLocked(t targetInfo) {
	if t.Type != "page" || t.TargetID == "" {
		return
	}
	for _, p := range h.pages {
		if p.id == t.TargetID {
			p.title, p.url = t.Title, t.URL
			if p.id == h.active && h.nav.URL != t.URL {
				h.navDirty = true
				h.wake()
			}
			h.tabsChangedLocked()
			return
		}
	}
	if len(h.pages) >= maxTrackedPages {
		return
	}
	h.pages = append(h.pages, &pageInfo{id: t.TargetID, title: t.Title, url: t.URL})
	if h.setUp {
		h.active = t.TargetID
		h.wake()
	}
	h.tabsChangedLocked()
}

func (h *viewHub) pageGoneLocked(id string) {
	i := slices.IndexFunc(h.pages, func(p *pageInfo) bool { return p.id == id })
	if i < 0 {
		return
	}
	h.pages = slices.Delete(h.pages, i, i+1)
	if h.active == id {
		h.active = ""
		if n := len(h.pages); n > 0 {
			h.active = h.pages[min(i, n-1)].id
		}
		h.wake()
	}
	h.tabsChangedLocked()
}

func (h *viewHub) tabsChangedLocked() {
	ts := make([]TabInfo, 0, len(h.pages))
	for _, p := range h.pages {
		ts = append(ts, TabInfo{ID: p.id, Title: p.title, URL: p.url, Favicon: p.icon, Active: p.id == h.active})
	}
	h.tabsFrame = Encode(Tabs{Tabs: ts})
	for _, s := range h.sessions {
		s.tabs = h.tabsFrame
		s.wakeup()
	}
}

func (h *viewHub) navChangedLocked() {
	h.navFrame = Encode(h.nav)
	for _, s := range h.sessions {
		s.nav = h.navFrame
		s.wakeup()
	}
}

// sessionsChangedLocked resends the per-tab state (a new tab was attached).
func (h *viewHub) sessionsChangedLocked(tabSwitched bool) {
	h.tabsChangedLocked()
	closed := Encode(Dialog{})
	for _, s := range h.sessions {
		if tabSwitched {
			s.dialog = closed
			s.chooser = Encode(FileChooser{})
		}
	}
}

func (h *viewHub) controlChangedLocked() {
	f := h.controlFrameLocked()
	for _, s := range h.sessions {
		s.control = f
		s.wakeup()
	}
}

func (h *viewHub) controlFrameLocked() []byte {
	c := Control{Automating: h.automating}
	if h.holder != nil {
		c.HolderID, c.HolderName = ConnID(h.holder.v), h.holder.v.Name
	} else if h.elsewhere.person != "" {
		c.HolderID, c.HolderName = h.elsewhere.conn, h.elsewhere.name
	}
	return Encode(c)
}

func (h *viewHub) viewersChangedLocked() {
	vs := make([]ViewerInfo, 0, len(h.sessions))
	for _, s := range h.sessions {
		vs = append(vs, ViewerInfo{ID: ConnID(s.v), Name: s.v.Name, Mode: s.mode})
	}
	f := Encode(Viewers{Viewers: vs})
	for _, s := range h.sessions {
		s.viewers = f
		s.wakeup()
	}
}

func (h *viewHub) broadcastErr(code ErrCode, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sessions {
		s.queueErrLocked(code, msg)
	}
}

// join adds a viewer once the hub is set up.
func (h *viewHub) join(ctx context.Context, s *viewSession) error {
	select {
	case <-h.ready:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return h.endErr
	}
	h.sessions = append(h.sessions, s)
	s.control = h.controlFrameLocked()
	s.tabs, s.nav, s.dialog, s.downloads = h.tabsFrame, h.navFrame, h.dialog, h.dlFrame
	if h.chooser != nil && s.mode == ModeDrive {
		s.chooser = Encode(FileChooser{Open: true, Multiple: h.chooser.multiple})
	}
	if s.mode == ModeDrive {
		s.sel = h.selectFrame
	}
	s.shot = h.last
	h.viewersChangedLocked()
	return nil
}

// leave removes a viewer; a holder that leaves releases control (and the buttons it held)
// here: the person may still hold it on the agent's desktop.
func (h *viewHub) leave(s *viewSession) {
	h.mu.Lock()
	h.sessions = slices.DeleteFunc(h.sessions, func(x *viewSession) bool { return x == s })
	if h.holder == s {
		h.setHolderLocked(nil, elsewhere{})
	}
	h.viewersChangedLocked()
	if w, hh := h.wantSizeLocked(); w != h.scW || hh != h.scH {
		h.wake()
	}
	h.mu.Unlock()
	// Even when the hub did not show s as the holder (it had ended): a no-op unless s holds.
	h.s.cfg.Handoff.Release(h.agent.ID, api.SurfaceBrowser, ConnID(s.v))
}

// syncHandoff follows the agent's handoff (surface.Handoff.Watch): the desktop's taking or
// releasing control, and this view's.
func (h *viewHub) syncHandoff() {
	cur := h.s.cfg.Handoff.Holder(h.agent.ID)
	h.mu.Lock()
	h.applyHandoffLocked(cur)
	h.mu.Unlock()
}

// applyHandoffLocked makes the view's holder what the handoff says: the viewer that holds
// control here, a person who holds it on the agent's desktop, or nobody.
func (h *viewHub) applyHandoffLocked(cur surface.Holder) {
	p, ok := h.handoff.Apply(cur, api.SurfaceBrowser)
	if !ok || h.ended {
		return
	}
	var here *viewSession
	if p.Here {
		i := slices.IndexFunc(h.sessions, func(s *viewSession) bool { return ConnID(s.v) == p.Conn })
		if i >= 0 {
			here = h.sessions[i]
		}
	}
	if here != nil || p.Nobody {
		h.setHolderLocked(here, elsewhere{})
		return
	}
	// On the desktop, or a viewer here that has left (its Release follows).
	h.setHolderLocked(nil, elsewhere{person: p.Person, name: p.Name, conn: p.Conn})
}

// setHolderLocked makes s (or, when s is nil, a person on the agent's desktop, or nobody)
// the holder and tells every viewer.
func (h *viewHub) setHolderLocked(s *viewSession, e elsewhere) {
	if s != nil {
		e = elsewhere{}
	}
	if h.holder == s && h.elsewhere == e {
		return
	}
	h.elsewhere = e
	if h.buttons != 0 {
		// The worker releases what the old holder held down, so the page sees no stuck button.
		h.releaseButtons = true
		h.wake()
	}
	h.holder = s
	h.controlChangedLocked()
	name := e.name
	if s != nil {
		name = s.v.Name
	}
	h.log.Info("browser control", "holder", name, "on_desktop", e.person != "")
}

// event handles one CDP event on the reader goroutine: it updates state and wakes viewers
// or the worker, and never waits for Chromium.
func (h *viewHub) event(ev cdpEvent) {
	if ev.Method == "Page.screencastFrame" {
		h.log.Debug("cdp frame", "session", ev.SessionID, "bytes", len(ev.Params))
	} else {
		h.log.Debug("cdp event", "method", ev.Method, "session", ev.SessionID, "params", viewTruncate(string(ev.Params), 300))
	}
	switch ev.Method {
	case "Page.screencastFrame":
		h.screencastFrame(ev)
		return
	case "Target.targetCreated", "Target.targetInfoChanged":
		var p struct {
			TargetInfo targetInfo `json:"targetInfo"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			h.mu.Lock()
			h.pageChangedLocked(p.TargetInfo)
			h.mu.Unlock()
		}
		return
	case "Target.targetDestroyed", "Target.targetCrashed":
		var p struct {
			TargetID string `json:"targetId"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			h.mu.Lock()
			h.pageGoneLocked(p.TargetID)
			h.mu.Unlock()
		}
		return
	case "Target.detachedFromTarget":
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			h.mu.Lock()
			if p.SessionID == h.session && p.SessionID != "" {
				h.attached, h.session, h.scW, h.scH = "", "", 0, 0
				h.wake()
			}
			h.mu.Unlock()
		}
		return
	case "Browser.downloadWillBegin", "Browser.downloadProgress":
		h.downloadEvent(ev)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.SessionID == "" || ev.SessionID != h.session {
		return
	}
	switch ev.Method {
	case "Page.frameNavigated":
		var p struct {
			Frame struct {
				ParentID string `json:"parentId"`
				URL      string `json:"url"`
			} `json:"frame"`
		}
		if json.Unmarshal(ev.Params, &p) == nil && p.Frame.ParentID == "" {
			h.nav.URL = p.Frame.URL
			h.navChangedLocked()
			h.navDirty = true
			h.wake()
		}
	case "Page.navigatedWithinDocument":
		h.navDirty = true
		h.wake()
		h.wantIcon()
	case "Page.frameStartedLoading", "Page.frameStoppedLoading":
		var p struct {
			FrameID string `json:"frameId"`
		}
		if json.Unmarshal(ev.Params, &p) == nil && p.FrameID == h.attached {
			h.nav.Loading = ev.Method == "Page.frameStartedLoading"
			h.navChangedLocked()
			if !h.nav.Loading {
				h.navDirty = true
				h.wake()
				h.wantIcon()
			}
		}
	case "Page.javascriptDialogOpening":
		var p struct {
			URL           string `json:"url"`
			Message       string `json:"message"`
			Type          string `json:"type"`
			DefaultPrompt string `json:"defaultPrompt"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			h.dialog = Encode(Dialog{Open: true, Type: p.Type, Message: p.Message, Default: p.DefaultPrompt, URL: p.URL})
			for _, s := range h.sessions {
				s.dialog = h.dialog
				s.wakeup()
			}
		}
	case "Page.javascriptDialogClosed":
		h.dialog = nil
		closed := Encode(Dialog{})
		for _, s := range h.sessions {
			s.dialog = closed
			s.wakeup()
		}
	case "Page.fileChooserOpened":
		var p struct {
			Mode          string `json:"mode"`
			BackendNodeID int64  `json:"backendNodeId"`
		}
		if json.Unmarshal(ev.Params, &p) == nil {
			h.chooser = &chooserState{backendNodeID: p.BackendNodeID, multiple: p.Mode == "selectMultiple"}
			f := Encode(FileChooser{Open: true, Multiple: h.chooser.multiple})
			for _, s := range h.sessions {
				if s.mode == ModeDrive {
					s.chooser = f
					s.wakeup()
				}
			}
		}
	}
}

// screencastFrame puts a frame in every viewer's latest-wins slot. Chromium gets the frame's
// ack only when a viewer takes it (takeShot), so it sends no faster than the fastest viewer
// draws, and a page nobody can draw costs nothing.
func (h *viewHub) screencastFrame(ev cdpEvent) {
	var p struct {
		Data     string `json:"data"`
		Metadata struct {
			DeviceWidth  float64 `json:"deviceWidth"`
			DeviceHeight float64 `json:"deviceHeight"`
			ScrollX      float64 `json:"scrollOffsetX"`
			ScrollY      float64 `json:"scrollOffsetY"`
		} `json:"metadata"`
		SessionID int `json:"sessionId"`
	}
	if err := json.Unmarshal(ev.Params, &p); err != nil {
		return
	}
	h.mu.Lock()
	if ev.SessionID != h.session || h.session == "" {
		h.mu.Unlock()
		return
	}
	h.scSession = p.SessionID
	h.owed = min(h.owed+1, 16) // Chromium keeps at most a few in flight; never trust a count
	h.mu.Unlock()
	var data []byte
	if len(p.Data) <= base64.StdEncoding.EncodedLen(MaxFrameData) {
		data, _ = base64.StdEncoding.DecodeString(p.Data)
	}
	if len(data) == 0 {
		h.ackOwed(h.ctx) // drop a frame we cannot use, but keep Chromium going
		return
	}
	sh := &shot{w: clampU16(p.Metadata.DeviceWidth), h: clampU16(p.Metadata.DeviceHeight),
		sx: clampI32(p.Metadata.ScrollX), sy: clampI32(p.Metadata.ScrollY), data: data}
	h.mu.Lock()
	if ev.SessionID != h.session {
		h.mu.Unlock()
		return
	}
	h.gotFrame = true
	h.last = sh
	ready := false
	for _, s := range h.sessions {
		s.shot = sh
		s.wakeup()
		ready = ready || s.seq-s.acked < viewWindow
	}
	h.mu.Unlock()
	h.s.statusFrame(h.agent.ID) // the dashboard's thumbnail
	if ready {
		// A viewer's window is open: its writer takes this frame now, so Chromium may paint
		// the next one without waiting for that goroutine to run. Otherwise the ack waits
		// until a viewer takes a frame (take, writeLoop).
		h.ackOwed(h.ctx)
	}
}

// ackOwed acknowledges every frame Chromium is waiting on.
func (h *viewHub) ackOwed(ctx context.Context) {
	h.mu.Lock()
	n, session, id := h.owed, h.session, h.scSession
	h.owed = 0
	h.mu.Unlock()
	for range n {
		if h.cdp.send(ctx, session, "Page.screencastFrameAck", map[string]any{"sessionId": id}) != nil {
			return
		}
	}
}

func clampU16(f float64) uint16 {
	if !(f > 0) {
		return 0
	}
	return uint16(min(math.Round(f), 65535))
}

func clampI32(f float64) int32 {
	if math.IsNaN(f) {
		return 0
	}
	return int32(max(min(math.Round(f), math.MaxInt32), math.MinInt32))
}

func (h *viewHub) downloadEvent(ev cdpEvent) {
	var p struct {
		GUID              string  `json:"guid"`
		URL               string  `json:"url"`
		SuggestedFilename string  `json:"suggestedFilename"`
		TotalBytes        float64 `json:"totalBytes"`
		ReceivedBytes     float64 `json:"receivedBytes"`
		State             string  `json:"state"`
	}
	if json.Unmarshal(ev.Params, &p) != nil || p.GUID == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.IndexFunc(h.downloads, func(d DownloadInfo) bool { return d.ID == p.GUID })
	if ev.Method == "Browser.downloadWillBegin" {
		if i >= 0 {
			return
		}
		if len(h.downloads) >= MaxDownloads {
			h.downloads = slices.Delete(h.downloads, 0, 1)
		}
		h.downloads = append(h.downloads, DownloadInfo{ID: p.GUID, Name: baseName(p.SuggestedFilename), URL: p.URL, State: DownloadProgress})
	} else {
		if i < 0 {
			return
		}
		d := &h.downloads[i]
		d.Received, d.Total = uint64(max(p.ReceivedBytes, 0)), uint64(max(p.TotalBytes, 0))
		switch p.State {
		case "completed":
			d.State = DownloadCompleted
		case "canceled":
			d.State = DownloadCanceled
		}
	}
	h.dlFrame = Encode(Downloads{Downloads: h.downloads})
	for _, s := range h.sessions {
		s.downloads = h.dlFrame
		s.wakeup()
	}
}

// baseName is a download's file name as Chromium saves it: no directories.
func baseName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' || name[i] == '\\' {
			return name[i+1:]
		}
	}
	return name
}

func viewTruncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// pollAutomation updates "agent automating" from the CDP side's automation connections.
func (h *viewHub) pollAutomation() {
	on := len(h.s.automating(h.agent.ID)) > 0
	h.mu.Lock()
	if on != h.automating {
		h.automating = on
		h.controlChangedLocked()
	}
	h.mu.Unlock()
}

// pollTargets refreshes the tabs' titles and URLs: Chromium does not announce every title
// change (a <title> parsed after the navigation) in Target.targetInfoChanged.
func (h *viewHub) pollTargets() {
	ctx, cancel := h.callCtx()
	defer cancel()
	var targets struct {
		TargetInfos []targetInfo `json:"targetInfos"`
	}
	if h.cdp.call(ctx, "", "Target.getTargets", nil, &targets) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, t := range targets.TargetInfos {
		for _, p := range h.pages {
			if p.id == t.TargetID && (p.title != t.Title || p.url != t.URL) {
				p.title, p.url = t.Title, t.URL
				changed = true
			}
		}
	}
	if changed {
		h.tabsChangedLocked()
	}
}

// firstFrame makes sure viewers see a tab the view just attached to: a static page may send
// no screencast frame at all, so if none came shortly, a screenshot stands in for it.
func (h *viewHub) firstFrame(ctx context.Context, session string) {
	for range 6 {
		h.mu.Lock()
		got := h.gotFrame || h.session != session
		h.mu.Unlock()
		if got {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
	var shotR struct {
		Data string `json:"data"`
	}
	var lm struct {
		V struct {
			PageX        float64 `json:"pageX"`
			PageY        float64 `json:"pageY"`
			ClientWidth  float64 `json:"clientWidth"`
			ClientHeight float64 `json:"clientHeight"`
		} `json:"cssVisualViewport"`
	}
	if h.callPage(ctx, session, "Page.getLayoutMetrics", nil, &lm) != nil ||
		h.callPage(ctx, session, "Page.captureScreenshot", map[string]any{"format": "jpeg", "quality": 80}, &shotR) != nil ||
		len(shotR.Data) > base64.StdEncoding.EncodedLen(MaxFrameData) {
		return
	}
	data, err := base64.StdEncoding.DecodeString(shotR.Data)
	if err != nil || len(data) == 0 {
		return
	}
	sh := &shot{w: clampU16(lm.V.ClientWidth), h: clampU16(lm.V.ClientHeight), sx: clampI32(lm.V.PageX), sy: clampI32(lm.V.PageY), data: data}
	h.mu.Lock()
	if h.gotFrame || h.session != session {
		h.mu.Unlock()
		return
	}
	h.last = sh
	for _, s := range h.sessions {
		s.shot = sh
		s.wakeup()
	}
	h.mu.Unlock()
	h.s.statusFrame(h.agent.ID) // the dashboard's thumbnail
}
