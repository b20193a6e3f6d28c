package server

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
	"github.com/porthole/porthole/surface"
)

// The dashboard (GET /api/dashboard): one WebSocket per open dashboard page carries every
// change of the agents its user may see: helper state, who is attached at which level, open
// sessions and thumbnails (docs/api.md). Everything is pushed on change; nothing polls a
// helper. The hub learns of changes from the bridges (helper states), the gateway's own
// WebSocket tracking (attach, detach), the agent handlers (create, update, delete) and the
// surfaces (Env.Changed); while no dashboard is open it only records helper states.
const (
	dashUrgent    = 50 * time.Millisecond // attach, state and agent changes go out this soon
	dashEvery     = time.Second           // at most one surface (thumbnail) update per agent per second
	dashPing      = 30 * time.Second      // keep-alive; nothing else is sent while nothing changes
	dashReadLimit = 4 << 10
	dashWriteWait = 10 * time.Second
	dashMaxImage  = 64 << 10 // bytes of a surface thumbnail image; bigger ones are dropped
)

// dashHub keeps the dashboard's view of every agent and pushes changes to the subscribers.
type dashHub struct {
	s   *Server
	log *slog.Logger

	nsubs atomic.Int32 // len(subs), read without the lock on the hot path (terminal output)

	mu      sync.Mutex
	closed  bool
	helpers map[string]helperInfo // every agent's last reported helper state (kept without dashboards)
	subs    map[*dashSub]struct{}
	// While dashboards are open:
	agents  map[string]api.Agent // the store's agents (nil until loaded)
	order   []string             // agent ids, oldest first
	cards   map[string]*dashCard // immutable once made; replaced on change
	timers  map[string]*time.Timer
	due     map[string]time.Time
	flushed map[string]time.Time
	reload  map[string]bool // reread the agent from the store at the next flush
	probing bool            // a backend probe for the subscribers is running

	updates  prometheus.Counter // cards computed
	messages prometheus.Counter // messages sent
	bytes    prometheus.Counter // bytes of those messages
}

// helperInfo is one agent's helper as the dashboard shows it.
type helperInfo struct {
	state   string
	problem string // a sentence for people, "" when nothing went wrong
}

// dashCard is what every dashboard may show of one agent, before filtering for a user.
type dashCard struct {
	agent    api.Agent
	helper   helperInfo
	viewers  []cardViewer
	surfaces map[api.Surface]surface.Status
}

type cardViewer struct {
	userID  string
	name    string
	surface api.Surface
	mode    api.Level
}

func newDashHub(s *Server) *dashHub {
	h := &dashHub{
		s: s, log: s.log.With("part", "dashboard"),
		helpers: map[string]helperInfo{},
		subs:    map[*dashSub]struct{}{},
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "porthole_dashboard_updates_total", Help: "Agent cards the dashboard computed (after a change, or for a new dashboard).",
		}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "porthole_dashboard_messages_total", Help: "Messages sent to dashboards (keep-alive pings excluded).",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "porthole_dashboard_bytes_total", Help: "Bytes of the messages sent to dashboards.",
		}),
	}
	s.metrics.reg.MustRegister(h.updates, h.messages, h.bytes)
	s.metrics.websockets.WithLabelValues("dashboard")
	return h
}

// onHelper records a helper state change (bridges.Config.OnState; called with the bridges'
// locks held, so it only records and schedules).
func (h *dashHub) onHelper(agentID string, st bridges.HelperState) {
	h.mu.Lock()
	old := h.helpers[agentID]
	info := helperInfo{state: st.State, problem: old.problem}
	switch {
	case st.State == bridges.HelperRunning || st.State == bridges.HelperIdle:
		info.problem = ""
	case st.State == bridges.HelperStopped && st.Err != nil:
		info.problem = helperProblem(st.Err)
		h.log.Info("agent helper stopped", "agent", agentID, "err", st.Err)
	case st.State == bridges.HelperStopped:
		info.problem = ""
	}
	h.helpers[agentID] = info
	backendDown := st.Err != nil && errors.Is(st.Err, bridges.ErrBackendUnavailable)
	h.mu.Unlock()
	if info != old {
		h.mark(agentID, true, false)
	}
	if backendDown {
		h.refreshBackends()
	}
}

// helperProblem turns why a helper stopped into a sentence for people, without internals
// (paths, sockets): those go to the log.
func helperProblem(err error) string {
	switch {
	case errors.Is(err, bridges.ErrBackendUnavailable):
		return "The agent's backend is unavailable, so its sandbox cannot start. An admin can see why under Backend health."
	case errors.Is(err, bridges.ErrHostNotAllowed):
		return "This server does not allow host agents (it was started without --allow-host-backend)."
	case errors.Is(err, bridges.ErrHelperVersion):
		return "The agent's helper is from another Porthole release; an admin must update the server's helper binary."
	case errors.Is(err, bridges.ErrHelperGone):
		return "The agent's sandbox stopped unexpectedly. Opening one of its surfaces starts it again."
	}
	return "The agent's sandbox could not start. Opening one of its surfaces tries again; an admin can find the cause in the server's log."
}

