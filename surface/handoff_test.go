package surface

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/porthole/porthole/api"
)

const (
	desk = api.SurfaceDesktop
	brow = api.SurfaceBrowser
)

func claim(person, conn string, owner bool) Claim {
	return Claim{Person: person, Name: person + "-name", Conn: person + "#" + conn, Owner: owner}
}

// One person drives an agent's screens at a time: the rules of Take, step by step.
func TestHandoffTake(t *testing.T) {
	type step struct {
		sf      api.Surface
		c       Claim
		release bool   // Release(sf, c.Conn) instead of Take
		wantErr string // "" = granted
		want    map[api.Surface]string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nobody holds: anyone takes", []step{
			{sf: desk, c: claim("bob", "1", false), want: map[api.Surface]string{desk: "bob#1"}},
		}},
		{"another person is refused on either surface", []step{
			{sf: desk, c: claim("bob", "1", false), want: map[api.Surface]string{desk: "bob#1"}},
			{sf: brow, c: claim("carol", "2", false), wantErr: "bob-name holds control of this agent's desktop", want: map[api.Surface]string{desk: "bob#1"}},
			{sf: desk, c: claim("carol", "3", false), wantErr: "bob-name holds control of this agent's desktop", want: map[api.Surface]string{desk: "bob#1"}},
		}},
		{"the same person adds the other surface and keeps the first", []step{
			{sf: desk, c: claim("bob", "1", false)},
			{sf: brow, c: claim("bob", "2", false), want: map[api.Surface]string{desk: "bob#1", brow: "bob#2"}},
			{sf: desk, c: claim("bob", "3", false), want: map[api.Surface]string{desk: "bob#3", brow: "bob#2"}},
		}},
		{"the owner takes back everywhere", []step{
			{sf: desk, c: claim("bob", "1", false)},
			{sf: brow, c: claim("bob", "2", false)},
			{sf: brow, c: claim("alice", "9", true), want: map[api.Surface]string{brow: "alice#9"}},
			{sf: desk, c: claim("bob", "1", false), wantErr: "alice-name holds control of this agent's browser", want: map[api.Surface]string{brow: "alice#9"}},
		}},
		{"release on one surface keeps the other", []step{
			{sf: desk, c: claim("bob", "1", false)},
			{sf: brow, c: claim("bob", "2", false)},
			{sf: desk, c: claim("bob", "1", false), release: true, want: map[api.Surface]string{brow: "bob#2"}},
			{sf: desk, c: claim("carol", "3", false), wantErr: "bob-name holds control of this agent's browser"},
			{sf: brow, c: claim("bob", "2", false), release: true, want: map[api.Surface]string{}},
			{sf: desk, c: claim("carol", "3", false), want: map[api.Surface]string{desk: "carol#3"}},
		}},
		{"a connection that does not hold cannot release", []step{
			{sf: desk, c: claim("bob", "1", false)},
			{sf: desk, c: claim("bob", "2", false), release: true, want: map[api.Surface]string{desk: "bob#1"}},
			{sf: brow, c: claim("bob", "1", false), release: true, want: map[api.Surface]string{desk: "bob#1"}},
			{sf: desk, c: claim("carol", "1", false), release: true, want: map[api.Surface]string{desk: "bob#1"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandoff()
			for i, st := range tt.steps {
				var err error
				if st.release {
					h.Release("a1", st.sf, st.c.Conn)
				} else {
					_, err = h.Take("a1", st.sf, st.c)
				}
				switch {
				case st.wantErr == "" && err != nil:
					t.Fatalf("step %d: Take(%s, %q) = %v, want granted", i, st.sf, st.c.Conn, err)
				case st.wantErr != "" && (err == nil || err.Error() != st.wantErr+"; ask them to release it (the agent's owner can take it back)"):
					t.Fatalf("step %d: Take(%s, %q) = %v, want %q", i, st.sf, st.c.Conn, err, st.wantErr)
				}
				var he *HeldError
				if err != nil && !errors.As(err, &he) {
					t.Fatalf("step %d: error %T, want *HeldError", i, err)
				}
				if st.want != nil {
					if got := h.Holder("a1").Held; !maps.Equal(got, st.want) {
						t.Fatalf("step %d: Held = %v, want %v", i, got, st.want)
					}
				}
			}
			if got := h.Holder("a2"); got.Person != "" {
				t.Errorf("another agent's holder = %+v, want nobody", got)
			}
		})
	}
}

