//go:build !js

package desktop

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// person is the person's id in a wire id ("alice#3" → "alice").
func person(wireID string) string {
	if i := strings.LastIndexByte(wireID, '#'); i >= 0 {
		return wireID[:i]
	}
	return wireID
}

// holderIs: the person id holds control (through one of their connections).
func holderIs(id string, agent bool) func(*viewState) bool {
	return func(st *viewState) bool { return person(st.control.HolderID) == id && st.control.Agent == agent }
}

// connHolds: exactly c's connection holds control (Control's id is c's Hello id).
func connHolds(c *client) func(*viewState) bool {
	me := c.state().hello.ViewerID
	return func(st *viewState) bool { return me != "" && st.control.HolderID == me && !st.control.Agent }
}

// A watcher's input never reaches the helper, a driver's does once it holds control;
// control passes from hand to hand, and the agent's owner takes it back from anyone.
func TestControl(t *testing.T) {
	e := newEnv(t, Config{})
	alice := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 256, H: 192})
	bob := e.dial("bob", "drive", "")
	wendy := e.dial("wendy", "watch", "")
	owner := e.dial("owner", "drive", "")
	all := []*client{alice, bob, wendy, owner}
	for _, c := range all {
		c.wait("4 viewers listed", func(st *viewState) bool { return len(st.viewers) == 4 })
	}
	if st := wendy.state(); st.mode != ModeWatch || st.hello.Mode != ModeWatch {
		t.Fatalf("watcher's mode: %v / hello %v", st.mode, st.hello.Mode)
	}

	wendy.send(Pointer{X: 1, Y: 1, Buttons: ButtonLeft})
	wendy.send(Key{Down: true, Code: "KeyA"})
	wendy.send(SetClipboard{Text: "steal"})
	wendy.wait("Error{WatchOnly}", wendy.hasErr(ErrCodeWatchOnly, "dropped"))
	alice.send(Pointer{X: 1, Y: 1})
	alice.wait("Error{NotHolder}", alice.hasErr(ErrCodeNotHolder, "take control first"))
	f.none(t, 200*time.Millisecond)

	wendy.send(TakeControl{})
	wendy.wait("Error{WatchOnly} for TakeControl", wendy.hasErr(ErrCodeWatchOnly, "only drivers"))
	alice.send(TakeControl{})
	for _, c := range all {
		c.wait("alice holds control", holderIs("alice", false))
	}
	alice.send(Pointer{X: 1000, Y: 50, Buttons: ButtonLeft})
	if m := f.next(t); m != (Pointer{X: 255, Y: 50, Buttons: ButtonLeft}) {
		t.Fatalf("helper got %+v, want the pointer clamped to 255,50", m)
	}
	alice.send(Wheel{X: 10, Y: 5000, DY: 3})
	if m := f.next(t); m != (Wheel{X: 10, Y: 191, DY: 3}) {
		t.Fatalf("helper got %+v, want the wheel clamped", m)
	}
	alice.send(Key{Down: true, Code: "KeyQ"})
	if m := f.next(t); m != (Key{Down: true, Code: "KeyQ"}) {
		t.Fatalf("helper got %+v, want the key", m)
	}
	alice.send(SetClipboard{Text: "from alice"})
	if m := f.next(t); m != (SetClipboard{Text: "from alice"}) {
		t.Fatalf("helper got %+v, want the clipboard", m)
	}
	alice.send(ResizeRequest{W: 10, H: 60000})
	if m := f.next(t); m != (ResizeRequest{W: MinDisplay, H: MaxDisplayH}) {
		t.Fatalf("helper got %+v, want the size clamped", m)
	}
	wendy.send(Pointer{X: 2, Y: 2})
	bob.send(Key{Down: true, Code: "KeyB"})
	f.none(t, 200*time.Millisecond)

	// Bob cannot take control from alice; the owner can.
	bob.send(TakeControl{})
	bob.wait("Error{NotHolder} naming alice", bob.hasErr(ErrCodeNotHolder, "alice holds control"))
	owner.send(TakeControl{})
	for _, c := range all {
		c.wait("the owner took control back", holderIs("owner", false))
	}
	alice.send(Pointer{X: 3, Y: 3})
	f.none(t, 200*time.Millisecond)
	owner.send(Pointer{X: 4, Y: 4})
	if m := f.next(t); m != (Pointer{X: 4, Y: 4}) {
		t.Fatalf("helper got %+v, want the owner's pointer", m)
	}

	// Release, then hand-off to bob; bob leaving releases control.
	bob.send(ReleaseControl{}) // not the holder: nothing happens
	owner.send(ReleaseControl{})
	for _, c := range all {
		c.wait("nobody holds control", holderIs("", false))
	}
	bob.send(TakeControl{})
	alice.wait("bob holds control", holderIs("bob", false))
	bob.close()
	for _, c := range []*client{alice, wendy, owner} {
		c.wait("bob's leaving released control", holderIs("", false))
		c.wait("3 viewers listed", func(st *viewState) bool { return len(st.viewers) == 3 })
	}
	want := []ViewerInfo{{ID: "alice", Name: "alice", Mode: ModeDrive}, {ID: "wendy", Name: "wendy", Mode: ModeWatch}, {ID: "owner", Name: "owner", Mode: ModeDrive}}
	got := alice.state().viewers
	seen := map[string]bool{}
	for i := range got {
		if !strings.Contains(got[i].ID, "#") || seen[got[i].ID] {
			t.Fatalf("viewer id %q is not a unique per-connection id: %+v", got[i].ID, got)
		}
		seen[got[i].ID] = true
		got[i].ID = person(got[i].ID)
	}
	slices.SortFunc(got, func(a, b ViewerInfo) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(want, func(a, b ViewerInfo) int { return strings.Compare(a.ID, b.ID) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("viewers = %+v, want %+v", got, want)
	}

	// The display's clipboard goes to drivers only.
	f.send(Clipboard{Text: "secret"})
	alice.wait("the clipboard", func(st *viewState) bool { return st.clipboard == "secret" })
	owner.wait("the clipboard", func(st *viewState) bool { return st.clipboard == "secret" })
	f.send(CursorPos{X: 7, Y: 8})
	wendy.wait("the cursor", func(st *viewState) bool { return st.cursor == CursorPos{X: 7, Y: 8} })
	if st := wendy.state(); st.clipboard != "" {
		t.Fatalf("a watcher got the clipboard %q", st.clipboard)
	}
}

// An admin takes control back like the owner; an agent token never does.
func TestControlTakeBackAdmin(t *testing.T) {
	e := newEnv(t, Config{})
	alice := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 64, H: 64})
	tok := e.dial("token:t1", "drive", "&token=t1")
	admin := e.dial("root", "drive", "&admin=1")
	alice.send(TakeControl{})
	tok.wait("alice holds control", holderIs("alice", false))
	tok.send(TakeControl{})
	tok.wait("Error{NotHolder}", tok.hasErr(ErrCodeNotHolder, "alice holds control"))
	admin.send(TakeControl{})
	alice.wait("the admin took control", holderIs("root", false))
}

