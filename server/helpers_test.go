package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// fakeBridge records what the gateway asks of the backends.
type fakeBridge struct {
	mu      sync.Mutex
	execErr error
	execs   []string // agent ids
	forgot  []string // "id purge=bool"
	closed  bool
	probes  []bridges.ProbeResult
}

func (b *fakeBridge) Probe(ctx context.Context) []bridges.ProbeResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.probes
}

func (b *fakeBridge) Exec(ctx context.Context, a api.Agent, req api.ExecRequest) (api.ExecResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.execs = append(b.execs, a.ID)
	if b.execErr != nil {
		return api.ExecResult{}, b.execErr
	}
	return api.ExecResult{ExitCode: 0, Stdout: "ran " + strings.Join(req.Command, " ") + " in " + a.ID}, nil
}

func (b *fakeBridge) Forget(ctx context.Context, id string, purge bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgot = append(b.forgot, fmt.Sprintf("%s purge=%v", id, purge))
	return nil
}

func (b *fakeBridge) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// fakeTerms greets each viewer with "viewer <name> mode <mode>" and then reads until
// the client leaves or ctx ends; it is the only writer of ws.
type fakeTerms struct {
	mu           sync.Mutex
	viewers      []terminal.Viewer
	closedAgents []string
	closed       bool
}

func (f *fakeTerms) Serve(ctx context.Context, ws *websocket.Conn, a api.Agent, v terminal.Viewer) error {
	f.mu.Lock()
	f.viewers = append(f.viewers, v)
	f.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ws.Close() }) // unblocks the read loop below
	defer stop()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf("viewer %s mode %s", v.Name, v.Mode))); err != nil {
		return err
	}
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			return err
		}
	}
}

func (f *fakeTerms) CloseAgent(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedAgents = append(f.closedAgents, id)
}

func (f *fakeTerms) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

func (f *fakeTerms) Routes() []surface.Route { return nil }

// fakeTerminal registers f as the terminal surface's gateway half.
func fakeTerminal(f *fakeTerms) []surface.Description {
	return []surface.Description{{Name: api.SurfaceTerminal,
		Gateway: func(surface.Env) (surface.Gateway, error) { return f, nil }}}
}

// fakeClock is a settable clock for the login limiter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const (
	adminPassword = "admin-password-1"
	userPassword  = "user-password-1"
)

// testUserHash is one argon2id hash of userPassword shared by the fixture users (hashing is slow under -race).
var testUserHash = sync.OnceValue(func() string {
	h, err := hashPassword(userPassword)
	if err != nil {
		panic(err)
	}
	return h
})

// env is a gateway on a real TCP listener with an SQLite store in t.TempDir().
type env struct {
	t      testing.TB
	srv    *Server
	ts     *httptest.Server
	bridge *fakeBridge
	terms  *fakeTerms
	clock  *fakeClock
	users  map[string]api.User // admin, owner, other, watcher, driver
	seq    atomic.Int64
	logs   *bytes.Buffer
}

type envOption func(*Config)

func newEnv(t testing.TB, opts ...envOption) *env {
	return newEnvTLS(t, false, opts...)
}