// Every watcher of the agent hears of every change, without the Handoff's lock held (it
// reads Holder from the notification), and nobody else's; a stopped watch hears nothing.
func TestHandoffWatch(t *testing.T) {
	h := NewHandoff()
	var seen []Holder
	stop := h.Watch("a1", func() { seen = append(seen, h.Holder("a1")) })
	var other atomic.Int32
	h.Watch("a2", func() { other.Add(1) })

	h.Take("a1", desk, claim("bob", "1", false))
	h.Take("a1", brow, claim("alice", "2", true))
	h.Take("a1", desk, claim("bob", "1", false)) // refused: no change
	h.Release("a1", brow, "alice#2")
	if len(seen) != 3 {
		t.Fatalf("%d notifications, want 3: %+v", len(seen), seen)
	}
	for i, want := range []string{"bob", "alice", ""} {
		if seen[i].Person != want {
			t.Errorf("notification %d: holder %q, want %q", i, seen[i].Person, want)
		}
		if i > 0 && seen[i].Gen <= seen[i-1].Gen {
			t.Errorf("notification %d: Gen %d after %d, want it to grow", i, seen[i].Gen, seen[i-1].Gen)
		}
	}
	if other.Load() != 0 {
		t.Errorf("a2's watcher heard of a1's changes %d times", other.Load())
	}
	stop()
	h.Take("a1", desk, claim("bob", "1", false))
	if len(seen) != 3 {
		t.Errorf("a stopped watch was notified")
	}
}

// The handoff forgets an agent nobody holds and nobody watches: its map does not grow
// with every agent ever shown.
func TestHandoffForgets(t *testing.T) {
	h := NewHandoff()
	for i := range 100 {
		id := fmt.Sprint("agent-", i)
		stop := h.Watch(id, func() {})
		h.Take(id, desk, claim("bob", "1", false))
		h.Take(id, desk, claim("carol", "1", false)) // refused
		h.Release(id, desk, "bob#1")
		stop()
	}
	if n := len(h.agents); n != 0 {
		t.Errorf("%d agents kept after their holds and watches ended, want 0", n)
	}
}

// Takes and releases from many goroutines (two surfaces, several people) leave one
// consistent holder, and a watcher that applies only newer Gens ends on the final state.
func TestHandoffConcurrent(t *testing.T) {
	h := NewHandoff()
	var mu sync.Mutex
	var applied Holder
	h.Watch("a1", func() {
		cur := h.Holder("a1")
		mu.Lock()
		if cur.Gen >= applied.Gen {
			applied = cur
		}
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sf := []api.Surface{desk, brow}[g%2]
			c := claim(fmt.Sprint("p", g%3), fmt.Sprint(g), g == 0)
			for range 500 {
				if _, err := h.Take("a1", sf, c); err == nil {
					h.Release("a1", sf, c.Conn)
				}
			}
		}()
	}
	wg.Wait()
	final := h.Holder("a1")
	if final.Person != "" || len(final.Held) != 0 {
		t.Errorf("after every take was released: holder %+v, want nobody", final)
	}
	mu.Lock()
	defer mu.Unlock()
	if applied.Gen != final.Gen || applied.Person != "" {
		t.Errorf("the watcher applied %+v last, want the final state %+v", applied, final)
	}
}

// A hub's HandoffState places control for its surface and ignores a Holder older than one
// it applied: two notifications may arrive in either order.
func TestHandoffStateApply(t *testing.T) {
	h := NewHandoff()
	var st HandoffState
	h.Take("a1", desk, claim("bob", "1", false))
	first := h.Holder("a1")
	h.Take("a1", brow, claim("alice", "2", true))
	second := h.Holder("a1")

	tests := []struct {
		name string
		sf   api.Surface
		cur  Holder
		ok   bool
		want Placement
	}{
		{"newer, seen by the desktop", desk, second, true, Placement{Person: "alice", Name: "alice-name", Conn: "alice#2"}},
		{"older, arriving late", desk, first, false, Placement{}},
		{"the same again", brow, second, true, Placement{Here: true, Person: "alice", Name: "alice-name", Conn: "alice#2"}},
	}
	for _, tt := range tests {
		got, ok := st.Apply(tt.cur, tt.sf)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: Apply(gen %d, %s) = %+v, %v; want %+v, %v", tt.name, tt.cur.Gen, tt.sf, got, ok, tt.want, tt.ok)
		}
	}
	h.Release("a1", brow, "alice#2")
	if got, ok := st.Apply(h.Holder("a1"), desk); !ok || !got.Nobody {
		t.Errorf("after the release: Apply = %+v, %v; want nobody", got, ok)
	}
}
