package surface

import (
	"sync"
	"time"
)

// Hub is what a surface's gateway half keeps for one agent while anyone uses it (a display's
// model and its viewers, a browser's live view).
type Hub interface {
	// Run runs the hub until it ends; Hubs calls it on a goroutine of its own.
	Run()
	// End asks the hub to end with cause (it cancels the hub's context); Run returns soon after.
	End(cause error)
	// Ending reports whether the hub ended or is ending: a new use starts a new hub.
	Ending() bool
}

// hubPtr is a Hub Hubs can tell apart (a pointer).
type hubPtr interface {
	comparable
	Hub
}

// Hubs keeps a surface's hubs, one per agent. The first use of an agent's hub starts it,
// later uses share it, and the last one leaving starts a grace period after which the hub
// ends idle. An agent's stop (End) and the gateway's shutdown (Close) end hubs at once. A hub
// that ended is forgotten, so the next use starts a new one. Hubs owns the hubs' Run
// goroutines; Close waits for them.
type Hubs[H hubPtr] struct {
	grace func() time.Duration // read at each last release (tests shorten it)
	idle  error                // the cause an idle hub ends with

	mu     sync.Mutex
	closed bool
	slots  map[string]*hubSlot[H]
	wg     sync.WaitGroup
}

type hubSlot[H hubPtr] struct {
	agent string
	hub   H
	users int
	gen   uint64 // invalidates a grace timer when a new use arrives
	timer *time.Timer
}

// HubUse is one use of a hub, from Acquire to Release.
type HubUse[H hubPtr] struct {
	Hub  H
	hubs *Hubs[H]
	slot *hubSlot[H]
	once sync.Once
}

// NewHubs returns hubs that end idle, with cause idle, grace() after their last use.
func NewHubs[H hubPtr](grace func() time.Duration, idle error) *Hubs[H] {
	return &Hubs[H]{grace: grace, idle: idle, slots: map[string]*hubSlot[H]{}}
}

// Acquire returns a use of the agent's hub, starting a new one made by start when the agent
// has none or only one that is ending. It returns false once Close was called.
func (r *Hubs[H]) Acquire(agentID string, start func() H) (*HubUse[H], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false
	}
	sl := r.slots[agentID]
	if sl == nil || sl.hub.Ending() {
		sl = &hubSlot[H]{agent: agentID, hub: start()}
		r.slots[agentID] = sl
		r.wg.Add(1)
		go func() { // owner: Hubs (wg); exits when the hub ends (its stream, idle, End, Close)
			defer r.wg.Done()
			sl.hub.Run()
			r.forget(sl)
		}()
	}
	sl.users++
	sl.gen++
	if sl.timer != nil {
		sl.timer.Stop()
		sl.timer = nil
	}
	return &HubUse[H]{Hub: sl.hub, hubs: r, slot: sl}, true
}

// Release ends the use; the hub's last use starts its grace period. A second call does nothing.
func (u *HubUse[H]) Release() {
	u.once.Do(func() {
		r, sl := u.hubs, u.slot
		r.mu.Lock()
		defer r.mu.Unlock()
		if sl.users--; sl.users > 0 {
			return
		}
		gen := sl.gen
		sl.timer = time.AfterFunc(r.grace(), func() { // owner: the slot; stopped by a new use
			r.mu.Lock()
			idle := sl.users == 0 && sl.gen == gen
			if idle && r.slots[sl.agent] == sl {
				delete(r.slots, sl.agent)
			}
			r.mu.Unlock()
			if idle {
				sl.hub.End(r.idle)
			}
		})
	})
}

// Len is how many agents have a hub.
func (r *Hubs[H]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slots)
}

// Get returns the agent's current hub, if it has one.
func (r *Hubs[H]) Get(agentID string) (H, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl := r.slots[agentID]
	if sl == nil {
		var zero H
		return zero, false
	}
	return sl.hub, true
}

// End ends the agent's hub with cause (the agent was stopped, deleted or changed).
func (r *Hubs[H]) End(agentID string, cause error) {
	r.mu.Lock()
	sl := r.slots[agentID]
	delete(r.slots, agentID)
	r.mu.Unlock()
	if sl != nil {
		sl.hub.End(cause)
	}
}

// Close ends every hub with cause, refuses new uses, and waits for the hubs' Run to return.
func (r *Hubs[H]) Close(cause error) {
	r.mu.Lock()
	r.closed = true
	slots := make([]*hubSlot[H], 0, len(r.slots))
	for _, sl := range r.slots {
		slots = append(slots, sl)
	}
	r.mu.Unlock()
	for _, sl := range slots {
		sl.hub.End(cause)
	}
	r.wg.Wait()
}

// forget unmaps a hub whose Run returned (unless a new hub took its place already).
func (r *Hubs[H]) forget(sl *hubSlot[H]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots[sl.agent] == sl {
		delete(r.slots, sl.agent)
	}
	if sl.timer != nil {
		sl.timer.Stop()
	}
}
