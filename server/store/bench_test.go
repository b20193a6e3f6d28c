package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// openBench opens a fresh store of the given kind for a benchmark.
func openBench(b *testing.B, kind string) *Store {
	b.Helper()
	var db testDB
	if kind == KindSQLite {
		db = testDB{kind: kind, dataDir: b.TempDir()}
	} else {
		db = newTestDB(b, kind)
	}
	s, err := Open(context.Background(), db.dsn, db.dataDir)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendAudit measures concurrent audit writes (every surface attach
// writes one), i.e. the single-writer path on SQLite.
func BenchmarkAppendAudit(b *testing.B) {
	for _, kind := range []string{KindSQLite, KindPostgres} {
		b.Run(kind, func(b *testing.B) {
			s := openBench(b, kind)
			ctx := context.Background()
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.AppendAudit(ctx, api.AuditEvent{Actor: "bench", Action: "surface.attach", AgentID: "a"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}

// BenchmarkGetSession measures the session lookup every authenticated request does.
func BenchmarkGetSession(b *testing.B) {
	for _, kind := range []string{KindSQLite, KindPostgres} {
		b.Run(kind, func(b *testing.B) {
			s := openBench(b, kind)
			ctx := context.Background()
			u := mustUser(b, s, "alice")
			hashes := make([][]byte, 64)
			for i := range hashes {
				hashes[i] = randHash(b)
				if err := s.CreateSession(ctx, u.ID, hashes[i], time.Now().Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := s.GetSession(ctx, hashes[i%len(hashes)]); err != nil {
						b.Error(fmt.Errorf("GetSession: %w", err))
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
		})
	}
}
