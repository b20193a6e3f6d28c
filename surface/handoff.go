package surface

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/porthole/porthole/api"
)

// Handoff is the one control handoff of an agent's screens: its desktop and its browser (a
// headed browser is a window on that desktop) have one driver at a time. A person who takes
// control on one surface takes it from whoever held it on any of them; the same person keeps
// it where they already held it. Each surface keeps its own holder (which connection drives
// there) and follows Handoff through Watch.
//
// The agent's own input (the desktop's computer-use API, the browser's automation) is not a
// holder here: each surface refuses it while Holder reports a person.
//
// A Handoff is safe for concurrent use. Its notifications run without its lock held, so a
// surface may call into it from them.
type Handoff struct {
	mu     sync.Mutex
	gen    uint64
	agents map[string]*handoffAgent
}

type handoffAgent struct {
	person, name string                 // who holds control ("": nobody)
	held         map[api.Surface]string // where they hold it: surface → the connection's wire id
	watchers     map[*handoffWatch]struct{}
}

type handoffWatch struct{ notify func() }

// Holder is who holds control of an agent's screens.
type Holder struct {
	Person string // the person's id (Viewer.ID); "" when nobody holds control
	Name   string
	// Held is where they hold it: surface → the id of the connection that drives there.
	Held map[api.Surface]string
	// Gen orders what a surface reads: a Holder with a smaller Gen than one it has applied
	// is stale (the notifications of two changes may arrive in either order).
	Gen uint64
}

// Where returns the connection that holds control on surface sf, or else on another surface
// (in api.Surface order), and that surface; ("", "") when nobody holds control.
func (h Holder) Where(sf api.Surface) (conn string, on api.Surface) {
	if c, ok := h.Held[sf]; ok {
		return c, sf
	}
	for _, k := range slices.Sorted(maps.Keys(h.Held)) {
		return h.Held[k], k
	}
	return "", ""
}

// HandoffState is one surface hub's side of the handoff: the newest Holder it applied. Its
// zero value is ready; the hub's lock guards it.
type HandoffState struct{ gen uint64 }

// Placement is where a Holder puts control, as one surface sees it.
type Placement struct {
	Nobody bool // no person holds control
	// Here: Conn, a connection on this surface, holds it; otherwise Person holds it on
	// another surface, through Conn there.
	Here               bool
	Person, Name, Conn string
}

// Apply returns where cur puts control for surface sf, or false when cur is older than a
// Holder applied before (the notification of a later change overtook it).
func (st *HandoffState) Apply(cur Holder, sf api.Surface) (Placement, bool) {
	if cur.Gen < st.gen {
		return Placement{}, false
	}
	st.gen = cur.Gen
	if cur.Person == "" {
		return Placement{Nobody: true}, true
	}
	conn, on := cur.Where(sf)
	return Placement{Here: on == sf, Person: cur.Person, Name: cur.Name, Conn: conn}, true
}

// Claim is a person asking for control on one surface.
type Claim struct {
	Person, Name string
	Conn         string // the connection's wire id ("<id>#<conn>")
	// Owner: the agent's owner or an admin, who may take control back from anyone.
	Owner bool
}

// HeldError refuses a Claim: another person holds control.
type HeldError struct {
	Name string      // who holds it
	On   api.Surface // on which of the agent's surfaces
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s holds control of this agent's %s; ask them to release it (the agent's owner can take it back)", e.Name, e.On)
}

// NewHandoff returns an empty Handoff.
func NewHandoff() *Handoff { return &Handoff{agents: map[string]*handoffAgent{}} }

func (h *Handoff) agentLocked(agentID string) *handoffAgent {
	a := h.agents[agentID]
	if a == nil {
		a = &handoffAgent{held: map[api.Surface]string{}, watchers: map[*handoffWatch]struct{}{}}
		h.agents[agentID] = a
	}
	return a
}

// gcLocked forgets an agent nobody holds and nobody watches.
func (h *Handoff) gcLocked(agentID string, a *handoffAgent) {
	if a.person == "" && len(a.watchers) == 0 {
		delete(h.agents, agentID)
	}
}

func (a *handoffAgent) holder(gen uint64) Holder {
	return Holder{Person: a.person, Name: a.name, Held: maps.Clone(a.held), Gen: gen}
}

// Holder returns who holds control of the agent's screens now.
func (h *Handoff) Holder(agentID string) Holder {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.agents[agentID]; a != nil {
		return a.holder(h.gen)
	}
	return Holder{Gen: h.gen}
}

// Take gives c control on surface sf when nobody holds control, when c's person already
// does, or when c is the owner (take-back); otherwise it returns a *HeldError. A new person
// loses nothing: the one who held control loses it on every surface. Every watcher of the
// agent is notified (the taking surface's too) before Take returns.
func (h *Handoff) Take(agentID string, sf api.Surface, c Claim) (Holder, error) {
	h.mu.Lock()
	a := h.agentLocked(agentID)
	if a.person != "" && a.person != c.Person && !c.Owner {
		_, on := a.holder(0).Where(sf)
		err := &HeldError{Name: a.name, On: on}
		h.gcLocked(agentID, a)
		h.mu.Unlock()
		return Holder{}, err
	}
	if a.person != c.Person {
		clear(a.held)
	}
	a.person, a.name = c.Person, c.Name
	a.held[sf] = c.Conn
	h.gen++
	cur, ws := a.holder(h.gen), slices.Collect(maps.Keys(a.watchers))
	h.mu.Unlock()
	notify(ws)
	return cur, nil
}

// Release ends control on surface sf if connection conn holds it there; the person keeps it
// on their other surfaces, and nobody holds control once they hold it nowhere. Watchers are
// notified of a change before Release returns.
func (h *Handoff) Release(agentID string, sf api.Surface, conn string) {
	h.mu.Lock()
	a := h.agents[agentID]
	if a == nil || conn == "" || a.held[sf] != conn {
		h.mu.Unlock()
		return
	}
	delete(a.held, sf)
	if len(a.held) == 0 {
		a.person, a.name = "", ""
	}
	h.gen++
	ws := slices.Collect(maps.Keys(a.watchers))
	h.gcLocked(agentID, a)
	h.mu.Unlock()
	notify(ws)
}

// Watch calls notify after every change of the agent's holder, without Handoff's lock held
// and on the goroutine that made the change; notify reads Holder (and ignores a Gen older
// than one it applied). It must not block for long. stop ends the watch.
func (h *Handoff) Watch(agentID string, notify func()) (stop func()) {
	w := &handoffWatch{notify: notify}
	h.mu.Lock()
	h.agentLocked(agentID).watchers[w] = struct{}{}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if a := h.agents[agentID]; a != nil {
			delete(a.watchers, w)
			h.gcLocked(agentID, a)
		}
	}
}

func notify(ws []*handoffWatch) {
	for _, w := range ws {
		w.notify()
	}
}
