package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver for the test schema setup
	"go.uber.org/goleak"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testDB is one fresh, empty database: a SQLite file in a temporary directory,
// or a PostgreSQL schema of its own that is dropped when the test ends.
type testDB struct {
	kind    string
	dsn     string
	dataDir string
}

// newTestDB creates a fresh database of the given kind.
func newTestDB(t testing.TB, kind string) testDB {
	t.Helper()
	if kind == KindSQLite {
		return testDB{kind: kind, dataDir: filepath.Join(t.TempDir(), "data")}
	}
	base := testenv.Getenv(t, "PORTHOLE_TEST_PG")
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", redactDSN(base), err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "porthole_test_" + newID()
	if _, err := admin.ExecContext(t.Context(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse PORTHOLE_TEST_PG: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return testDB{kind: kind, dsn: u.String()}
}

// open opens a Store on the database; it is closed when the test ends.
func (d testDB) open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), d.dsn, d.dataDir)
	if err != nil {
		t.Fatalf("Open(%q): %v", redactDSN(d.dsn), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if s.Kind() != d.kind {
		t.Fatalf("Kind() = %q, want %q", s.Kind(), d.kind)
	}
	return s
}

// forEachBackend runs fn as a subtest against a fresh SQLite and a fresh PostgreSQL database.
func forEachBackend(t *testing.T, fn func(t *testing.T, db testDB)) {
	for _, kind := range []string{KindSQLite, KindPostgres} {
		t.Run(kind, func(t *testing.T) { fn(t, newTestDB(t, kind)) })
	}
}

// fakeClock is a settable clock for session expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func randHash(t testing.TB) []byte {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b[:])
	return h[:]
}

func mustUser(t testing.TB, s *Store, name string) api.User {
	t.Helper()
	u, err := s.CreateUser(context.Background(), User{
		User:         api.User{Username: name, Permissions: api.DefaultPermissions},
		PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA",
	})
	if err != nil {
		t.Fatalf("CreateUser(%q): %v", name, err)
	}
	return u
}

func mustAgent(t testing.TB, s *Store, ownerID, name string) api.Agent {
	t.Helper()
	a, err := s.CreateAgent(context.Background(), api.Agent{
		Name:    name,
		OwnerID: ownerID,
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone},
		Share:   api.LevelWatch,
	})
	if err != nil {
		t.Fatalf("CreateAgent(%q): %v", name, err)
	}
	return a
}

