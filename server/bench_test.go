package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// BenchmarkPasswordVerify: the cost of one login's argon2id check (m=19 MiB, t=2, p=1).
func BenchmarkPasswordVerify(b *testing.B) {
	h, err := hashPassword("benchmark-password")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if ok, err := verifyPassword(h, "benchmark-password"); !ok || err != nil {
			b.Fatalf("verify = %v, %v", ok, err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/verify")
}

// BenchmarkAuthorizedGetAgent: one authenticated, authorized API request end to end over
// loopback HTTP (cookie lookup, agent load, permission check, JSON).
func BenchmarkAuthorizedGetAgent(b *testing.B) {
	e := newEnv(b)
	a := e.addAgent("owner", api.LevelWatch, api.BackendBwrap)
	ck := e.session(e.users["watcher"].ID)
	req, _ := http.NewRequest("GET", e.ts.URL+"/api/agents/"+a.ID, nil)
	req.Header.Set("Cookie", SessionCookie+"="+ck)
	client := e.ts.Client()
	start := time.Now()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET agent: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "req/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/req")
}