// attached is called when a WebSocket of the agent opened or closed.
func (h *dashHub) attached(agentID string) { h.mark(agentID, true, false) }

// agentChanged is called after an agent was created, updated or deleted.
func (h *dashHub) agentChanged(agentID string) { h.mark(agentID, true, true) }

// surfaceChanged is a surface's Env.Changed: at most one update a second per agent.
func (h *dashHub) surfaceChanged(agentID string) { h.mark(agentID, false, false) }

// mark schedules the agent's card to be recomputed and sent: soon when urgent, else no
// sooner than dashEvery after its last update. Without dashboards it does nothing.
func (h *dashHub) mark(agentID string, urgent, reload bool) {
	if h.nsubs.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.subs) == 0 || h.agents == nil {
		return
	}
	if reload {
		h.reload[agentID] = true
	}
	now := time.Now()
	due := now.Add(dashUrgent)
	if next := h.flushed[agentID].Add(dashEvery); !urgent && next.After(due) {
		due = next
	}
	if t, ok := h.timers[agentID]; ok {
		if h.due[agentID].After(due) {
			t.Reset(due.Sub(now))
			h.due[agentID] = due
		}
		return
	}
	h.due[agentID] = due
	// Owner: the hub; the timer's goroutine computes one card and returns. close stops them.
	h.timers[agentID] = time.AfterFunc(due.Sub(now), func() { h.flush(agentID) })
}

