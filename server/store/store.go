// Package store persists Porthole's users, sessions, agents, tokens and audit log in SQLite or PostgreSQL.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/porthole/porthole/api"
)

// Sentinel errors; callers test them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// User is a stored account, with its password hash (a PHC string).
type User struct {
	api.User
	PasswordHash string
}

// UserUpdate changes a user; nil fields are unchanged.
type UserUpdate struct {
	PasswordHash *string
	Admin        *bool
	Permissions  *api.Permissions
}

// AgentUpdate changes an agent; nil fields are unchanged.
type AgentUpdate struct {
	Name    *string
	Backend *api.Backend
	Share   *api.Level
}

// AuditFilter selects audit events, newest first.
type AuditFilter struct {
	AgentIDs []string // nil: all agents (and events without an agent); non-nil: only these agents
	Limit    int      // 0: 100; clamped to 1000
	BeforeID int64    // 0: from the newest
}

// Store is an open database. TODO(store helper): implement; signatures are the contract.
type Store struct{}

// Open opens (and migrates) the store named by dsn: "" means SQLite at dataDir/porthole.db;
// "sqlite:///abs/path.db" or "file:..." SQLite at that path; "postgres://..." PostgreSQL.
func Open(ctx context.Context, dsn, dataDir string) (*Store, error) { panic("TODO") }

func (s *Store) Close() error                   { panic("TODO") }
func (s *Store) Ping(ctx context.Context) error { panic("TODO") }

// Kind is "sqlite" or "postgres".
func (s *Store) Kind() string { panic("TODO") }

// Path is the SQLite file ("" for PostgreSQL).
func (s *Store) Path() string { panic("TODO") }

func (s *Store) CountUsers(ctx context.Context) (int, error) { panic("TODO") }

// CreateUser returns ErrConflict when the username is taken.
func (s *Store) CreateUser(ctx context.Context, u User) (api.User, error)         { panic("TODO") }
func (s *Store) GetUser(ctx context.Context, id string) (User, error)             { panic("TODO") }
func (s *Store) GetUserByName(ctx context.Context, username string) (User, error) { panic("TODO") }
func (s *Store) ListUsers(ctx context.Context) ([]api.User, error)                { panic("TODO") }
func (s *Store) UpdateUser(ctx context.Context, id string, u UserUpdate) (api.User, error) {
	panic("TODO")
}

// DeleteUser also deletes the user's sessions; their agents are deleted too.
func (s *Store) DeleteUser(ctx context.Context, id string) error { panic("TODO") }

// Sessions are keyed by the SHA-256 of the cookie value.
func (s *Store) CreateSession(ctx context.Context, userID string, hash []byte, expires time.Time) error {
	panic("TODO")
}

// GetSession returns ErrNotFound for unknown or expired sessions.
func (s *Store) GetSession(ctx context.Context, hash []byte) (userID string, err error) {
	panic("TODO")
}
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error { panic("TODO") }

// DeleteUserSessions deletes every session of the user except the one with hash keep (nil: all).
func (s *Store) DeleteUserSessions(ctx context.Context, userID string, keep []byte) error {
	panic("TODO")
}

// CreateAgent fills ID, CreatedAt and Owner (username) from a.OwnerID.
func (s *Store) CreateAgent(ctx context.Context, a api.Agent) (api.Agent, error) { panic("TODO") }
func (s *Store) GetAgent(ctx context.Context, id string) (api.Agent, error)      { panic("TODO") }

// ListAgents lists every agent, oldest first.
func (s *Store) ListAgents(ctx context.Context) ([]api.Agent, error) { panic("TODO") }
func (s *Store) UpdateAgent(ctx context.Context, id string, u AgentUpdate) (api.Agent, error) {
	panic("TODO")
}

// DeleteAgent also deletes the agent's tokens.
func (s *Store) DeleteAgent(ctx context.Context, id string) error { panic("TODO") }

// Agent tokens are keyed by the SHA-256 of the secret.
func (s *Store) CreateToken(ctx context.Context, agentID string, hash []byte) (api.Token, error) {
	panic("TODO")
}

// GetToken returns ErrNotFound for unknown or revoked tokens.
func (s *Store) GetToken(ctx context.Context, hash []byte) (api.Token, error)        { panic("TODO") }
func (s *Store) ListTokens(ctx context.Context, agentID string) ([]api.Token, error) { panic("TODO") }
func (s *Store) DeleteToken(ctx context.Context, agentID, tokenID string) error      { panic("TODO") }

// AppendAudit stores e (ID and, when zero, Time are filled in).
func (s *Store) AppendAudit(ctx context.Context, e api.AuditEvent) error { panic("TODO") }
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]api.AuditEvent, error) {
	panic("TODO")
}
