package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/porthole/porthole/api"
)

// Errors of the browser profile methods (besides ErrNotFound and ErrConflict).
var (
	// ErrProfileInUse: the profile is lent to an agent (another one, for a lend); the
	// returned profile's LentTo/LentToName name it.
	ErrProfileInUse = errors.New("profile in use")
	// ErrAgentHasProfile: the agent already uses another lent profile.
	ErrAgentHasProfile = errors.New("agent already uses a lent profile")
	// ErrNotOwner: the agent does not belong to the profile's owner.
	ErrNotOwner = errors.New("the agent does not belong to the profile's owner")
)

// MaxProfileName bounds a profile's name, in characters.
const MaxProfileName = 64

const profileSelect = `SELECT p.id, p.name, p.owner_id, u.username, p.created_at, p.lent_to, a.name, p.lent_at
FROM browser_profiles p JOIN users u ON u.id = p.owner_id LEFT JOIN agents a ON a.id = p.lent_to`

func scanProfile(r rowScanner) (api.BrowserProfile, error) {
	var p api.BrowserProfile
	var created, lentAt int64
	var lentTo, lentName sql.NullString
	if err := r.Scan(&p.ID, &p.Name, &p.OwnerID, &p.Owner, &created, &lentTo, &lentName, &lentAt); err != nil {
		return api.BrowserProfile{}, err
	}
	p.CreatedAt = fromMicro(created)
	if lentTo.Valid {
		p.LentTo, p.LentToName = lentTo.String, lentName.String
		t := fromMicro(lentAt)
		p.LentAt = &t
	}
	return p, nil
}

// CreateProfile stores a new browser profile of ownerID named name. It refuses with ErrQuota
// when the owner already has maxPerOwner profiles (0 = no limit; counted in the same
// transaction, serialized per owner as in CreateAgentWithin), ErrConflict when the owner has
// a profile of that name (in any letter case), ErrNotFound for an unknown owner.
func (s *Store) CreateProfile(ctx context.Context, ownerID, name string, maxPerOwner int) (api.BrowserProfile, error) {
	id := newID()
	created := s.nowMicro()
	var out api.BrowserProfile
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if maxPerOwner > 0 {
			if s.kind == KindPostgres {
				var uid string
				err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE id = $1 FOR UPDATE`, ownerID).Scan(&uid)
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("create profile %q: owner %q: %w", name, ownerID, ErrNotFound)
				} else if err != nil {
					return fmt.Errorf("create profile %q: lock owner: %w", name, err)
				}
			}
			var n int
			if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM browser_profiles WHERE owner_id = ?`), ownerID).Scan(&n); err != nil {
				return fmt.Errorf("create profile %q: count the owner's profiles: %w", name, err)
			}
			if n >= maxPerOwner {
				return fmt.Errorf("create profile %q: the owner has %d profiles (max %d): %w", name, n, maxPerOwner, ErrQuota)
			}
		}
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO browser_profiles (id, owner_id, name, created_at) VALUES (?, ?, ?, ?)`),
			id, ownerID, clip(name, 4*MaxProfileName), created)
		if err != nil {
			return fmt.Errorf("create profile %q of user %q: %w", name, ownerID, classify(err))
		}
		out, err = s.getProfile(ctx, tx, id)
		return err
	})
	if err != nil {
		return api.BrowserProfile{}, err
	}
	return out, nil
}

// GetProfile returns one profile (ErrNotFound).
func (s *Store) GetProfile(ctx context.Context, id string) (api.BrowserProfile, error) {
	return s.getProfile(ctx, s.r, id)
}

func (s *Store) getProfile(ctx context.Context, q queryer, id string) (api.BrowserProfile, error) {
	p, err := scanProfile(q.QueryRowContext(ctx, s.rebind(profileSelect+` WHERE p.id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return api.BrowserProfile{}, fmt.Errorf("profile %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return api.BrowserProfile{}, fmt.Errorf("get profile %q: %w", id, err)
	}
	return p, nil
}

