package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// blockingBridge holds every exec until release is closed, counting how many run at once.
type blockingBridge struct {
	*fakeBridge
	release chan struct{}
	mu      sync.Mutex
	running int
	peak    int
}

func (b *blockingBridge) Exec(ctx context.Context, a api.Agent, req api.ExecRequest) (api.ExecResult, error) {
	b.mu.Lock()
	b.running++
	b.peak = max(b.peak, b.running)
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.running--; b.mu.Unlock() }()
	select {
	case <-b.release:
	case <-ctx.Done():
		return api.ExecResult{}, ctx.Err()
	}
	return b.fakeBridge.Exec(ctx, a, req)
}

// TestExecCaps (item 2, row 7): concurrent execs are capped per agent (whoever runs them,
// admins too) and per user, before the backend is asked: over a cap is 429 with Retry-After
// and a message naming it; an admin is not held to the per-user cap; slots free up when execs end.
func TestExecCaps(t *testing.T) {
	bb := &blockingBridge{release: make(chan struct{})}
	e := newEnv(t, func(c *Config) {
		bb.fakeBridge = c.Bridge.(*fakeBridge)
		c.Bridge = bb
		c.Quotas = Quotas{ExecsPerAgent: 3, ExecsPerUser: 4}
	})
	owner := e.session(e.users["owner"].ID)
	admin := e.session(e.users["admin"].ID)
	a1 := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	a2 := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	a3 := e.addAgent("admin", api.LevelNone, api.BackendBwrap)
	type result struct {
		code       int
		msg, retry string
	}
	var wg sync.WaitGroup
	results := make(chan result, 100)
	exec := func(agent, ck string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, out := e.do("POST", "/api/agents/"+agent+"/exec", api.ExecRequest{Command: []string{"true"}}, auth{cookie: ck})
			results <- result{resp.StatusCode, errMsg(out), resp.Header.Get("Retry-After")}
		}()
	}
	running := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			bb.mu.Lock()
			r := bb.running
			bb.mu.Unlock()
			if r == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d execs running, want %d", r, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	refused := func(what, want string) {
		t.Helper()
		select {
		case r := <-results:
			if r.code != 429 || !strings.Contains(r.msg, want) || r.retry == "" {
				t.Errorf("%s = %d (%s, Retry-After %q), want 429 naming %q", what, r.code, r.msg, r.retry, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer", what)
		}
	}
	for range 3 {
		exec(a1.ID, owner)
	}
	running(3)
	exec(a1.ID, owner)
	refused("owner's 4th exec on a1", "max 3 per agent")
	exec(a1.ID, admin)
	refused("admin's exec on a full a1", "max 3 per agent")
	exec(a2.ID, owner)
	running(4)
	exec(a2.ID, owner)
	refused("owner's 5th exec overall", "max 4 per user")
	for range 3 {
		exec(a3.ID, admin)
	}
	running(7)
	close(bb.release)
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		if r.code != 200 {
			t.Errorf("a held exec = %d (%s), want 200", r.code, r.msg)
		}
		n++
	}
	if n != 7 || bb.peak != 7 {
		t.Errorf("%d execs completed, peak %d running, want 7 and 7", n, bb.peak)
	}
	// The slots are free again.
	if resp, out := e.do("POST", "/api/agents/"+a1.ID+"/exec", api.ExecRequest{Command: []string{"true"}}, auth{cookie: owner}); resp.StatusCode != 200 {
		t.Errorf("exec after the others ended = %d (%s)", resp.StatusCode, errMsg(out))
	}
}

// TestConfiguredLimitsAndQuotas: the limit policy and the agent quota come from Config; a
// policy whose default is above its maximum is refused at New.
func TestConfiguredLimitsAndQuotas(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits = LimitPolicy{Default: api.Limits{Pids: 100}, Max: api.Limits{Pids: 200}}
		c.Quotas.AgentsPerUser = 2
	})
	owner, admin := e.session(e.users["owner"].ID), e.session(e.users["admin"].ID)
	create := func(ck string, pids int) (int, string) {
		resp, out := e.do("POST", "/api/agents", api.CreateAgentRequest{Name: e.uniq("c"), Backend: api.Backend{Type: api.BackendBwrap, Limits: api.Limits{Pids: pids}}}, auth{cookie: ck})
		return resp.StatusCode, errMsg(out)
	}
	for _, c := range []struct {
		ck   string
		pids int
		want int
		msg  string
	}{
		{owner, 101, 403, "above the server default 100"},
		{owner, 100, 201, ""},
		{admin, 201, 403, "maximum 200"},
		{admin, 200, 201, ""},
		{owner, 0, 201, ""},
		{owner, 0, 403, "max 2 per user"},
	} {
		if code, msg := create(c.ck, c.pids); code != c.want || !strings.Contains(msg, c.msg) {
			t.Errorf("create with pids %d = %d (%s), want %d %q", c.pids, code, msg, c.want, c.msg)
		}
	}
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), Bridge: &fakeBridge{}, Surfaces: fakeTerminal(&fakeTerms{}),
		Limits: LimitPolicy{Default: api.Limits{MemoryMiB: 4096}, Max: api.Limits{MemoryMiB: 1024}}})
	if err == nil || !strings.Contains(err.Error(), "default memory_mib 4096 is above the max 1024") {
		t.Errorf("New with default above max = %v, want an error naming both", err)
	}
	if _, err := New(context.Background(), Config{DataDir: t.TempDir(), Bridge: &fakeBridge{}, Surfaces: fakeTerminal(&fakeTerms{}), AllowedHosts: []string{"http://x"}}); err == nil {
		t.Errorf("New with an allowed host that is a URL: want an error")
	}
}

// TestAllowedHostConfigured: --allowed-host and the hosts of --allowed-origin are served;
// "*" serves any Host.
func TestAllowedHostConfigured(t *testing.T) {
	for _, c := range []struct {
		hosts, origins []string
		host           string
		want           int
	}{
		{[]string{"porthole.example"}, nil, "porthole.example:8443", 200},
		{[]string{"porthole.example"}, nil, "PORTHOLE.example.", 200},
		{[]string{"porthole.example"}, nil, "other.example", 421},
		{nil, []string{"https://gw.example:8443"}, "gw.example", 200},
		{[]string{"*"}, nil, "anything.example", 200},
	} {
		e := newEnv(t, func(cfg *Config) { cfg.AllowedHosts, cfg.AllowedOrigins = c.hosts, c.origins })
		r, _ := newRequest("GET", e.ts.URL+"/healthz", c.host)
		resp, err := e.ts.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("allowed hosts %q, origins %q: Host %q = %d, want %d", c.hosts, c.origins, c.host, resp.StatusCode, c.want)
		}
	}
}

func newRequest(method, url, host string) (*http.Request, error) {
	r, err := http.NewRequest(method, url, nil)
	if err == nil {
		r.Host = host
	}
	return r, err
}
