package store

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// TestSessionInfo: a session records its client (truncated), lists newest first without
// expired ones, and is deleted like any session.
func TestSessionInfo(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		clock := &fakeClock{t: time.Now()}
		s.now = clock.Now
		ctx := t.Context()
		alice := mustUser(t, s, "alice")
		bob := mustUser(t, s, "bob")
		h1, h2, h3 := randHash(t), randHash(t), randHash(t)
		long := strings.Repeat("é", 300) // 600 bytes
		if err := s.CreateSessionInfo(ctx, alice.ID, h1, clock.Now().Add(time.Hour), "Firefox", "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Second)
		if err := s.CreateSessionInfo(ctx, alice.ID, h2, clock.Now().Add(time.Minute), long, "192.0.2.2"); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSessionInfo(ctx, bob.ID, h3, clock.Now().Add(time.Hour), "curl", "192.0.2.3"); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListSessions(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || !bytes.Equal(list[0].Hash, h2) || !bytes.Equal(list[1].Hash, h1) {
			t.Fatalf("alice's sessions = %+v, want h2 then h1", list)
		}
		if list[1].UserAgent != "Firefox" || list[1].Remote != "192.0.2.1" {
			t.Errorf("session 1 = %+v, want Firefox from 192.0.2.1", list[1])
		}
		if ua := list[0].UserAgent; len(ua) > maxUserAgent || !strings.HasPrefix(long, ua) || ua == "" {
			t.Errorf("long user agent stored as %d bytes %q, want a prefix of at most %d bytes", len(ua), ua, maxUserAgent)
		}
		clock.Add(2 * time.Minute) // h2 expires
		if list, err = s.ListSessions(ctx, alice.ID); err != nil || len(list) != 1 || !bytes.Equal(list[0].Hash, h1) {
			t.Errorf("after h2 expired: %+v, %v; want h1 only", list, err)
		}
		if err := s.DeleteSession(ctx, h1); err != nil {
			t.Fatal(err)
		}
		if list, err = s.ListSessions(ctx, alice.ID); err != nil || len(list) != 0 {
			t.Errorf("after logout: %+v, %v; want none", list, err)
		}
		if uid, err := s.GetSession(ctx, h3); err != nil || uid != bob.ID {
			t.Errorf("bob's session: %q, %v", uid, err)
		}
	})
}

func TestNamedTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		u := mustUser(t, s, "alice")
		a := mustAgent(t, s, u.ID, "a1")
		t1, err := s.CreateNamedToken(ctx, a.ID, randHash(t), "claude on the laptop")
		if err != nil {
			t.Fatal(err)
		}
		h := randHash(t)
		if _, err := s.CreateToken(ctx, a.ID, h); err != nil { // the old call: no name
			t.Fatal(err)
		}
		list, err := s.ListNamedTokens(ctx, a.ID)
		if err != nil || len(list) != 2 {
			t.Fatalf("tokens = %+v, %v", list, err)
		}
		if list[0].ID != t1.ID || list[0].Name != "claude on the laptop" || list[1].Name != "" || list[0].Secret != "" {
			t.Errorf("tokens = %+v, want the named one first, then an unnamed one, no secrets", list)
		}
		if got, err := s.GetToken(ctx, h); err != nil || got.AgentID != a.ID {
			t.Errorf("GetToken = %+v, %v", got, err)
		}
	})
}

func TestAuditQuery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		// Later than the migrations' own timestamps: the store's clock never goes back.
		base := time.Now().Add(48 * time.Hour).Truncate(time.Hour)
		clock := &fakeClock{t: base.Add(12 * time.Hour)}
		s.now = clock.Now
		ctx := t.Context()
		add := func(e api.AuditEvent) {
			t.Helper()
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			clock.Add(time.Hour)
		}
		add(api.AuditEvent{Actor: "alice", Action: "login.ok"})                                                    // 12:00
		add(api.AuditEvent{Actor: "alice", Action: "surface.attach", AgentID: "a1", Surface: api.SurfaceTerminal}) // 13:00
		add(api.AuditEvent{Actor: "bob", Action: "surface.attach", AgentID: "a1", Surface: api.SurfaceDesktop})    // 14:00
		add(api.AuditEvent{Actor: "bob", Action: "surface.detach", AgentID: "a2", Surface: api.SurfaceTerminal})   // 15:00
		add(api.AuditEvent{Actor: "", Action: "login.fail"})                                                       // 16:00
		add(api.AuditEvent{Actor: "alice", Action: "surfaces.weird"})                                              // 17:00: not "surface."

		ids := func(q AuditQuery) []int64 {
			t.Helper()
			evs, err := s.ListAuditQuery(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, e := range evs {
				out = append(out, e.ID)
			}
			return out
		}
		at := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
		for _, tt := range []struct {
			name string
			q    AuditQuery
			want []int64
		}{
			{"all", AuditQuery{}, []int64{6, 5, 4, 3, 2, 1}},
			{"actor", AuditQuery{Actor: "alice"}, []int64{6, 2, 1}},
			{"surface", AuditQuery{Surface: api.SurfaceTerminal}, []int64{4, 2}},
			{"action prefix", AuditQuery{Action: "surface."}, []int64{4, 3, 2}},
			{"action exact", AuditQuery{Action: "login.fail"}, []int64{5}},
			{"time window", AuditQuery{Since: at(13), Until: at(15)}, []int64{3, 2}},
			{"agents", AuditQuery{AuditFilter: AuditFilter{AgentIDs: []string{"a1"}}}, []int64{3, 2}},
			{"no agents", AuditQuery{AuditFilter: AuditFilter{AgentIDs: []string{}}}, nil},
			{"page 1", AuditQuery{AuditFilter: AuditFilter{Limit: 2}}, []int64{6, 5}},
			{"page 2", AuditQuery{AuditFilter: AuditFilter{Limit: 2, BeforeID: 5}}, []int64{4, 3}},
			{"combined", AuditQuery{AuditFilter: AuditFilter{AgentIDs: []string{"a1", "a2"}}, Actor: "bob", Surface: api.SurfaceTerminal}, []int64{4}},
		} {
			if got := ids(tt.q); !equalIDs(got, tt.want) {
				t.Errorf("%s: ids %v, want %v", tt.name, got, tt.want)
			}
		}
	})
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