// One person in two tabs is two viewers: control belongs to the tab that took it, so Hello,
// Control and Viewers carry per-connection ids, and the other tab's input is dropped until
// it takes over (which the same person may do without the holder releasing).
func TestControlPerConnection(t *testing.T) {
	e := newEnv(t, Config{})
	desk := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 64, H: 64})
	phone := e.dial("alice", "drive", "")
	for _, c := range []*client{desk, phone} {
		c.wait("2 viewers listed", func(st *viewState) bool { return len(st.viewers) == 2 })
	}
	d, p := desk.state(), phone.state()
	if d.hello.ViewerID == p.hello.ViewerID || person(d.hello.ViewerID) != "alice" || person(p.hello.ViewerID) != "alice" {
		t.Fatalf("two tabs of alice have Hello ids %q and %q, want distinct alice#<conn>", d.hello.ViewerID, p.hello.ViewerID)
	}
	if d.hello.ViewerName != "alice" || p.viewers[0].Name != "alice" || p.viewers[1].Name != "alice" {
		t.Fatalf("names: hello %q, viewers %+v; want the person's name", d.hello.ViewerName, p.viewers)
	}
	ids := []string{p.viewers[0].ID, p.viewers[1].ID}
	slices.Sort(ids)
	want := []string{d.hello.ViewerID, p.hello.ViewerID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("Viewers ids %v, want the Hello ids %v", ids, want)
	}

	desk.send(TakeControl{})
	phone.wait("the desk tab holds control", connHolds(desk))
	if st := phone.state(); connHolds(phone)(&st) {
		t.Fatal("the phone tab is told it holds control")
	}
	phone.send(Pointer{X: 1, Y: 1})
	phone.wait("Error{NotHolder} for the other tab", phone.hasErr(ErrCodeNotHolder, "take control first"))
	f.none(t, 200*time.Millisecond)

	phone.send(TakeControl{}) // the same person takes over from another tab
	desk.wait("the phone tab holds control", connHolds(phone))
	phone.send(Pointer{X: 2, Y: 2})
	if m := f.next(t); m != (Pointer{X: 2, Y: 2}) {
		t.Fatalf("helper got %+v, want the phone's pointer", m)
	}
	desk.send(Pointer{X: 3, Y: 3})
	f.none(t, 200*time.Millisecond)
}
