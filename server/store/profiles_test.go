package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestBrowserProfiles: create, list, lend to one agent of the owner at a time, return, delete
// (refused while lent), on both databases.
func TestBrowserProfiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		a1, a2, b1 := mustAgent(t, s, alice.ID, "a1"), mustAgent(t, s, alice.ID, "a2"), mustAgent(t, s, bob.ID, "b1")

		work, err := s.CreateProfile(ctx, alice.ID, "work", 3)
		if err != nil {
			t.Fatalf("CreateProfile: %v", err)
		}
		if work.ID == "" || work.Name != "work" || work.OwnerID != alice.ID || work.Owner != "alice" || work.LentTo != "" || work.LentAt != nil {
			t.Errorf("created profile = %+v", work)
		}
		if _, err := s.CreateProfile(ctx, alice.ID, "WORK", 3); !errors.Is(err, ErrConflict) {
			t.Errorf("second profile named WORK = %v, want ErrConflict", err)
		}
		if _, err := s.CreateProfile(ctx, bob.ID, "work", 3); err != nil {
			t.Errorf("Bob's own profile named work: %v", err)
		}
		if _, err := s.CreateProfile(ctx, "nobody", "x", 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("profile of an unknown user = %v, want ErrNotFound", err)
		}
		home := must(s.CreateProfile(ctx, alice.ID, "home", 3))
		must(s.CreateProfile(ctx, alice.ID, "third", 3))
		if _, err := s.CreateProfile(ctx, alice.ID, "fourth", 3); !errors.Is(err, ErrQuota) {
			t.Errorf("a 4th profile with max 3 = %v, want ErrQuota", err)
		}
		if l := must(s.ListProfiles(ctx, alice.ID)); len(l) != 3 || l[0].ID != work.ID || l[1].ID != home.ID {
			t.Errorf("ListProfiles(alice) = %+v, want work, home, third", l)
		}
		if l := must(s.ListProfiles(ctx, "")); len(l) != 4 {
			t.Errorf("ListProfiles(all) = %d profiles, want 4", len(l))
		}

		// Lend to A1: the profile names it; A1's lent profile is it.
		p, err := s.LendProfile(ctx, work.ID, a1.ID)
		if err != nil {
			t.Fatalf("LendProfile(work, a1): %v", err)
		}
		if p.LentTo != a1.ID || p.LentToName != "a1" || p.LentAt == nil {
			t.Errorf("lent profile = %+v, want lent to a1", p)
		}
		if got, err := s.ProfileLentTo(ctx, a1.ID); err != nil || got.ID != work.ID {
			t.Errorf("ProfileLentTo(a1) = %+v, %v, want work", got, err)
		}
		if _, err := s.ProfileLentTo(ctx, a2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("ProfileLentTo(a2) = %v, want ErrNotFound", err)
		}
		// Again to A1: a no-op.
		if p, err := s.LendProfile(ctx, work.ID, a1.ID); err != nil || p.LentTo != a1.ID {
			t.Errorf("lend again to a1 = %+v, %v, want a no-op", p, err)
		}
		// Not to two agents at once.
		if p, err := s.LendProfile(ctx, work.ID, a2.ID); !errors.Is(err, ErrProfileInUse) || p.LentTo != a1.ID || p.LentToName != "a1" {
			t.Errorf("lend work to a2 while a1 has it = %+v, %v, want ErrProfileInUse naming a1", p, err)
		}
		// Not two profiles in one agent.
		if p, err := s.LendProfile(ctx, home.ID, a1.ID); !errors.Is(err, ErrAgentHasProfile) || p.ID != work.ID {
			t.Errorf("lend home to a1 while it uses work = %+v, %v, want ErrAgentHasProfile naming work", p, err)
		}
		// Never to another user's agent.
		if _, err := s.LendProfile(ctx, home.ID, b1.ID); !errors.Is(err, ErrNotOwner) {
			t.Errorf("lend Alice's profile to Bob's agent = %v, want ErrNotOwner", err)
		}
		if _, err := s.LendProfile(ctx, "nope", a2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("lend an unknown profile = %v, want ErrNotFound", err)
		}
		if _, err := s.LendProfile(ctx, home.ID, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("lend to an unknown agent = %v, want ErrNotFound", err)
		}
		// Not deleted while lent.
		if p, err := s.DeleteProfile(ctx, work.ID); !errors.Is(err, ErrProfileInUse) || p.LentTo != a1.ID {
			t.Errorf("DeleteProfile(lent) = %+v, %v, want ErrProfileInUse naming a1", p, err)
		}

		// Take back: it was lent to A1; now nobody has it; lend it to A2.
		if p, err := s.ReturnProfile(ctx, work.ID); err != nil || p.LentTo != a1.ID {
			t.Errorf("ReturnProfile = %+v, %v, want it as it was (lent to a1)", p, err)
		}
		if p, err := s.ReturnProfile(ctx, work.ID); err != nil || p.LentTo != "" {
			t.Errorf("ReturnProfile again = %+v, %v, want not lent, no error", p, err)
		}
		if _, err := s.ProfileLentTo(ctx, a1.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("ProfileLentTo(a1) after return = %v, want ErrNotFound", err)
		}
		if _, err := s.LendProfile(ctx, work.ID, a2.ID); err != nil {
			t.Fatalf("lend work to a2 after its return: %v", err)
		}
		if p, err := s.ReturnAgentProfile(ctx, a2.ID); err != nil || p.ID != work.ID {
			t.Errorf("ReturnAgentProfile(a2) = %+v, %v, want work", p, err)
		}
		if _, err := s.ReturnAgentProfile(ctx, a2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("ReturnAgentProfile(a2) again = %v, want ErrNotFound", err)
		}

		// Deleting the agent returns the profile.
		must(s.LendProfile(ctx, home.ID, a2.ID))
		if err := s.DeleteAgent(ctx, a2.ID); err != nil {
			t.Fatalf("DeleteAgent(a2) with a lent profile: %v", err)
		}
		if p, err := s.GetProfile(ctx, home.ID); err != nil || p.LentTo != "" || p.LentAt != nil {
			t.Errorf("profile after its agent's deletion = %+v, %v, want returned", p, err)
		}

		// Delete; then it is gone.
		if p, err := s.DeleteProfile(ctx, home.ID); err != nil || p.ID != home.ID {
			t.Errorf("DeleteProfile(home) = %+v, %v", p, err)
		}
		if _, err := s.GetProfile(ctx, home.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetProfile(deleted) = %v, want ErrNotFound", err)
		}
		if _, err := s.DeleteProfile(ctx, home.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteProfile(deleted) = %v, want ErrNotFound", err)
		}

		// Deleting the owner deletes their profiles, lent or not.
		must(s.LendProfile(ctx, work.ID, a1.ID))
		if err := s.DeleteUser(ctx, alice.ID); err != nil {
			t.Fatalf("DeleteUser(alice) with a lent profile: %v", err)
		}
		if l := must(s.ListProfiles(ctx, "")); len(l) != 1 || l[0].OwnerID != bob.ID {
			t.Errorf("profiles after deleting Alice = %+v, want only Bob's", l)
		}
		ids := must(s.ProfileIDs(ctx))
		if len(ids) != 1 || ids[work.ID] {
			t.Errorf("ProfileIDs() = %v, want Bob's one", ids)
		}
	})
}