func TestUsers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()

		if n, err := s.CountUsers(ctx); err != nil || n != 0 {
			t.Fatalf("CountUsers() on empty store = %d, %v, want 0, nil", n, err)
		}
		perms := api.Permissions{Terminal: api.LevelDrive, Desktop: api.LevelWatch, Browser: api.LevelNone}
		before := time.Now().Add(-time.Second)
		alice, err := s.CreateUser(ctx, User{User: api.User{Username: "alice", Admin: true, Permissions: perms}, PasswordHash: "hash-a"})
		if err != nil {
			t.Fatalf("CreateUser(alice): %v", err)
		}
		if len(alice.ID) != 26 || strings.ToLower(alice.ID) != alice.ID {
			t.Errorf("CreateUser ID = %q, want 26 lower-case base32 characters", alice.ID)
		}
		if alice.CreatedAt.Before(before) || alice.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("CreateUser CreatedAt = %v, want about now", alice.CreatedAt)
		}
		bob := mustUser(t, s, "bob")
		if bob.ID == alice.ID {
			t.Fatalf("two users got the same ID %q", bob.ID)
		}

		got, err := s.GetUser(ctx, alice.ID)
		if err != nil {
			t.Fatalf("GetUser(alice): %v", err)
		}
		want := User{User: alice, PasswordHash: "hash-a"}
		if !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("GetUser CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
		}
		got.CreatedAt = want.CreatedAt
		if got != want {
			t.Errorf("GetUser(alice) = %+v, want %+v", got, want)
		}
		byName, err := s.GetUserByName(ctx, "alice")
		if err != nil || byName.ID != alice.ID || byName.PasswordHash != "hash-a" {
			t.Errorf("GetUserByName(alice) = %+v, %v, want id %s with its hash", byName, err, alice.ID)
		}

		list, err := s.ListUsers(ctx)
		if err != nil {
			t.Fatalf("ListUsers: %v", err)
		}
		if len(list) != 2 || list[0].Username != "alice" || list[1].Username != "bob" {
			t.Errorf("ListUsers() = %+v, want alice then bob", list)
		}
		if n, err := s.CountUsers(ctx); err != nil || n != 2 {
			t.Errorf("CountUsers() = %d, %v, want 2, nil", n, err)
		}

		newHash, no, drive := "hash-a2", false, api.Permissions{Terminal: api.LevelWatch, Desktop: api.LevelWatch, Browser: api.LevelWatch}
		up, err := s.UpdateUser(ctx, alice.ID, UserUpdate{PasswordHash: &newHash, Admin: &no, Permissions: &drive})
		if err != nil {
			t.Fatalf("UpdateUser: %v", err)
		}
		if up.Admin || up.Permissions != drive || up.Username != "alice" {
			t.Errorf("UpdateUser() = %+v, want admin=false permissions=%+v", up, drive)
		}
		if got, _ := s.GetUser(ctx, alice.ID); got.PasswordHash != newHash || got.Admin || got.Permissions != drive {
			t.Errorf("after UpdateUser GetUser = %+v, want hash %q, admin false, %+v", got, newHash, drive)
		}
		if up, err := s.UpdateUser(ctx, alice.ID, UserUpdate{}); err != nil || up.ID != alice.ID || up.Admin {
			t.Errorf("UpdateUser(no fields) = %+v, %v, want the unchanged user", up, err)
		}
		if got, _ := s.GetUser(ctx, bob.ID); got.PasswordHash == newHash {
			t.Errorf("UpdateUser(alice) changed bob's hash")
		}

		if err := s.DeleteUser(ctx, bob.ID); err != nil {
			t.Fatalf("DeleteUser(bob): %v", err)
		}
		if n, _ := s.CountUsers(ctx); n != 1 {
			t.Errorf("CountUsers() after delete = %d, want 1", n)
		}

		yes := true
		errCases := []struct {
			name string
			call func() error
			want error
		}{
			{"CreateUser duplicate name", func() error { _, err := s.CreateUser(ctx, User{User: api.User{Username: "alice"}}); return err }, ErrConflict},
			{"GetUser deleted", func() error { _, err := s.GetUser(ctx, bob.ID); return err }, ErrNotFound},
			{"GetUser unknown", func() error { _, err := s.GetUser(ctx, newID()); return err }, ErrNotFound},
			{"GetUserByName unknown", func() error { _, err := s.GetUserByName(ctx, "bob"); return err }, ErrNotFound},
			{"UpdateUser unknown", func() error { _, err := s.UpdateUser(ctx, bob.ID, UserUpdate{Admin: &yes}); return err }, ErrNotFound},
			{"UpdateUser unknown, no fields", func() error { _, err := s.UpdateUser(ctx, bob.ID, UserUpdate{}); return err }, ErrNotFound},
			{"DeleteUser again", func() error { return s.DeleteUser(ctx, bob.ID) }, ErrNotFound},
			{"CreateUser name freed by delete", func() error { mustUser(t, s, "bob"); return nil }, nil},
		}
		for _, c := range errCases {
			if err := c.call(); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			}
		}
	})
}

func TestSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		clock := &fakeClock{t: time.Now()}
		s.now = clock.Now
		ctx := t.Context()
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")

		a1, a2, a3, b1, short, past := randHash(t), randHash(t), randHash(t), randHash(t), randHash(t), randHash(t)
		for _, c := range []struct {
			user string
			hash []byte
			ttl  time.Duration
		}{
			{alice.ID, a1, time.Hour}, {alice.ID, a2, time.Hour}, {alice.ID, a3, time.Hour},
			{bob.ID, b1, time.Hour}, {bob.ID, short, time.Minute}, {bob.ID, past, -time.Second},
		} {
			if err := s.CreateSession(ctx, c.user, c.hash, clock.Now().Add(c.ttl)); err != nil {
				t.Fatalf("CreateSession(%s, ttl %v): %v", c.user, c.ttl, err)
			}
		}
		if err := s.CreateSession(ctx, newID(), randHash(t), clock.Now().Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Errorf("CreateSession(unknown user) = %v, want ErrNotFound", err)
		}
		if err := s.CreateSession(ctx, alice.ID, a1, clock.Now().Add(time.Hour)); !errors.Is(err, ErrConflict) {
			t.Errorf("CreateSession(same hash twice) = %v, want ErrConflict", err)
		}

		check := func(step string, want map[string]string) {
			t.Helper()
			for name, h := range map[string][]byte{"a1": a1, "a2": a2, "a3": a3, "b1": b1, "short": short, "past": past} {
				uid, err := s.GetSession(ctx, h)
				switch w, ok := want[name]; {
				case ok && (err != nil || uid != w):
					t.Errorf("%s: GetSession(%s) = %q, %v, want %q", step, name, uid, err, w)
				case !ok && !errors.Is(err, ErrNotFound):
					t.Errorf("%s: GetSession(%s) = %q, %v, want ErrNotFound", step, name, uid, err)
				}
			}
		}
		check("created", map[string]string{"a1": alice.ID, "a2": alice.ID, "a3": alice.ID, "b1": bob.ID, "short": bob.ID})
		if _, err := s.GetSession(ctx, randHash(t)); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSession(unknown) = %v, want ErrNotFound", err)
		}
		if _, err := s.GetSession(ctx, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSession(nil) = %v, want ErrNotFound", err)
		}

		clock.Add(2 * time.Minute)
		check("2 minutes later", map[string]string{"a1": alice.ID, "a2": alice.ID, "a3": alice.ID, "b1": bob.ID})

		// A password change: every other session of alice goes, a2 stays; bob is untouched.
		if err := s.DeleteUserSessions(ctx, alice.ID, a2); err != nil {
			t.Fatalf("DeleteUserSessions(alice, keep a2): %v", err)
		}
		check("alice kept a2", map[string]string{"a2": alice.ID, "b1": bob.ID})

		if err := s.DeleteSession(ctx, a2); err != nil {
			t.Fatalf("DeleteSession(a2): %v", err)
		}
		if err := s.DeleteSession(ctx, a2); err != nil {
			t.Errorf("DeleteSession(a2) twice = %v, want nil (logout is idempotent)", err)
		}
		check("a2 logged out", map[string]string{"b1": bob.ID})

		if err := s.DeleteUserSessions(ctx, bob.ID, nil); err != nil {
			t.Fatalf("DeleteUserSessions(bob, nil): %v", err)
		}
		check("bob's sessions deleted", map[string]string{})

		// Expired rows are purged by the next CreateSession.
		if err := s.CreateSession(ctx, alice.ID, randHash(t), clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		var rows int
		if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`).Scan(&rows); err != nil || rows != 1 {
			t.Errorf("sessions rows after purge = %d, %v, want 1", rows, err)
		}
		clock.Add(2 * time.Hour)
		check("2 hours later", map[string]string{})
	})
}

func TestAgents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")

		backend := api.Backend{Type: api.BackendContainer, Network: api.NetworkFull, Image: "debian:12",
			Limits: api.Limits{Pids: 256, MemoryMiB: 2048, CPUPct: 150}}
		a, err := s.CreateAgent(ctx, api.Agent{ID: "ignored", Name: "builder", OwnerID: alice.ID, Owner: "ignored",
			Backend: backend, Share: api.LevelDrive})
		if err != nil {
			t.Fatalf("CreateAgent: %v", err)
		}
		if a.ID == "ignored" || len(a.ID) != 26 || a.Owner != "alice" || a.OwnerID != alice.ID || a.CreatedAt.IsZero() {
			t.Errorf("CreateAgent() = %+v, want a fresh ID, owner alice, a creation time", a)
		}
		if a.Backend != backend || a.Share != api.LevelDrive || a.Name != "builder" {
			t.Errorf("CreateAgent() = %+v, want backend %+v share drive", a, backend)
		}
		b := mustAgent(t, s, bob.ID, "watcher")
		c := mustAgent(t, s, alice.ID, "builder") // names need not be unique

		got, err := s.GetAgent(ctx, a.ID)
		if err != nil {
			t.Fatalf("GetAgent: %v", err)
		}
		if !got.CreatedAt.Equal(a.CreatedAt) {
			t.Errorf("GetAgent CreatedAt = %v, want %v", got.CreatedAt, a.CreatedAt)
		}
		got.CreatedAt = a.CreatedAt
		if got != a {
			t.Errorf("GetAgent() = %+v, want %+v", got, a)
		}

		list, err := s.ListAgents(ctx)
		if err != nil {
			t.Fatalf("ListAgents: %v", err)
		}
		var ids []string
		for _, x := range list {
			ids = append(ids, x.ID)
		}
		if want := []string{a.ID, b.ID, c.ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("ListAgents() ids = %v, want oldest first %v", ids, want)
		}
		if list[1].Owner != "bob" {
			t.Errorf("ListAgents()[1].Owner = %q, want bob", list[1].Owner)
		}

		name, share := "renamed", api.LevelNone
		host := api.Backend{Type: api.BackendHost, Network: api.NetworkFull}
		for _, u := range []struct {
			name   string
			update AgentUpdate
			check  func(api.Agent) bool
		}{
			{"name", AgentUpdate{Name: &name}, func(x api.Agent) bool { return x.Name == name && x.Backend == backend && x.Share == api.LevelDrive }},
			{"share", AgentUpdate{Share: &share}, func(x api.Agent) bool { return x.Name == name && x.Share == api.LevelNone }},
			{"backend", AgentUpdate{Backend: &host}, func(x api.Agent) bool { return x.Backend == host && x.Share == api.LevelNone }},
			{"nothing", AgentUpdate{}, func(x api.Agent) bool { return x.Backend == host && x.Name == name }},
		} {
			up, err := s.UpdateAgent(ctx, a.ID, u.update)
			if err != nil || !u.check(up) || up.Owner != "alice" {
				t.Errorf("UpdateAgent(%s) = %+v, %v", u.name, up, err)
			}
			if got, err := s.GetAgent(ctx, a.ID); err != nil || !u.check(got) {
				t.Errorf("GetAgent after UpdateAgent(%s) = %+v, %v", u.name, got, err)
			}
		}
		if got, _ := s.GetAgent(ctx, c.ID); got.Name != "builder" {
			t.Errorf("UpdateAgent(a) renamed c to %q", got.Name)
		}

		if err := s.DeleteAgent(ctx, b.ID); err != nil {
			t.Fatalf("DeleteAgent: %v", err)
		}
		if list, _ := s.ListAgents(ctx); len(list) != 2 {
			t.Errorf("ListAgents() after delete has %d agents, want 2", len(list))
		}
		errCases := []struct {
			name string
			call func() error
		}{
			{"CreateAgent unknown owner", func() error {
				_, err := s.CreateAgent(ctx, api.Agent{Name: "x", OwnerID: newID(), Backend: backend, Share: api.LevelNone})
				return err
			}},
			{"GetAgent deleted", func() error { _, err := s.GetAgent(ctx, b.ID); return err }},
			{"UpdateAgent deleted", func() error { _, err := s.UpdateAgent(ctx, b.ID, AgentUpdate{Name: &name}); return err }},
			{"UpdateAgent deleted, no fields", func() error { _, err := s.UpdateAgent(ctx, b.ID, AgentUpdate{}); return err }},
			{"DeleteAgent again", func() error { return s.DeleteAgent(ctx, b.ID) }},
		}
		for _, c := range errCases {
			if err := c.call(); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: error %v, want ErrNotFound", c.name, err)
			}
		}
	})
}

func TestTokens(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice := mustUser(t, s, "alice")
		a, b := mustAgent(t, s, alice.ID, "a"), mustAgent(t, s, alice.ID, "b")

		h1, h2, hb := randHash(t), randHash(t), randHash(t)
		t1, err := s.CreateToken(ctx, a.ID, h1)
		if err != nil {
			t.Fatalf("CreateToken: %v", err)
		}
		if t1.AgentID != a.ID || len(t1.ID) != 26 || t1.Secret != "" || t1.CreatedAt.IsZero() {
			t.Errorf("CreateToken() = %+v, want agent %s, an ID, no secret", t1, a.ID)
		}
		t2, err := s.CreateToken(ctx, a.ID, h2)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := s.CreateToken(ctx, b.ID, hb)
		if err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			name string
			hash []byte
			want api.Token
		}{{"t1", h1, t1}, {"t2", h2, t2}, {"tb", hb, tb}} {
			got, err := s.GetToken(ctx, c.hash)
			if err != nil || got.ID != c.want.ID || got.AgentID != c.want.AgentID || !got.CreatedAt.Equal(c.want.CreatedAt) {
				t.Errorf("GetToken(%s) = %+v, %v, want %+v", c.name, got, err, c.want)
			}
		}
		list, err := s.ListTokens(ctx, a.ID)
		if err != nil || len(list) != 2 || list[0].ID != t1.ID || list[1].ID != t2.ID {
			t.Errorf("ListTokens(a) = %+v, %v, want t1, t2", list, err)
		}
		if list, err := s.ListTokens(ctx, newID()); err != nil || len(list) != 0 {
			t.Errorf("ListTokens(unknown) = %+v, %v, want empty", list, err)
		}

		// Revoking needs the right agent.
		if err := s.DeleteToken(ctx, b.ID, t1.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteToken(agent b, token of a) = %v, want ErrNotFound", err)
		}
		if err := s.DeleteToken(ctx, a.ID, t1.ID); err != nil {
			t.Fatalf("DeleteToken: %v", err)
		}
		if _, err := s.GetToken(ctx, h1); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetToken(revoked) = %v, want ErrNotFound", err)
		}
		if got, err := s.GetToken(ctx, h2); err != nil || got.ID != t2.ID {
			t.Errorf("GetToken(t2) after revoking t1 = %+v, %v, want t2", got, err)
		}
		for _, c := range []struct {
			name string
			call func() error
			want error
		}{
			{"DeleteToken again", func() error { return s.DeleteToken(ctx, a.ID, t1.ID) }, ErrNotFound},
			{"GetToken unknown", func() error { _, err := s.GetToken(ctx, randHash(t)); return err }, ErrNotFound},
			{"CreateToken unknown agent", func() error { _, err := s.CreateToken(ctx, newID(), randHash(t)); return err }, ErrNotFound},
			{"CreateToken hash in use", func() error { _, err := s.CreateToken(ctx, b.ID, h2); return err }, ErrConflict},
		} {
			if err := c.call(); !errors.Is(err, c.want) {
				t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			}
		}
	})
}

func TestCascade(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		a1, a2, b1 := mustAgent(t, s, alice.ID, "a1"), mustAgent(t, s, alice.ID, "a2"), mustAgent(t, s, bob.ID, "b1")
		sa, sb := randHash(t), randHash(t)
		exp := time.Now().Add(time.Hour)
		if err := s.CreateSession(ctx, alice.ID, sa, exp); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, bob.ID, sb, exp); err != nil {
			t.Fatal(err)
		}
		ta1, ta2, tb1 := randHash(t), randHash(t), randHash(t)
		for _, c := range []struct {
			agent string
			hash  []byte
		}{{a1.ID, ta1}, {a2.ID, ta2}, {b1.ID, tb1}} {
			if _, err := s.CreateToken(ctx, c.agent, c.hash); err != nil {
				t.Fatal(err)
			}
		}
		for _, ag := range []api.Agent{a1, a2, b1} {
			if err := s.AppendAudit(ctx, api.AuditEvent{Actor: ag.Owner, Action: "surface.attach", AgentID: ag.ID}); err != nil {
				t.Fatal(err)
			}
		}

		// Deleting an agent takes its tokens, nothing else.
		if err := s.DeleteAgent(ctx, a1.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetToken(ctx, ta1); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetToken(token of deleted agent) = %v, want ErrNotFound", err)
		}
		if _, err := s.GetToken(ctx, ta2); err != nil {
			t.Errorf("GetToken(token of a2) after deleting a1 = %v, want it kept", err)
		}

		// Deleting a user takes their sessions, agents and those agents' tokens.
		if err := s.DeleteUser(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		gone := []struct {
			name string
			call func() error
		}{
			{"alice's session", func() error { _, err := s.GetSession(ctx, sa); return err }},
			{"alice's agent a2", func() error { _, err := s.GetAgent(ctx, a2.ID); return err }},
			{"token of a2", func() error { _, err := s.GetToken(ctx, ta2); return err }},
		}
		for _, g := range gone {
			if err := g.call(); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s after DeleteUser(alice): %v, want ErrNotFound", g.name, err)
			}
		}
		kept := []struct {
			name string
			call func() error
		}{
			{"bob's session", func() error { _, err := s.GetSession(ctx, sb); return err }},
			{"bob's agent", func() error { _, err := s.GetAgent(ctx, b1.ID); return err }},
			{"bob's token", func() error { _, err := s.GetToken(ctx, tb1); return err }},
		}
		for _, k := range kept {
			if err := k.call(); err != nil {
				t.Errorf("%s after DeleteUser(alice): %v, want kept", k.name, err)
			}
		}
		if list, _ := s.ListAgents(ctx); len(list) != 1 || list[0].ID != b1.ID {
			t.Errorf("ListAgents() after DeleteUser(alice) = %+v, want only b1", list)
		}
		ev, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil || len(ev) != 3 {
			t.Errorf("ListAudit() after deletes = %d events, %v, want all 3 kept", len(ev), err)
		}
		if ev, _ := s.ListAudit(ctx, AuditFilter{AgentIDs: []string{a1.ID}}); len(ev) != 1 || ev[0].Actor != "alice" {
			t.Errorf("ListAudit(a1) after deletes = %+v, want alice's attach", ev)
		}
	})
}

func TestAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()

		fixed := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
		first := api.AuditEvent{Time: fixed, Actor: "alice", Action: "surface.attach", AgentID: "agent-a",
			Surface: api.SurfaceTerminal, Mode: api.LevelDrive, Detail: "start", Remote: "192.0.2.1"}
		if err := s.AppendAudit(ctx, first); err != nil {
			t.Fatal(err)
		}
		before := time.Now().Add(-time.Second)
		agents := []string{"agent-a", "agent-b", ""}
		var want []string // actions, newest first at the end
		for i := range 29 {
			e := api.AuditEvent{Actor: "bob", Action: fmt.Sprintf("act.%02d", i), AgentID: agents[i%3]}
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Fatalf("AppendAudit(%d): %v", i, err)
			}
			want = append(want, e.Action)
		}

		all, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil || len(all) != 30 {
			t.Fatalf("ListAudit({}) = %d events, %v, want 30", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID >= all[i-1].ID {
				t.Fatalf("ListAudit ids not newest first: %d then %d", all[i-1].ID, all[i].ID)
			}
		}
		if all[0].Action != want[len(want)-1] || all[0].Time.Before(before) {
			t.Errorf("ListAudit()[0] = %+v, want %s at about now", all[0], want[len(want)-1])
		}
		oldest := all[len(all)-1]
		if !oldest.Time.Equal(fixed.Truncate(time.Microsecond)) {
			t.Errorf("stored time = %v, want %v (microseconds)", oldest.Time, fixed.Truncate(time.Microsecond))
		}
		oldest.Time, first.Time, first.ID = time.Time{}, time.Time{}, oldest.ID
		if oldest != first {
			t.Errorf("stored event = %+v, want %+v", oldest, first)
		}

		count := func(f AuditFilter) int {
			ev, err := s.ListAudit(ctx, f)
			if err != nil {
				t.Fatalf("ListAudit(%+v): %v", f, err)
			}
			return len(ev)
		}
		for _, c := range []struct {
			name string
			f    AuditFilter
			want int
		}{
			{"all", AuditFilter{}, 30},
			{"agent-a", AuditFilter{AgentIDs: []string{"agent-a"}}, 11},
			{"agent-a and agent-b", AuditFilter{AgentIDs: []string{"agent-a", "agent-b"}}, 21},
			{"unknown agent", AuditFilter{AgentIDs: []string{"nope"}}, 0},
			{"empty non-nil agent list", AuditFilter{AgentIDs: []string{}}, 0},
			{"limit 7", AuditFilter{Limit: 7}, 7},
			{"negative limit means default", AuditFilter{Limit: -1}, 30},
			{"before the 5th newest", AuditFilter{BeforeID: all[4].ID}, 25},
			{"agent-b before the 5th newest, limit 3", AuditFilter{AgentIDs: []string{"agent-b"}, BeforeID: all[4].ID, Limit: 3}, 3},
			{"before the oldest", AuditFilter{BeforeID: oldest.ID}, 0},
		} {
			if got := count(c.f); got != c.want {
				t.Errorf("ListAudit(%s) = %d events, want %d", c.name, got, c.want)
			}
		}
		for _, e := range must(s.ListAudit(ctx, AuditFilter{AgentIDs: []string{"agent-b"}})) {
			if e.AgentID != "agent-b" {
				t.Errorf("ListAudit(agent-b) returned %+v", e)
			}
		}

		// Paging with BeforeID visits every event exactly once, newest first.
		var paged []int64
		f := AuditFilter{Limit: 4}
		for {
			page := must(s.ListAudit(ctx, f))
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				paged = append(paged, e.ID)
			}
			f.BeforeID = page[len(page)-1].ID
		}
		var allIDs []int64
		for _, e := range all {
			allIDs = append(allIDs, e.ID)
		}
		if fmt.Sprint(paged) != fmt.Sprint(allIDs) {
			t.Errorf("paged ids = %v, want %v", paged, allIDs)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestAuditLimitClamp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		// Insert in one statement: 1005 audit rows through AppendAudit would only test speed.
		if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1005)
INSERT INTO audit (id, created_at, action) SELECT i, i, 'bulk' FROM n`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.w.ExecContext(ctx, `UPDATE counters SET value = 1005 WHERE name = 'audit'`); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendAudit(ctx, api.AuditEvent{Action: "after.bulk"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			limit, want int
			newest      int64
		}{{0, DefaultAuditLimit, 1006}, {1000, 1000, 1006}, {5000, MaxAuditLimit, 1006}} {
			ev, err := s.ListAudit(ctx, AuditFilter{Limit: c.limit})
			if err != nil || len(ev) != c.want || ev[0].ID != c.newest || ev[0].Action != "after.bulk" {
				t.Errorf("ListAudit(limit %d) = %d events, %v, want %d starting at id %d", c.limit, len(ev), err, c.want, c.newest)
			}
		}
	})
}

