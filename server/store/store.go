// Package store persists Porthole's users, sessions, agents, tokens and audit log in SQLite or PostgreSQL.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/porthole/porthole/api"
)

// Sentinel errors; callers test them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrSchemaTooNew means the database was migrated by a newer Porthole.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrQuota means the owner already has as many agents as CreateAgentWithin allows.
	ErrQuota = errors.New("quota reached")
)

// Kinds of database, as returned by Kind.
const (
	KindSQLite   = "sqlite"
	KindPostgres = "postgres"
)

// SQLiteFile is the database file name inside the data directory.
const SQLiteFile = "porthole.db"

// Tunables of the connection pools.
const (
	sqliteBusyTimeout = 30 * time.Second // how long a writer waits for another process's write lock
	sqliteReaders     = 4                // read pool size
	pgMaxConns        = 10               // PostgreSQL pool size (the server's max_connections is shared)
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

// Audit list limits.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// Store is an open database. It is safe for concurrent use.
//
// On SQLite every write goes through w, a pool of exactly one connection whose
// transactions start with BEGIN IMMEDIATE, so writers of this process queue in
// Go instead of failing with "database is locked"; reads use the pool r. On
// PostgreSQL w and r are the same pool.
type Store struct {
	kind string
	path string  // SQLite file
	w    *sql.DB // writes (SQLite: one connection)
	r    *sql.DB // reads

	mu   sync.Mutex
	last int64 // last timestamp handed out by nowMicro

	// now is the clock; tests replace it to expire sessions.
	now func() time.Time
}

// Open opens (and migrates) the store named by dsn: "" means SQLite at dataDir/porthole.db;
// "sqlite:///abs/path.db" or "file:..." SQLite at that path; "postgres://..." PostgreSQL.
func Open(ctx context.Context, dsn, dataDir string) (*Store, error) {
	s := &Store{now: time.Now}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		err = s.openPostgres(ctx, dsn)
	default:
		var path string
		path, err = sqlitePath(dsn, dataDir)
		if err == nil {
			err = s.openSQLite(ctx, path)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sqlitePath resolves the SQLite file named by dsn.
func sqlitePath(dsn, dataDir string) (string, error) {
	var p string
	switch {
	case dsn == "":
		if dataDir == "" {
			return "", errors.New("open store: neither a data directory nor a database was given")
		}
		p = filepath.Join(dataDir, SQLiteFile)
	case strings.HasPrefix(dsn, "sqlite://"):
		p = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "file:"):
		p = strings.TrimPrefix(dsn, "file:")
		p = strings.TrimPrefix(p, "//")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
	default:
		return "", fmt.Errorf("open store: unsupported database %q: want postgres://..., sqlite:///path or file:path", redactDSN(dsn))
	}
	if p == "" || strings.ContainsAny(p, "?#") || strings.Contains(p, ":memory:") {
		return "", fmt.Errorf("open store: bad SQLite path %q", p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("open store: %w", err)
	}
	return abs, nil
}

func (s *Store) openSQLite(ctx context.Context, path string) error {
	s.kind, s.path = KindSQLite, path
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("open store: create data dir: %w", err)
	}
	// Create the file 0600 before SQLite does (it would use 0644 & ~umask);
	// SQLite gives the -wal and -shm files the database file's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("open store: restrict %s: %w", p, err)
			}
		}
	}

	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(sqliteBusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "NORMAL")
	wq := url.Values{}
	for k, v := range q {
		wq[k] = v
	}
	wq.Set("_journal_mode", "WAL")
	wq.Set("_txlock", "immediate")
	s.w, err = sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxIdleTime(0)
	s.w.SetConnMaxLifetime(0)
	// The write connection switches the file to WAL before any reader opens it. On a fresh
	// file that several processes open at once, the switch can fail with SQLITE_BUSY at once:
	// SQLite does not wait on busy_timeout where waiting could deadlock. Try again, as long as
	// busy_timeout would have waited (a failed connection is not kept, the next try is new).
	if err := pingSQLite(ctx, s.w); err != nil {
		s.w.Close()
		return fmt.Errorf("open store %s: %w", path, err)
	}
	q.Set("_query_only", "1")
	s.r, err = sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		s.w.Close()
		return fmt.Errorf("open store: %w", err)
	}
	s.r.SetMaxOpenConns(sqliteReaders)
	s.r.SetMaxIdleConns(sqliteReaders)
	return nil
}

// pingSQLite opens db's first connection, trying again while SQLite answers SQLITE_BUSY,
// for at most sqliteBusyTimeout.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

func (s *Store) openPostgres(ctx context.Context, dsn string) error {
	s.kind = KindPostgres
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("open store %s: %w", redactDSN(dsn), err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pgMaxConns)
	db.SetMaxIdleConns(pgMaxConns / 2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("open store %s: %w", redactDSN(dsn), err)
	}
	s.w, s.r = db, db
	return nil
}

// redactDSN hides the password of a database URL.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparsable database URL)"
		}
		return dsn
	}
	return u.Redacted()
}

// Close closes the database.
func (s *Store) Close() error {
	var errs []error
	if s.r != nil && s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Ping checks that the database answers (both pools on SQLite).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Kind is "sqlite" or "postgres".
func (s *Store) Kind() string { return s.kind }

// Path is the SQLite file ("" for PostgreSQL).
func (s *Store) Path() string { return s.path }

// ---- helpers ----

// rebind turns ? placeholders into $1, $2 ... for PostgreSQL. Queries in this
// package never contain a literal question mark.
func (s *Store) rebind(q string) string {
	if s.kind != KindPostgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// nowMicro returns the current time in unix microseconds, strictly increasing
// within this Store so that "oldest first" has no ties among its own rows.
func (s *Store) nowMicro() int64 {
	t := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t <= s.last {
		t = s.last + 1
	}
	s.last = t
	return t
}

func fromMicro(us int64) time.Time { return time.UnixMicro(us).UTC() }

// newID returns an opaque random ID: 16 random bytes, base32, lower case (26 characters).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func hashKey(hash []byte) (string, error) {
	if len(hash) == 0 {
		return "", errors.New("empty hash")
	}
	return hex.EncodeToString(hash), nil
}

// classify maps constraint violations to the package's sentinel errors.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w (%v)", ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w (%v)", ErrNotFound, err)
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w (%v)", ErrConflict, err)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%w (%v)", ErrNotFound, err)
		}
	}
	return err
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE on SQLite) and commits it.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", classify(err))
	}
	return nil
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var (
	_ queryer = (*sql.DB)(nil)
	_ queryer = (*sql.Tx)(nil)
)

// ---- users ----

const userCols = `id, username, password_hash, admin, permissions, created_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanUser(r rowScanner) (User, error) {
	var u User
	var admin int
	var perms string
	var created int64
	if err := r.Scan(&u.ID, &u.Username, &u.PasswordHash, &admin, &perms, &created); err != nil {
		return User{}, err
	}
	u.Admin = admin != 0
	u.CreatedAt = fromMicro(created)
	if err := json.Unmarshal([]byte(perms), &u.Permissions); err != nil {
		return User{}, fmt.Errorf("user %s: permissions: %w", u.ID, err)
	}
	return u, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// CreateUser returns ErrConflict when the username is taken, in any letter case. It fills in the
// ID (when empty) and CreatedAt (when zero).
func (s *Store) CreateUser(ctx context.Context, u User) (api.User, error) {
	if u.ID == "" {
		u.ID = newID()
	}
	created := s.nowMicro()
	if !u.CreatedAt.IsZero() {
		created = u.CreatedAt.UnixMicro()
	}
	u.CreatedAt = fromMicro(created)
	perms, err := json.Marshal(u.Permissions)
	if err != nil {
		return api.User{}, fmt.Errorf("create user: %w", err)
	}
	_, err = s.w.ExecContext(ctx, s.rebind(`INSERT INTO users (`+userCols+`) VALUES (?, ?, ?, ?, ?, ?)`),
		u.ID, u.Username, u.PasswordHash, boolInt(u.Admin), string(perms), created)
	if err != nil {
		return api.User{}, fmt.Errorf("create user %q: %w", u.Username, classify(err))
	}
	return u.User, nil
}

func (s *Store) GetUser(ctx context.Context, id string) (User, error) {
	return s.getUser(ctx, s.r, `id`, id)
}

// GetUserByName finds a user by name, ignoring ASCII case: usernames are unique
// case-insensitively (migration 0002), so "Alice" finds "alice".
func (s *Store) GetUserByName(ctx context.Context, username string) (User, error) {
	return s.getUser(ctx, s.r, `lower(username)`, strings.ToLower(username))
}

func (s *Store) getUser(ctx context.Context, q queryer, col, val string) (User, error) {
	u, err := scanUser(q.QueryRowContext(ctx, s.rebind(`SELECT `+userCols+` FROM users WHERE `+col+` = ?`), val))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("user %q: %w", val, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("get user %q: %w", val, err)
	}
	return u, nil
}

// ListUsers lists every user, oldest first.
func (s *Store) ListUsers(ctx context.Context) ([]api.User, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+userCols+` FROM users ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []api.User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u.User)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// UpdateUser applies the non-nil fields of u and returns the updated user.
func (s *Store) UpdateUser(ctx context.Context, id string, u UserUpdate) (api.User, error) {
	var sets []string
	var args []any
	if u.PasswordHash != nil {
		sets, args = append(sets, `password_hash = ?`), append(args, *u.PasswordHash)
	}
	if u.Admin != nil {
		sets, args = append(sets, `admin = ?`), append(args, boolInt(*u.Admin))
	}
	if u.Permissions != nil {
		perms, err := json.Marshal(*u.Permissions)
		if err != nil {
			return api.User{}, fmt.Errorf("update user: %w", err)
		}
		sets, args = append(sets, `permissions = ?`), append(args, string(perms))
	}
	var out User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if len(sets) > 0 {
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE users SET `+strings.Join(sets, ", ")+` WHERE id = ?`), append(args, id)...)
			if err != nil {
				return fmt.Errorf("update user %q: %w", id, classify(err))
			}
			if n, err := res.RowsAffected(); err == nil && n == 0 {
				return fmt.Errorf("user %q: %w", id, ErrNotFound)
			}
		}
		var err error
		out, err = s.getUser(ctx, tx, `id`, id)
		return err
	})
	if err != nil {
		return api.User{}, err
	}
	return out.User, nil
}

// DeleteUser also deletes the user's sessions; their agents are deleted too
// (and those agents' tokens). Audit rows stay.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	return s.deleteOne(ctx, "user", `DELETE FROM users WHERE id = ?`, id)
}

func (s *Store) deleteOne(ctx context.Context, what, query string, args ...any) error {
	res, err := s.w.ExecContext(ctx, s.rebind(query), args...)
	if err != nil {
		return fmt.Errorf("delete %s %v: %w", what, args, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete %s %v: %w", what, args, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %v: %w", what, args, ErrNotFound)
	}
	return nil
}

// ---- sessions ----

// CreateSession stores a session keyed by the SHA-256 of the cookie value.
// It also purges expired sessions. An unknown userID is ErrNotFound.
func (s *Store) CreateSession(ctx context.Context, userID string, hash []byte, expires time.Time) error {
	key, err := hashKey(hash)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	now := s.nowMicro()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE expires_at <= ?`), now); err != nil {
			return fmt.Errorf("purge sessions: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO sessions (hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`),
			key, userID, now, expires.UnixMicro())
		if err != nil {
			return fmt.Errorf("create session for user %q: %w", userID, classify(err))
		}
		return nil
	})
}

// GetSession returns ErrNotFound for unknown or expired sessions.
func (s *Store) GetSession(ctx context.Context, hash []byte) (userID string, err error) {
	key, err := hashKey(hash)
	if err != nil {
		return "", fmt.Errorf("session: %w", ErrNotFound)
	}
	err = s.r.QueryRowContext(ctx, s.rebind(`SELECT user_id FROM sessions WHERE hash = ? AND expires_at > ?`),
		key, s.now().UnixMicro()).Scan(&userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get session: %w", err)
	}
	return userID, nil
}

// DeleteSession deletes one session (logout); deleting an unknown session is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	key, err := hashKey(hash)
	if err != nil {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE hash = ?`), key); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteUserSessions deletes every session of the user except the one with hash keep (nil: all).
func (s *Store) DeleteUserSessions(ctx context.Context, userID string, keep []byte) error {
	var err error
	if len(keep) == 0 {
		_, err = s.w.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE user_id = ?`), userID)
	} else {
		_, err = s.w.ExecContext(ctx, s.rebind(`DELETE FROM sessions WHERE user_id = ? AND hash <> ?`), userID, hex.EncodeToString(keep))
	}
	if err != nil {
		return fmt.Errorf("delete sessions of user %q: %w", userID, err)
	}
	return nil
}

// ---- agents ----

const agentSelect = `SELECT a.id, a.name, a.owner_id, u.username, a.backend, a.share, a.created_at
FROM agents a JOIN users u ON u.id = a.owner_id`