// TestBrowserProfilesEnforcedByDB writes the table directly, past the store's checks: the
// database itself refuses a profile in two agents' hands, two profiles in one agent, and a
// profile in another user's agent.
func TestBrowserProfilesEnforcedByDB(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s := db.open(t)
		ctx := t.Context()
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		a1, b1 := mustAgent(t, s, alice.ID, "a1"), mustAgent(t, s, bob.ID, "b1")
		p1 := must(s.CreateProfile(ctx, alice.ID, "p1", 0))
		p2 := must(s.CreateProfile(ctx, alice.ID, "p2", 0))
		set := func(profile, agent, owner any) error {
			_, err := s.w.ExecContext(ctx, s.rebind(`UPDATE browser_profiles SET lent_to = ?, lent_owner = ? WHERE id = ?`), agent, owner, profile)
			return err
		}
		if err := set(p1.ID, a1.ID, alice.ID); err != nil {
			t.Fatalf("a valid lend written directly: %v", err)
		}
		if err := set(p2.ID, a1.ID, alice.ID); err == nil {
			t.Error("a second profile in the same agent was accepted by the database")
		}
		for _, c := range []struct {
			name         string
			agent, owner any
		}{
			{"Bob's agent, owner Bob", b1.ID, bob.ID},
			{"Bob's agent, owner Alice", b1.ID, alice.ID},
			{"Bob's agent, no owner", b1.ID, nil},
			{"an unknown agent", "nope", alice.ID},
			{"an owner without an agent", nil, alice.ID},
		} {
			if err := set(p2.ID, c.agent, c.owner); err == nil {
				t.Errorf("lend of Alice's profile to %s was accepted by the database", c.name)
			}
		}
		// An agent's owner cannot change under a lent profile.
		if _, err := s.w.ExecContext(ctx, s.rebind(`UPDATE agents SET owner_id = ? WHERE id = ?`), bob.ID, a1.ID); err == nil {
			t.Error("the database let an agent with Alice's lent profile pass to Bob")
		}
		if got := must(s.GetProfile(ctx, p2.ID)); got.LentTo != "" {
			t.Errorf("p2 = %+v, want not lent", got)
		}
	})
}

// TestBrowserProfilesConcurrentLends: 8 lends of one profile to 8 agents at once, over two
// stores on one database: exactly one wins, the others get ErrProfileInUse.
func TestBrowserProfilesConcurrentLends(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db testDB) {
		s1, s2 := db.open(t), db.open(t)
		ctx := t.Context()
		alice := mustUser(t, s1, "alice")
		p := must(s1.CreateProfile(ctx, alice.ID, "p", 0))
		var agents []string
		for i := range 8 {
			agents = append(agents, mustAgent(t, s1, alice.ID, fmt.Sprint("a", i)).ID)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(agents))
		for i, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := s1
				if i%2 == 1 {
					s = s2
				}
				_, errs[i] = s.LendProfile(context.Background(), p.ID, a)
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrProfileInUse):
				t.Errorf("lend to agent %d: %v, want nil or ErrProfileInUse", i, err)
			}
		}
		if won != 1 {
			t.Errorf("%d concurrent lends of one profile succeeded, want exactly 1", won)
		}
	})
}