// flush recomputes the agent's card and queues it for every subscriber.
func (h *dashHub) flush(agentID string) {
	h.mu.Lock()
	delete(h.timers, agentID)
	delete(h.due, agentID)
	if h.closed || h.agents == nil {
		h.mu.Unlock()
		return
	}
	h.flushed[agentID] = time.Now()
	reload := h.reload[agentID]
	delete(h.reload, agentID)
	h.mu.Unlock()

	card, err := h.compute(agentID, reload)
	if err != nil {
		h.log.Warn("dashboard: compute an agent's card", "agent", agentID, "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.agents == nil {
		return // the last dashboard closed meanwhile
	}
	h.store(agentID, card)
	for sub := range h.subs {
		sub.dirty(agentID)
	}
}

// store records a computed card (nil: the agent is gone); callers hold mu.
func (h *dashHub) store(agentID string, card *dashCard) {
	if card == nil {
		delete(h.cards, agentID)
		delete(h.agents, agentID)
		h.order = slices.DeleteFunc(h.order, func(id string) bool { return id == agentID })
		return
	}
	if _, known := h.agents[agentID]; !known {
		h.order = append(h.order, agentID)
	}
	h.agents[agentID] = card.agent
	h.cards[agentID] = card
}

// compute builds the agent's card from the agent (reread from the store when reload or
// unknown), its helper state, the open WebSockets and the surfaces' Status. nil: the agent
// does not exist (any more).
func (h *dashHub) compute(agentID string, reload bool) (*dashCard, error) {
	h.updates.Inc()
	h.mu.Lock()
	a, known := h.agents[agentID]
	helper, ok := h.helpers[agentID]
	h.mu.Unlock()
	if !ok {
		helper = helperInfo{state: api.StateStopped}
	}
	if reload || !known {
		var err error
		a, err = h.s.st.GetAgent(h.s.ctx, agentID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
	card := &dashCard{agent: a, helper: helper, surfaces: map[api.Surface]surface.Status{}}
	h.s.mu.Lock()
	for _, info := range h.s.sockets {
		if info.agentID == agentID && info.surface != "" {
			card.viewers = append(card.viewers, cardViewer{userID: info.userID, name: info.name, surface: info.surface, mode: info.mode})
		}
	}
	h.s.mu.Unlock()
	slices.SortFunc(card.viewers, func(x, y cardViewer) int {
		return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(x.surface, y.surface), cmp.Compare(x.mode, y.mode))
	})
	for _, g := range h.s.surfaces {
		if r, ok := g.gw.(surface.StatusReporter); ok {
			card.surfaces[g.name] = r.Status(agentID)
		}
	}
	return card, nil
}

// forUser is the card as user u may see it, and whether they may see the agent at all.
func (c *dashCard) forUser(u api.User) (api.DashboardAgent, bool) {
	if !visible(u, c.agent) {
		return api.DashboardAgent{}, false
	}
	a := c.agent
	a.Access = effectiveAccess(u, a)
	d := api.DashboardAgent{Agent: a, State: c.helper.state, Problem: c.helper.problem,
		Viewers: []api.DashboardViewer{}, Surfaces: []api.DashboardSurface{}}
	if d.State == "" {
		d.State = api.StateStopped
	}
	for _, sf := range api.Surfaces {
		if !a.Access.Get(sf).AtLeast(api.LevelWatch) {
			continue // a surface they may not watch: neither its viewers nor its thumbnail
		}
		for _, v := range c.viewers {
			if v.surface != sf {
				continue
			}
			i := slices.IndexFunc(d.Viewers, func(x api.DashboardViewer) bool {
				return x.Name == v.name && x.Surface == sf && x.Mode == v.mode
			})
			if i < 0 {
				d.Viewers = append(d.Viewers, api.DashboardViewer{Name: v.name, Surface: sf, Mode: v.mode, You: v.userID == u.ID})
				i = len(d.Viewers) - 1
			}
			d.Viewers[i].Count++
		}
		st, ok := c.surfaces[sf]
		if !ok {
			continue
		}
		ds := api.DashboardSurface{Surface: sf, Sessions: st.Sessions, Lines: st.Lines, Active: st.Active}
		if len(st.Image) > 0 && len(st.Image) <= dashMaxImage && (st.ImageType == "image/jpeg" || st.ImageType == "image/png") {
			ds.Image = "data:" + st.ImageType + ";base64," + base64.StdEncoding.EncodeToString(st.Image)
		}
		d.Surfaces = append(d.Surfaces, ds)
	}
	return d, true
}

// subscribe adds a dashboard and returns the cards of every agent (loading them on the first).
func (h *dashHub) subscribe(sub *dashSub) ([]*dashCard, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrShutdown
	}
	h.subs[sub] = struct{}{}
	h.nsubs.Store(int32(len(h.subs)))
	loaded := h.agents != nil
	h.mu.Unlock()
	if !loaded {
		all, err := h.s.st.ListAgents(h.s.ctx)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		h.mu.Lock()
		if h.agents == nil {
			h.agents, h.cards = map[string]api.Agent{}, map[string]*dashCard{}
			h.timers, h.due, h.flushed, h.reload = map[string]*time.Timer{}, map[string]time.Time{}, map[string]time.Time{}, map[string]bool{}
			h.order = nil
			for _, a := range all {
				h.agents[a.ID] = a
				h.order = append(h.order, a.ID)
			}
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	order := slices.Clone(h.order)
	h.mu.Unlock()
	cards := make([]*dashCard, 0, len(order))
	for _, id := range order {
		h.mu.Lock()
		card := h.cards[id]
		h.mu.Unlock()
		if card == nil {
			var err error
			if card, err = h.compute(id, false); err != nil {
				return nil, err
			}
			h.mu.Lock()
			if h.agents != nil {
				if _, stillKnown := h.agents[id]; stillKnown && h.cards[id] == nil {
					h.store(id, card)
				}
			}
			h.mu.Unlock()
		}
		if card != nil {
			cards = append(cards, card)
		}
	}
	return cards, nil
}

// unsubscribe removes a dashboard; after the last one the hub forgets everything but the
// helper states.
func (h *dashHub) unsubscribe(sub *dashSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
	h.nsubs.Store(int32(len(h.subs)))
	if len(h.subs) == 0 {
		h.forgetLocked()
	}
}

func (h *dashHub) forgetLocked() {
	for _, t := range h.timers {
		t.Stop()
	}
	h.agents, h.cards, h.order, h.timers, h.due, h.flushed, h.reload = nil, nil, nil, nil, nil, nil, nil
}

// card returns the agent's current card (nil when unknown).
func (h *dashHub) card(agentID string) *dashCard {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cards[agentID]
}

// refreshBackends probes the backends and sends the result to every dashboard (one probe at
// a time; the bridges cache probes for a few seconds).
func (h *dashHub) refreshBackends() {
	h.mu.Lock()
	if h.probing || len(h.subs) == 0 || h.closed {
		h.mu.Unlock()
		return
	}
	h.probing = true
	h.mu.Unlock()
	go func() { // owner: the hub; one probe, then it returns
		b := h.probe()
		h.mu.Lock()
		h.probing = false
		for sub := range h.subs {
			sub.setBackends(b)
		}
		h.mu.Unlock()
	}()
}

func (h *dashHub) probe() []api.BackendHealth {
	ctx, cancel := context.WithTimeout(h.s.ctx, 10*time.Second)
	defer cancel()
	out := []api.BackendHealth{}
	for _, p := range h.s.bridge.Probe(ctx) {
		out = append(out, api.BackendHealth{Backend: p.Backend, OK: p.OK, Detail: p.Detail})
	}
	return out
}

// close stops the timers; dashboards end with the gateway's WebSockets.
func (h *dashHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.forgetLocked()
}

// dashSub is one open dashboard. Its writer goroutine is the WebSocket's only writer; the hub
// only marks agents dirty, so a slow dashboard costs memory per agent, never a queue.
type dashSub struct {
	user api.User
	wake chan struct{} // cap 1

	mu        sync.Mutex
	pending   map[string]bool
	sent      map[string]bool // agents the client shows (to tell it when one goes)
	backends  []api.BackendHealth
	newHealth bool
}

func newDashSub(u api.User) *dashSub {
	return &dashSub{user: u, wake: make(chan struct{}, 1), pending: map[string]bool{}, sent: map[string]bool{}}
}

func (d *dashSub) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dashSub) dirty(agentID string) {
	d.mu.Lock()
	d.pending[agentID] = true
	d.mu.Unlock()
	d.poke()
}

func (d *dashSub) setBackends(b []api.BackendHealth) {
	d.mu.Lock()
	d.backends, d.newHealth = b, true
	d.mu.Unlock()
	d.poke()
}

// dashboard serves GET /api/dashboard (people only; docs/api.md).
func (s *Server) dashboard(c echo.Context) error {
	p := principalOf(c)
	if !c.IsWebSocket() {
		return errorf(http.StatusBadRequest, nil, "this route is a WebSocket: send an Upgrade: websocket request")
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errorf(http.StatusServiceUnavailable, nil, "the server is shutting down")
	}
	s.wsWG.Add(1)
	s.mu.Unlock()
	defer s.wsWG.Done()

	ws, err := s.upgrader().Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	c.Set(upgradedKey, true)
	if !s.track(ws, socketInfo{userID: p.user.ID, session: hex.EncodeToString(p.sessionHash)}) {
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return nil
	}
	defer s.untrack(ws)
	gauge := s.metrics.websockets.WithLabelValues("dashboard")
	gauge.Inc()
	defer gauge.Dec()

	sub := newDashSub(p.user.User)
	cards, err := s.dash.subscribe(sub)
	defer s.dash.unsubscribe(sub)
	if err != nil {
		s.log.Error("dashboard: subscribe", "err", err)
		ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "the dashboard is unavailable; try again"), time.Now().Add(time.Second))
		ws.Close()
		return nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { // owner: this handler, which waits for it; exits when ctx ends or a write fails
		defer close(done)
		defer ws.Close()
		s.dashWriter(ctx, ws, sub, cards)
	}()
	ws.SetReadLimit(dashReadLimit)
	ws.SetReadDeadline(time.Now().Add(2 * dashPing))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(2 * dashPing)) })
	for {
		// The client sends nothing but pongs (and perhaps a close); anything else is ignored.
		if _, _, err := ws.ReadMessage(); err != nil {
			break
		}
	}
	cancel()
	<-done
	return nil
}

// dashWriter is the dashboard WebSocket's only writer: the snapshot, then each changed card
// as it comes, the backends' health, and a ping every dashPing.
func (s *Server) dashWriter(ctx context.Context, ws *websocket.Conn, sub *dashSub, cards []*dashCard) {
	send := func(m api.DashboardMessage) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		ws.SetWriteDeadline(time.Now().Add(dashWriteWait))
		if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
			return err
		}
		s.dash.messages.Inc()
		s.dash.bytes.Add(float64(len(b)))
		return nil
	}
	snap := api.DashboardMessage{Type: api.DashSnapshot, Agents: []api.DashboardAgent{}}
	for _, card := range cards {
		if d, ok := card.forUser(sub.user); ok {
			snap.Agents = append(snap.Agents, d)
			sub.sent[d.ID] = true
		}
	}
	if err := send(snap); err != nil {
		return
	}
	go func() { // owner: this writer's dashboard; one probe, then it returns
		sub.setBackends(s.dash.probe())
	}()
	ping := time.NewTicker(dashPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
			return
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(dashWriteWait)); err != nil {
				return
			}
			continue
		case <-sub.wake:
		}
		sub.mu.Lock()
		pending := sub.pending
		sub.pending = map[string]bool{}
		backends, newHealth := sub.backends, sub.newHealth
		sub.newHealth = false
		sub.mu.Unlock()
		if newHealth {
			if err := send(api.DashboardMessage{Type: api.DashBackends, Backends: backends}); err != nil {
				return
			}
		}
		ids := make([]string, 0, len(pending))
		for id := range pending {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			var d api.DashboardAgent
			ok := false
			if card := s.dash.card(id); card != nil {
				d, ok = card.forUser(sub.user)
			}
			var m api.DashboardMessage
			switch {
			case ok:
				m = api.DashboardMessage{Type: api.DashAgent, Agent: &d}
				sub.sent[id] = true
			case sub.sent[id]:
				m = api.DashboardMessage{Type: api.DashRemoved, ID: id}
				delete(sub.sent, id)
			default:
				continue // never shown, still not visible
			}
			if err := send(m); err != nil {
				return
			}
		}
	}
}
