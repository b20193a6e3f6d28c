package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/porthole/porthole/api"
)

// SessionInfo is one stored session with what the account page shows of it (migration 0004).
type SessionInfo struct {
	Hash      []byte // SHA-256 of the cookie value
	CreatedAt time.Time
	ExpiresAt time.Time
	UserAgent string
	Remote    string
}

// Bounds of what a session records about its client.
const (
	maxUserAgent = 256
	maxRemote    = 64
)

// CreateSessionInfo is CreateSession that also records the client's user agent and address
// (truncated), for the user's list of sessions.
func (s *Store) CreateSessionInfo(ctx context.Context, userID string, hash []byte, expires time.Time, userAgent, remote string) error {
	key, err := hashKey(hash)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	now := s.nowMicro()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE expires_at <= ?`), now); err != nil {
			return fmt.Errorf("purge sessions: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO sessions (hash, user_id, created_at, expires_at, user_agent, remote) VALUES (?, ?, ?, ?, ?, ?)`),
			key, userID, now, expires.UnixMicro(), clip(userAgent, maxUserAgent), clip(remote, maxRemote))
		if err != nil {
			return fmt.Errorf("create session for user %q: %w", userID, classify(err))
		}
		return nil
	})
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ListSessions lists the user's sessions that have not expired, newest first.
func (s *Store) ListSessions(ctx context.Context, userID string) ([]SessionInfo, error) {
	rows, err := s.r.QueryContext(ctx, s.rebind(`SELECT hash, created_at, expires_at, user_agent, remote FROM sessions
WHERE user_id = ? AND expires_at > ? ORDER BY created_at DESC, hash`), userID, s.now().UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []SessionInfo{}
	for rows.Next() {
		var si SessionInfo
		var key string
		var created, expires int64
		if err := rows.Scan(&key, &created, &expires, &si.UserAgent, &si.Remote); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if si.Hash, err = hex.DecodeString(key); err != nil {
			return nil, fmt.Errorf("list sessions: bad hash: %w", err)
		}
		si.CreatedAt, si.ExpiresAt = fromMicro(created), fromMicro(expires)
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// MaxTokenName bounds an agent token's name, in characters (the store keeps at most four
// bytes per character).
const MaxTokenName = 64

// CreateNamedToken is CreateToken with a name for people.
func (s *Store) CreateNamedToken(ctx context.Context, agentID string, hash []byte, name string) (api.Token, error) {
	key, err := hashKey(hash)
	if err != nil {
		return api.Token{}, fmt.Errorf("create token: %w", err)
	}
	t := api.Token{ID: newID(), AgentID: agentID, Name: clip(name, 4*MaxTokenName)}
	created := s.nowMicro()
	t.CreatedAt = fromMicro(created)
	_, err = s.w.ExecContext(ctx, s.rebind(`INSERT INTO agent_tokens (id, agent_id, hash, created_at, name) VALUES (?, ?, ?, ?, ?)`),
		t.ID, agentID, key, created, t.Name)
	if err != nil {
		return api.Token{}, fmt.Errorf("create token for agent %q: %w", agentID, classify(err))
	}
	return t, nil
}

// ListNamedTokens lists the agent's tokens with their names, oldest first (never their secrets).
func (s *Store) ListNamedTokens(ctx context.Context, agentID string) ([]api.Token, error) {
	rows, err := s.r.QueryContext(ctx, s.rebind(`SELECT id, agent_id, name, created_at FROM agent_tokens WHERE agent_id = ? ORDER BY created_at, id`), agentID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []api.Token{}
	for rows.Next() {
		var t api.Token
		var created int64
		if err := rows.Scan(&t.ID, &t.AgentID, &t.Name, &created); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.CreatedAt = fromMicro(created)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// AuditQuery selects audit events, newest first: AuditFilter plus filters on who, which
// surface, which action and when. Zero fields do not filter.
type AuditQuery struct {
	AuditFilter
	Actor   string      // exact actor: a username, "token:<id>"
	Surface api.Surface // events on this surface
	Action  string      // exact action ("login.fail"), or a prefix ending in "." ("surface.")
	Since   time.Time   // at or after
	Until   time.Time   // before
}

// ListAuditQuery returns the events matching q, newest first (page with BeforeID: the
// smallest ID of the previous page).
func (s *Store) ListAuditQuery(ctx context.Context, q AuditQuery) ([]api.AuditEvent, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	limit = min(limit, MaxAuditLimit)
	out := []api.AuditEvent{}
	if q.AgentIDs != nil && len(q.AgentIDs) == 0 {
		return out, nil
	}
	var where []string
	var args []any
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	if q.BeforeID > 0 {
		add(`id < ?`, q.BeforeID)
	}
	if q.AgentIDs != nil {
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(q.AgentIDs)), ", ")
		ids := make([]any, len(q.AgentIDs))
		for i, id := range q.AgentIDs {
			ids[i] = id
		}
		add(`agent_id IN (`+ph+`)`, ids...)
	}
	if q.Actor != "" {
		add(`actor = ?`, q.Actor)
	}
	if q.Surface != "" {
		add(`surface = ?`, string(q.Surface))
	}
	switch {
	case q.Action == "":
	case strings.HasSuffix(q.Action, "."):
		// A prefix: compare the leading characters (no LIKE, whose escaping differs between databases).
		add(`substr(action, 1, ?) = ?`, len(q.Action), q.Action)
	default:
		add(`action = ?`, q.Action)
	}
	if !q.Since.IsZero() {
		add(`created_at >= ?`, q.Since.UnixMicro())
	}
	if !q.Until.IsZero() {
		add(`created_at < ?`, q.Until.UnixMicro())
	}
	query := `SELECT id, created_at, actor, action, agent_id, surface, mode, detail, remote FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e api.AuditEvent
		var at int64
		var surface, mode string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.AgentID, &surface, &mode, &e.Detail, &e.Remote); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.Time = fromMicro(at)
		e.Surface, e.Mode = api.Surface(surface), api.Level(mode)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