func newEnvTLS(t testing.TB, tls bool, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, bridge: &fakeBridge{probes: []bridges.ProbeResult{
		{Backend: "bwrap", OK: true, Detail: "fake"},
		{Backend: "container", OK: false, Detail: "engine down (fake)"},
	}}, terms: &fakeTerms{}, clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}, users: map[string]api.User{},
		logs: &bytes.Buffer{}}
	cfg := Config{
		DataDir:       t.TempDir(),
		AdminPassword: adminPassword,
		Logger:        slog.New(slog.NewTextHandler(&lockedWriter{w: e.logs}, nil)),
		Bridge:        e.bridge,
		Surfaces:      fakeTerminal(e.terms),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.now = e.clock.Now
	e.srv = srv
	if tls {
		e.ts = httptest.NewTLSServer(srv.Handler())
	} else {
		e.ts = httptest.NewServer(srv.Handler())
	}
	t.Cleanup(func() {
		e.ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	admin, err := srv.st.GetUserByName(context.Background(), "admin")
	if err != nil {
		t.Fatalf("admin user: %v", err)
	}
	e.users["admin"] = admin.User
	for _, name := range []string{"owner", "other", "watcher", "driver"} {
		e.users[name] = e.addUser(name, false)
	}
	return e
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) addUser(name string, admin bool) api.User {
	e.t.Helper()
	u, err := e.srv.st.CreateUser(e.ctx(), store.User{User: api.User{Username: name, Admin: admin,
		Permissions: api.DefaultPermissions}, PasswordHash: testUserHash()})
	if err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

func (e *env) uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, e.seq.Add(1)) }

// session creates a session for the user directly in the store and returns the cookie value.
func (e *env) session(userID string) string {
	e.t.Helper()
	v := newSecret()
	if err := e.srv.st.CreateSession(e.ctx(), userID, sha(v), time.Now().Add(time.Hour)); err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	return v
}

func (e *env) addAgent(owner string, share api.Level, backend string) api.Agent {
	e.t.Helper()
	a, err := e.srv.st.CreateAgent(e.ctx(), api.Agent{Name: e.uniq("agent"), OwnerID: e.users[owner].ID,
		Backend: api.Backend{Type: backend, Network: api.NetworkNone}, Share: share})
	if err != nil {
		e.t.Fatalf("create agent: %v", err)
	}
	return a
}

func (e *env) addToken(agentID string) (api.Token, string) {
	e.t.Helper()
	secret := TokenPrefix + newSecret()
	tok, err := e.srv.st.CreateToken(e.ctx(), agentID, sha(secret))
	if err != nil {
		e.t.Fatalf("create token: %v", err)
	}
	return tok, secret
}

// auth is how a request authenticates.
type auth struct {
	cookie string // session cookie value
	bearer string // agent token
	origin string
	xff    string
}

func (e *env) do(method, path string, body any, a auth) (*http.Response, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	a.apply(req.Header)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, out
}

func (a auth) apply(h http.Header) {
	if a.cookie != "" {
		h.Set("Cookie", SessionCookie+"="+a.cookie)
	}
	if a.bearer != "" {
		h.Set("Authorization", "Bearer "+a.bearer)
	}
	if a.origin != "" {
		h.Set("Origin", a.origin)
	}
	if a.xff != "" {
		h.Set("X-Forwarded-For", a.xff)
	}
}

// dialWS opens a WebSocket; on a refused handshake it returns the status and body.
func (e *env) dialWS(path string, a auth) (*websocket.Conn, int, []byte) {
	e.t.Helper()
	h := http.Header{}
	a.apply(h)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, TLSClientConfig: tlsConfigOf(e.ts)}
	url := "ws" + strings.TrimPrefix(e.ts.URL, "http") + path
	ws, resp, err := d.Dial(url, h)
	if err != nil {
		if resp == nil {
			e.t.Fatalf("dial %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, b
	}
	e.t.Cleanup(func() { ws.Close() })
	return ws, resp.StatusCode, nil
}

func errMsg(body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) != nil {
		return "(not a JSON error: " + string(body) + ")"
	}
	return e.Error
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, body, err)
	}
	return v
}

// audits returns every audit event, newest first.
func (e *env) audits() []api.AuditEvent {
	e.t.Helper()
	evs, err := e.srv.st.ListAudit(e.ctx(), store.AuditFilter{Limit: 1000})
	if err != nil {
		e.t.Fatalf("list audit: %v", err)
	}
	return evs
}

func tlsConfigOf(ts *httptest.Server) *tls.Config {
	if tr, ok := ts.Client().Transport.(*http.Transport); ok {
		return tr.TLSClientConfig
	}
	return nil
}

func storeUserPerms(p api.Permissions) store.UserUpdate { return store.UserUpdate{Permissions: &p} }

func newHTTPTestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }
