package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered SQL file from migrations/, e.g. 0001_init.sql.
type migration struct {
	version    int64
	name       string
	statements []string
}

// loadMigrations parses the embedded migrations, ordered by version.
func loadMigrations() ([]migration, error) {
	return parseMigrations(migrationFS, "migrations")
}

func parseMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	seen := map[int64]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		stmts := splitStatements(string(body))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("migration %s: no statements", name)
		}
		ms = append(ms, migration{version: v, name: name, statements: stmts})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// splitStatements splits a migration into statements: "--" comment lines are
// dropped and a statement ends with a line ending in ";". Migrations must not
// put a semicolon at the end of a line inside a string literal.
func splitStatements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// migrateLockKey is the PostgreSQL advisory lock key space for migrations; the
// schema name is mixed in so that gateways using different schemas do not wait for each other.
const migrateLockKey = "porthole.migrate."

// migrate applies every pending migration. It is safe when several gateways
// open the same database at once: on PostgreSQL they serialize on an advisory
// lock; on SQLite each migration runs in a BEGIN IMMEDIATE transaction that
// re-checks whether it was applied meanwhile.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()

	if s.kind == KindPostgres {
		if _, err := conn.ExecContext(ctx,
			`SELECT pg_advisory_lock(hashtext($1 || COALESCE(current_schema(), '')))`, migrateLockKey); err != nil {
			return fmt.Errorf("migrate: advisory lock: %w", err)
		}
		defer func() {
			// A fresh context: the lock must be released even when ctx is done.
			// If unlocking fails the connection is discarded, which releases it.
			if _, err := conn.ExecContext(context.Background(),
				`SELECT pg_advisory_unlock(hashtext($1 || COALESCE(current_schema(), '')))`, migrateLockKey); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT NOT NULL PRIMARY KEY,
    name       TEXT   NOT NULL,
    applied_at BIGINT NOT NULL
)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}

	var newest sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if latest := ms[len(ms)-1].version; newest.Valid && newest.Int64 > latest {
		return fmt.Errorf("migrate: %w: database schema version %d is newer than this binary's %d",
			ErrSchemaTooNew, newest.Int64, latest)
	}

	for _, m := range ms {
		if err := s.applyMigration(ctx, conn, m); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration runs m in one transaction unless it is already recorded.
func (s *Store) applyMigration(ctx context.Context, conn *sql.Conn, m migration) (err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", m.name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if n > 0 {
		return tx.Rollback()
	}
	for i, stmt := range m.statements {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate %s: statement %d: %w", m.name, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, s.nowMicro()); err != nil {
		return fmt.Errorf("migrate %s: record: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", m.name, err)
	}
	return nil
}

// SchemaVersion returns the newest applied migration (0 for an empty database).
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v.Int64, nil
}

// LatestSchemaVersion is the newest migration this binary knows.
func LatestSchemaVersion() int64 {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}