// ListProfiles lists ownerID's profiles ("" = everyone's), oldest first.
func (s *Store) ListProfiles(ctx context.Context, ownerID string) ([]api.BrowserProfile, error) {
	q, args := profileSelect, []any{}
	if ownerID != "" {
		q, args = q+` WHERE p.owner_id = ?`, append(args, ownerID)
	}
	rows, err := s.r.QueryContext(ctx, s.rebind(q+` ORDER BY p.created_at, p.id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	defer rows.Close()
	out := []api.BrowserProfile{}
	for rows.Next() {
		p, err := scanProfile(rows)
		if err != nil {
			return nil, fmt.Errorf("list profiles: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	return out, nil
}

// ProfileLentTo returns the profile lent to the agent, or ErrNotFound when its browser uses
// its own.
func (s *Store) ProfileLentTo(ctx context.Context, agentID string) (api.BrowserProfile, error) {
	return s.profileLentTo(ctx, s.r, agentID)
}

func (s *Store) profileLentTo(ctx context.Context, q queryer, agentID string) (api.BrowserProfile, error) {
	p, err := scanProfile(q.QueryRowContext(ctx, s.rebind(profileSelect+` WHERE p.lent_to = ?`), agentID))
	if errors.Is(err, sql.ErrNoRows) {
		return api.BrowserProfile{}, fmt.Errorf("profile lent to agent %q: %w", agentID, ErrNotFound)
	}
	if err != nil {
		return api.BrowserProfile{}, fmt.Errorf("profile lent to agent %q: %w", agentID, err)
	}
	return p, nil
}

// LendProfile lends the profile to the agent and returns it. Lending it again to the agent that
// has it is a no-op. Refusals: ErrNotFound (profile or agent), ErrNotOwner (the agent is not
// the profile owner's), ErrProfileInUse (lent to another agent: the returned profile names
// it), ErrAgentHasProfile (the agent uses another profile: the returned profile is that one).
// The database enforces the same rules, so two gateways cannot lend one profile twice.
func (s *Store) LendProfile(ctx context.Context, profileID, agentID string) (api.BrowserProfile, error) {
	var out api.BrowserProfile
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		p, err := s.getProfile(ctx, tx, profileID)
		if err != nil {
			return err
		}
		a, err := s.getAgent(ctx, tx, agentID)
		if err != nil {
			return err
		}
		if a.OwnerID != p.OwnerID {
			return fmt.Errorf("lend profile %q to agent %q: %w", profileID, agentID, ErrNotOwner)
		}
		if p.LentTo == agentID {
			out = p
			return nil
		}
		if p.LentTo != "" {
			out = p
			return fmt.Errorf("lend profile %q: lent to agent %q: %w", profileID, p.LentTo, ErrProfileInUse)
		}
		if other, err := s.profileLentTo(ctx, tx, agentID); err == nil {
			out = other
			return fmt.Errorf("lend profile %q: agent %q uses profile %q: %w", profileID, agentID, other.ID, ErrAgentHasProfile)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		res, err := tx.ExecContext(ctx, s.rebind(`UPDATE browser_profiles SET lent_to = ?, lent_owner = ?, lent_at = ?
WHERE id = ? AND lent_to IS NULL`), agentID, a.OwnerID, s.nowMicro(), profileID)
		if err != nil {
			err = classify(err)
			if errors.Is(err, ErrConflict) {
				err = fmt.Errorf("%w (%v)", ErrAgentHasProfile, err)
			}
			return fmt.Errorf("lend profile %q to agent %q: %w", profileID, agentID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("lend profile %q: lent meanwhile: %w", profileID, ErrProfileInUse)
		}
		out, err = s.getProfile(ctx, tx, profileID)
		return err
	})
	if err != nil {
		return out, err
	}
	return out, nil
}

// ReturnProfile takes the profile back from the agent it is lent to and returns it as it was
// (LentTo names that agent; "" when it was not lent: nothing changed).
func (s *Store) ReturnProfile(ctx context.Context, profileID string) (api.BrowserProfile, error) {
	var out api.BrowserProfile
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = s.getProfile(ctx, tx, profileID); err != nil || out.LentTo == "" {
			return err
		}
		_, err = tx.ExecContext(ctx, s.rebind(`UPDATE browser_profiles SET lent_to = NULL, lent_owner = NULL WHERE id = ?`), profileID)
		if err != nil {
			return fmt.Errorf("return profile %q: %w", profileID, err)
		}
		return nil
	})
	return out, err
}

// ReturnAgentProfile takes back whatever profile is lent to the agent and returns it as it was;
// ErrNotFound when none is.
func (s *Store) ReturnAgentProfile(ctx context.Context, agentID string) (api.BrowserProfile, error) {
	var out api.BrowserProfile
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = s.profileLentTo(ctx, tx, agentID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.rebind(`UPDATE browser_profiles SET lent_to = NULL, lent_owner = NULL WHERE id = ? AND lent_to = ?`), out.ID, agentID)
		if err != nil {
			return fmt.Errorf("return the profile of agent %q: %w", agentID, err)
		}
		return nil
	})
	return out, err
}

// DeleteProfile deletes a profile that is not lent (ErrProfileInUse while it is; the returned
// profile names the agent), ErrNotFound for an unknown one. It returns the deleted profile.
func (s *Store) DeleteProfile(ctx context.Context, id string) (api.BrowserProfile, error) {
	var out api.BrowserProfile
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = s.getProfile(ctx, tx, id); err != nil {
			return err
		}
		if out.LentTo != "" {
			return fmt.Errorf("delete profile %q: lent to agent %q: %w", id, out.LentTo, ErrProfileInUse)
		}
		res, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM browser_profiles WHERE id = ? AND lent_to IS NULL`), id)
		if err != nil {
			return fmt.Errorf("delete profile %q: %w", id, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("delete profile %q: lent meanwhile: %w", id, ErrProfileInUse)
		}
		return nil
	})
	return out, err
}

// ProfileIDs lists the ids of every stored profile (the gateway removes directories of
// profiles that are gone, e.g. after `porthole user rm`).
func (s *Store) ProfileIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM browser_profiles`)
	if err != nil {
		return nil, fmt.Errorf("list profile ids: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list profile ids: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}
