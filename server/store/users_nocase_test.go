package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/porthole/porthole/api"
)

// TestUsernamesCaseInsensitive: "Alice" cannot be created beside "alice" (ErrConflict), and
// a lookup by name ignores case, on SQLite and PostgreSQL.
func TestUsernamesCaseInsensitive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice := mustUser(t, s, "alice")
		for _, name := range []string{"Alice", "ALICE", "aLiCe"} {
			_, err := s.CreateUser(ctx, User{User: api.User{Username: name, Permissions: api.DefaultPermissions}, PasswordHash: "h"})
			if !errors.Is(err, ErrConflict) {
				t.Errorf("CreateUser(%q) beside alice = %v, want ErrConflict", name, err)
			}
		}
		for _, name := range []string{"alice", "Alice", "ALICE"} {
			if u, err := s.GetUserByName(ctx, name); err != nil || u.ID != alice.ID {
				t.Errorf("GetUserByName(%q) = %q, %v, want alice (%s)", name, u.ID, err, alice.ID)
			}
		}
		if _, err := s.GetUserByName(ctx, "bob"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetUserByName(bob) = %v, want ErrNotFound", err)
		}
		if us, err := s.ListUsers(ctx); err != nil || len(us) != 1 {
			t.Errorf("ListUsers = %d users, %v, want 1", len(us), err)
		}
	})
}

// TestMigrationRenamesCaseDuplicates: a database from before migration 0002 that holds
// "Alice" and "alice" still migrates: the oldest keeps its name, the later one is renamed
// "<name>~<id>", and the unique index then holds.
func TestMigrationRenamesCaseDuplicates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		ctx := t.Context()
		s1 := db.open(t)
		// Undo migration 0002 only (drop its index, forget it); later migrations stay applied.
		for _, q := range []string{`DROP INDEX users_username_lower`, `DELETE FROM schema_migrations WHERE version = 2`} {
			if _, err := s1.w.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		first := mustUser(t, s1, "Alice")
		second := mustUser(t, s1, "alice")
		third := mustUser(t, s1, "ALICE")
		bob := mustUser(t, s1, "bob")
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := db.open(t)
		want := map[string]string{first.ID: "Alice", second.ID: "alice~" + second.ID, third.ID: "ALICE~" + third.ID, bob.ID: "bob"}
		for id, name := range want {
			if u, err := s2.GetUser(ctx, id); err != nil || u.Username != name {
				t.Errorf("user %s after migration = %q, %v, want %q", id, u.Username, err, name)
			}
		}
		if _, err := s2.CreateUser(ctx, User{User: api.User{Username: "BOB", Permissions: api.DefaultPermissions}, PasswordHash: "h"}); !errors.Is(err, ErrConflict) {
			t.Errorf("CreateUser(BOB) after migration = %v, want ErrConflict", err)
		}
		if v, err := s2.SchemaVersion(ctx); err != nil || v != LatestSchemaVersion() {
			t.Errorf("SchemaVersion = %d, %v, want %d", v, err, LatestSchemaVersion())
		}
	})
}

// TestCreateAgentWithinQuota: 20 parallel creates for an owner with a quota of 5 make exactly
// 5 agents; the rest fail with ErrQuota; another owner is not affected.
func TestCreateAgentWithinQuota(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		owner := mustUser(t, s, "owner")
		other := mustUser(t, s, "other")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok, quota int
		var errs []string
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.CreateAgentWithin(context.Background(), api.Agent{Name: fmt.Sprintf("a%d", i), OwnerID: owner.ID,
					Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone}, 5)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrQuota):
					quota++
				default:
					errs = append(errs, err.Error())
				}
			}()
		}
		wg.Wait()
		if ok != 5 || quota != 15 || len(errs) > 0 {
			t.Errorf("20 parallel creates with quota 5: %d ok, %d ErrQuota, errors %s; want 5, 15, none", ok, quota, strings.Join(errs, "; "))
		}
		if _, err := s.CreateAgentWithin(ctx, api.Agent{Name: "b", OwnerID: other.ID,
			Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone}, 5); err != nil {
			t.Errorf("another owner's create = %v, want ok", err)
		}
		if _, err := s.CreateAgentWithin(ctx, api.Agent{Name: "c", OwnerID: "nobody",
			Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone}, 5); !errors.Is(err, ErrNotFound) {
			t.Errorf("create for an unknown owner = %v, want ErrNotFound", err)
		}
	})
}