func scanAgent(r rowScanner) (api.Agent, error) {
	var a api.Agent
	var backend, share string
	var created int64
	if err := r.Scan(&a.ID, &a.Name, &a.OwnerID, &a.Owner, &backend, &share, &created); err != nil {
		return api.Agent{}, err
	}
	a.Share = api.Level(share)
	a.CreatedAt = fromMicro(created)
	if err := json.Unmarshal([]byte(backend), &a.Backend); err != nil {
		return api.Agent{}, fmt.Errorf("agent %s: backend: %w", a.ID, err)
	}
	return a, nil
}

// CreateAgent fills ID, CreatedAt and Owner (username) from a.OwnerID.
// An unknown owner is ErrNotFound.
func (s *Store) CreateAgent(ctx context.Context, a api.Agent) (api.Agent, error) {
	return s.CreateAgentWithin(ctx, a, 0)
}

// CreateAgentWithin is CreateAgent that refuses with ErrQuota when the owner already has
// maxPerOwner agents (0 = no limit). The count and the insert are one transaction, serialized
// per owner (BEGIN IMMEDIATE on SQLite, a row lock on the owner on PostgreSQL), so parallel
// creates — from several gateways too — cannot overshoot.
func (s *Store) CreateAgentWithin(ctx context.Context, a api.Agent, maxPerOwner int) (api.Agent, error) {
	a.ID = newID()
	created := s.nowMicro()
	backend, err := json.Marshal(a.Backend)
	if err != nil {
		return api.Agent{}, fmt.Errorf("create agent: %w", err)
	}
	var out api.Agent
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if maxPerOwner > 0 {
			if s.kind == KindPostgres {
				var id string
				err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE id = $1 FOR UPDATE`, a.OwnerID).Scan(&id)
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("create agent %q: owner %q: %w", a.Name, a.OwnerID, ErrNotFound)
				} else if err != nil {
					return fmt.Errorf("create agent %q: lock owner: %w", a.Name, err)
				}
			}
			var n int
			if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM agents WHERE owner_id = ?`), a.OwnerID).Scan(&n); err != nil {
				return fmt.Errorf("create agent %q: count the owner's agents: %w", a.Name, err)
			}
			if n >= maxPerOwner {
				return fmt.Errorf("create agent %q: the owner has %d agents (max %d): %w", a.Name, n, maxPerOwner, ErrQuota)
			}
		}
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO agents (id, owner_id, name, backend, share, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
			a.ID, a.OwnerID, a.Name, string(backend), string(a.Share), created)
		if err != nil {
			return fmt.Errorf("create agent %q of user %q: %w", a.Name, a.OwnerID, classify(err))
		}
		out, err = s.getAgent(ctx, tx, a.ID)
		return err
	})
	if err != nil {
		return api.Agent{}, err
	}
	return out, nil
}

func (s *Store) GetAgent(ctx context.Context, id string) (api.Agent, error) {
	return s.getAgent(ctx, s.r, id)
}