func TestMigrations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		ctx := t.Context()
		s1 := db.open(t)
		alice := mustUser(t, s1, "alice")
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}

		// Open again: nothing is re-applied, data survives.
		s2 := db.open(t)
		if v, err := s2.SchemaVersion(ctx); err != nil || v != LatestSchemaVersion() || v < 1 {
			t.Errorf("SchemaVersion() = %d, %v, want %d", v, err, LatestSchemaVersion())
		}
		ms, err := loadMigrations()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s2.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
			t.Errorf("schema_migrations rows = %d, %v, want %d", n, err, len(ms))
		}
		if got, err := s2.GetUser(ctx, alice.ID); err != nil || got.Username != "alice" {
			t.Errorf("GetUser after reopen = %+v, %v, want alice", got, err)
		}

		// A database migrated by a newer binary is refused.
		if _, err := s2.w.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999999, '999999_future.sql', 0)`); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(ctx, db.dsn, db.dataDir); !errors.Is(err, ErrSchemaTooNew) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(newer schema) = %v, want ErrSchemaTooNew", err)
		}
	})
}

// TestConcurrentOpen starts several gateways on one fresh database at once:
// exactly one of them applies each migration, all of them open.
func TestConcurrentOpen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		const n = 6
		stores := make([]*Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = Open(t.Context(), db.dsn, db.dataDir) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Errorf("Open #%d: %v", i, errs[i])
				continue
			}
			defer stores[i].Close()
		}
		if t.Failed() {
			return
		}
		ms, _ := loadMigrations()
		var rows int
		if err := stores[0].r.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil || rows != len(ms) {
			t.Errorf("schema_migrations rows = %d, %v, want %d", rows, err, len(ms))
		}
	})
}

// TestConcurrentWriters runs 100 writers at once, spread over two Stores on the
// same database (two gateways): none may fail, with "database is locked" or otherwise.
func TestConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		ctx := t.Context()
		stores := []*Store{db.open(t), db.open(t)}
		const writers = 100
		errs := make(chan error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			s := stores[i%2]
			wg.Go(func() {
				<-start
				errs <- func() error {
					u, err := s.CreateUser(ctx, User{User: api.User{Username: fmt.Sprintf("user%03d", i), Permissions: api.DefaultPermissions}, PasswordHash: "h"})
					if err != nil {
						return err
					}
					if err := s.CreateSession(ctx, u.ID, randHash(t), time.Now().Add(time.Hour)); err != nil {
						return err
					}
					a, err := s.CreateAgent(ctx, api.Agent{Name: "agent", OwnerID: u.ID, Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone})
					if err != nil {
						return err
					}
					if _, err := s.CreateToken(ctx, a.ID, randHash(t)); err != nil {
						return err
					}
					return s.AppendAudit(ctx, api.AuditEvent{Actor: u.Username, Action: "agent.create", AgentID: a.ID})
				}()
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				failed++
				if failed <= 5 {
					t.Errorf("writer: %v", err)
				}
			}
		}
		if failed > 0 {
			t.Fatalf("%d of %d concurrent writers failed", failed, writers)
		}
		s := stores[0]
		if n, err := s.CountUsers(ctx); err != nil || n != writers {
			t.Errorf("CountUsers() = %d, %v, want %d", n, err, writers)
		}
		if list, err := s.ListAgents(ctx); err != nil || len(list) != writers {
			t.Errorf("ListAgents() = %d agents, %v, want %d", len(list), err, writers)
		}
		ev, err := s.ListAudit(ctx, AuditFilter{Limit: MaxAuditLimit})
		if err != nil || len(ev) != writers {
			t.Fatalf("ListAudit() = %d events, %v, want %d", len(ev), err, writers)
		}
		ids := map[int64]bool{}
		for _, e := range ev {
			ids[e.ID] = true
		}
		if len(ids) != writers || ev[0].ID != writers || ev[writers-1].ID != 1 {
			t.Errorf("audit ids: %d distinct, newest %d, oldest %d; want 1..%d", len(ids), ev[0].ID, ev[writers-1].ID, writers)
		}
	})
}

func TestSQLiteFiles(t *testing.T) {
	old := umask(0o022)
	defer umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	db := testDB{kind: KindSQLite, dataDir: dir}
	s := db.open(t)
	ctx := t.Context()
	if want := filepath.Join(dir, "porthole.db"); s.Path() != want {
		t.Errorf("Path() = %q, want %q", s.Path(), want)
	}
	mustUser(t, s, "alice") // a write, so that the WAL exists
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{s.Path(), 0o600},
		{s.Path() + "-wal", 0o600},
		{s.Path() + "-shm", 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Errorf("stat %s: %v", c.path, err)
			continue
		}
		if fi.Mode() != c.want {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(c.path), fi.Mode(), c.want)
		}
	}
	var mode string
	if err := s.r.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v, want wal", mode, err)
	}
	// The read pool refuses writes: every write goes through the single writer.
	if _, err := s.r.ExecContext(ctx, `DELETE FROM users`); err == nil {
		t.Errorf("a write through the read pool succeeded, want it refused")
	}
	s.Close()

	// A database file left world-readable is tightened on open.
	if err := os.Chmod(s.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := db.open(t)
	if fi, err := os.Stat(s2.Path()); err != nil || fi.Mode() != 0o600 {
		t.Errorf("mode after reopening a 0644 file = %v, %v, want 0600", fi.Mode(), err)
	}
}

func TestSQLitePath(t *testing.T) {
	for _, c := range []struct {
		dsn, dataDir string
		want         string // "" = error
	}{
		{"", "/srv/data", "/srv/data/porthole.db"},
		{"sqlite:///var/lib/p.db", "/ignored", "/var/lib/p.db"},
		{"file:/var/lib/p.db?cache=shared", "", "/var/lib/p.db"},
		{"file:///var/lib/p.db", "", "/var/lib/p.db"},
		{"", "", ""},
		{"mysql://localhost/db", "/srv", ""},
		{"sqlite://", "/srv", ""},
		{"file::memory:", "/srv", ""},
		{"sqlite:///tmp/a?b.db", "/srv", ""},
	} {
		got, err := sqlitePath(c.dsn, c.dataDir)
		if c.want == "" {
			if err == nil {
				t.Errorf("sqlitePath(%q, %q) = %q, want an error", c.dsn, c.dataDir, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("sqlitePath(%q, %q) = %q, %v, want %q", c.dsn, c.dataDir, got, err, c.want)
		}
	}
}

func TestOpenPostgresErrors(t *testing.T) {
	ctx := t.Context()
	// Nothing listens on port 1: a clear error, and the password is not in it.
	_, err := Open(ctx, "postgres://u:sekrit@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "")
	if err == nil {
		t.Fatal("Open(unreachable PostgreSQL) succeeded")
	}
	if strings.Contains(err.Error(), "sekrit") {
		t.Errorf("Open error leaks the password: %v", err)
	}
}

func TestRebind(t *testing.T) {
	s := &Store{kind: KindPostgres}
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`a = ? AND b IN (?, ?)`, `a = $1 AND b IN ($2, $3)`},
	} {
		if got := s.rebind(c.in); got != c.want {
			t.Errorf("rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := (&Store{kind: KindSQLite}).rebind(`a = ?`); got != `a = ?` {
		t.Errorf("SQLite rebind(%q) = %q, want unchanged", `a = ?`, got)
	}
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- c\nCREATE TABLE a (\n  x TEXT\n);\n\nINSERT INTO a VALUES ('x');\nSELECT 1")
	want := []string{"CREATE TABLE a (\n  x TEXT\n);", "INSERT INTO a VALUES ('x');", "SELECT 1"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("splitStatements() = %q, want %q", got, want)
	}
}