func (s *Store) getAgent(ctx context.Context, q queryer, id string) (api.Agent, error) {
	a, err := scanAgent(q.QueryRowContext(ctx, s.rebind(agentSelect+` WHERE a.id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return api.Agent{}, fmt.Errorf("agent %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return api.Agent{}, fmt.Errorf("get agent %q: %w", id, err)
	}
	return a, nil
}

// ListAgents lists every agent, oldest first.
func (s *Store) ListAgents(ctx context.Context) ([]api.Agent, error) {
	rows, err := s.r.QueryContext(ctx, agentSelect+` ORDER BY a.created_at, a.id`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	out := []api.Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}

// UpdateAgent applies the non-nil fields of u and returns the updated agent.
func (s *Store) UpdateAgent(ctx context.Context, id string, u AgentUpdate) (api.Agent, error) {
	var sets []string
	var args []any
	if u.Name != nil {
		sets, args = append(sets, `name = ?`), append(args, *u.Name)
	}
	if u.Backend != nil {
		b, err := json.Marshal(*u.Backend)
		if err != nil {
			return api.Agent{}, fmt.Errorf("update agent: %w", err)
		}
		sets, args = append(sets, `backend = ?`), append(args, string(b))
	}
	if u.Share != nil {
		sets, args = append(sets, `share = ?`), append(args, string(*u.Share))
	}
	var out api.Agent
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if len(sets) > 0 {
			res, err := tx.ExecContext(ctx, s.rebind(`UPDATE agents SET `+strings.Join(sets, ", ")+` WHERE id = ?`), append(args, id)...)
			if err != nil {
				return fmt.Errorf("update agent %q: %w", id, classify(err))
			}
			if n, err := res.RowsAffected(); err == nil && n == 0 {
				return fmt.Errorf("agent %q: %w", id, ErrNotFound)
			}
		}
		var err error
		out, err = s.getAgent(ctx, tx, id)
		return err
	})
	if err != nil {
		return api.Agent{}, err
	}
	return out, nil
}

// DeleteAgent also deletes the agent's tokens. Audit rows stay.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	return s.deleteOne(ctx, "agent", `DELETE FROM agents WHERE id = ?`, id)
}

// ---- agent tokens ----

// CreateToken stores a token keyed by the SHA-256 of the secret (the caller
// fills Secret in the response). An unknown agent is ErrNotFound; a hash
// already in use is ErrConflict.
func (s *Store) CreateToken(ctx context.Context, agentID string, hash []byte) (api.Token, error) {
	key, err := hashKey(hash)
	if err != nil {
		return api.Token{}, fmt.Errorf("create token: %w", err)
	}
	t := api.Token{ID: newID(), AgentID: agentID}
	created := s.nowMicro()
	t.CreatedAt = fromMicro(created)
	_, err = s.w.ExecContext(ctx, s.rebind(`INSERT INTO agent_tokens (id, agent_id, hash, created_at) VALUES (?, ?, ?, ?)`),
		t.ID, agentID, key, created)
	if err != nil {
		return api.Token{}, fmt.Errorf("create token for agent %q: %w", agentID, classify(err))
	}
	return t, nil
}

// GetToken returns ErrNotFound for unknown or revoked tokens.
func (s *Store) GetToken(ctx context.Context, hash []byte) (api.Token, error) {
	key, err := hashKey(hash)
	if err != nil {
		return api.Token{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	var t api.Token
	var created int64
	err = s.r.QueryRowContext(ctx, s.rebind(`SELECT id, agent_id, created_at FROM agent_tokens WHERE hash = ?`), key).
		Scan(&t.ID, &t.AgentID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return api.Token{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return api.Token{}, fmt.Errorf("get token: %w", err)
	}
	t.CreatedAt = fromMicro(created)
	return t, nil
}

// ListTokens lists the agent's tokens, oldest first (never their secrets).
func (s *Store) ListTokens(ctx context.Context, agentID string) ([]api.Token, error) {
	rows, err := s.r.QueryContext(ctx, s.rebind(`SELECT id, agent_id, created_at FROM agent_tokens WHERE agent_id = ? ORDER BY created_at, id`), agentID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []api.Token{}
	for rows.Next() {
		var t api.Token
		var created int64
		if err := rows.Scan(&t.ID, &t.AgentID, &created); err != nil {
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

// DeleteToken revokes a token of the agent; ErrNotFound when the agent has no such token.
func (s *Store) DeleteToken(ctx context.Context, agentID, tokenID string) error {
	return s.deleteOne(ctx, "token", `DELETE FROM agent_tokens WHERE agent_id = ? AND id = ?`, agentID, tokenID)
}

// ---- audit ----

// AppendAudit stores e (ID and, when zero, Time are filled in). IDs increase
// in commit order on both databases.
func (s *Store) AppendAudit(ctx context.Context, e api.AuditEvent) error {
	at := s.nowMicro()
	if !e.Time.IsZero() {
		at = e.Time.UnixMicro()
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var id int64
		if err := tx.QueryRowContext(ctx, `UPDATE counters SET value = value + 1 WHERE name = 'audit' RETURNING value`).Scan(&id); err != nil {
			return fmt.Errorf("append audit: next id: %w", err)
		}
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO audit (id, created_at, actor, action, agent_id, surface, mode, detail, remote)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			id, at, e.Actor, e.Action, e.AgentID, string(e.Surface), string(e.Mode), e.Detail, e.Remote)
		if err != nil {
			return fmt.Errorf("append audit %s: %w", e.Action, err)
		}
		return nil
	})
}

// ListAudit returns events matching f, newest first (ListAuditQuery without the other filters).
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]api.AuditEvent, error) {
	return s.ListAuditQuery(ctx, AuditQuery{AuditFilter: f})
}
