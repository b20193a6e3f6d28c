package server

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

// TestForeignOrigin: a foreign Origin on a POST and on a WebSocket upgrade gets 403, even
// with a valid session; same-origin, a configured origin and no Origin pass.
func TestForeignOrigin(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{"https://porthole.example:8443"} })
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	ck := e.session(e.users["owner"].ID)
	self := e.ts.URL // http://127.0.0.1:port: same host as the request's Host
	body := func() any { return api.CreateAgentRequest{Name: e.uniq("o"), Backend: api.Backend{Type: "bwrap"}} }
	cases := []struct {
		origin string
		want   int
	}{
		{"http://evil.example", 403},
		{"null", 403},
		{strings.Replace(self, "127.0.0.1", "localhost", 1), 403}, // another host is another origin
		{"https://porthole.example:8443", 201},
		{self, 201},
		{"", 201},
	}
	for _, c := range cases {
		resp, out := e.do("POST", "/api/agents", body(), auth{cookie: ck, origin: c.origin})
		if resp.StatusCode != c.want {
			t.Errorf("POST /api/agents with Origin %q = %d (%s), want %d", c.origin, resp.StatusCode, errMsg(out), c.want)
		}
	}
	// Every state-changing method is checked, not only POST.
	for _, m := range []string{"PATCH", "DELETE"} {
		resp, out := e.do(m, "/api/agents/"+a.ID, map[string]any{}, auth{cookie: ck, origin: "http://evil.example"})
		if resp.StatusCode != 403 {
			t.Errorf("%s /api/agents/:id with a foreign Origin = %d (%s), want 403", m, resp.StatusCode, errMsg(out))
		}
	}
	if _, err := e.srv.st.GetAgent(e.ctx(), a.ID); err != nil {
		t.Errorf("agent gone after a refused cross-origin DELETE: %v", err)
	}
	wsCases := []struct {
		origin string
		want   int
	}{
		{"http://evil.example", 403},
		{self, 101},
		{"", 101},
	}
	for _, c := range wsCases {
		_, got, b := e.dialWS("/api/agents/"+a.ID+"/terminal", auth{cookie: ck, origin: c.origin})
		if got != c.want {
			t.Errorf("WS upgrade with Origin %q = %d (%s), want %d", c.origin, got, errMsg(b), c.want)
		}
	}
	viewers := func() int {
		e.terms.mu.Lock()
		defer e.terms.mu.Unlock()
		return len(e.terms.viewers)
	}
	waitFor(t, "two viewers", func() bool { return viewers() >= 2 })
	if n := viewers(); n != 2 {
		t.Errorf("terminal service saw %d viewers, want 2 (the foreign one must not reach it)", n)
	}
}

// TestMissingOrForgedCredentials: no cookie, a forged cookie, a logged-out cookie, an expired
// session and a forged bearer all get 401 JSON.
func TestMissingOrForgedCredentials(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	loggedOut := e.session(e.users["owner"].ID)
	if resp, _ := e.do("DELETE", "/api/session", nil, auth{cookie: loggedOut}); resp.StatusCode != 204 {
		t.Fatalf("logout = %d", resp.StatusCode)
	}
	expired := newSecret()
	if err := e.srv.st.CreateSession(e.ctx(), e.users["owner"].ID, sha(expired), time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a    auth
	}{
		{"no cookie", auth{}},
		{"forged cookie", auth{cookie: newSecret()}},
		{"garbage cookie", auth{cookie: "x"}},
		{"logged-out cookie", auth{cookie: loggedOut}},
		{"expired session", auth{cookie: expired}},
		{"forged token", auth{bearer: TokenPrefix + newSecret()}},
		{"token without prefix", auth{bearer: newSecret()}},
	}
	for _, c := range cases {
		for _, path := range []string{"/api/me", "/api/agents/" + a.ID} {
			resp, out := e.do("GET", path, nil, c.a)
			if resp.StatusCode != 401 || errMsg(out) == "" || strings.HasPrefix(errMsg(out), "(not") {
				t.Errorf("GET %s with %s = %d %s, want 401 with a JSON error", path, c.name, resp.StatusCode, out)
			}
		}
		if _, got, _ := e.dialWS("/api/agents/"+a.ID+"/terminal", c.a); got != 401 {
			t.Errorf("WS with %s = %d, want 401", c.name, got)
		}
	}
	// A stale cookie does not prevent logging in again.
	resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "owner", Password: userPassword}, auth{cookie: loggedOut})
	if resp.StatusCode != 200 {
		t.Errorf("login with a stale cookie = %d (%s), want 200", resp.StatusCode, errMsg(out))
	}
}

// TestLoginRateLimit: the 6th wrong password within a minute from one address gets 429 with
// Retry-After; rotating a spoofed X-Forwarded-For from an untrusted peer does not help; the
// block lifts after the window.
func TestLoginRateLimit(t *testing.T) {
	e := newEnv(t)
	bad := api.LoginRequest{Username: "owner", Password: "wrong-password"}
	for i := 1; i <= 5; i++ {
		resp, out := e.do("POST", "/api/session", bad, auth{xff: fmt.Sprintf("203.0.113.%d", i)})
		if resp.StatusCode != 401 {
			t.Fatalf("wrong password #%d = %d (%s), want 401", i, resp.StatusCode, errMsg(out))
		}
		e.clock.Add(time.Second)
	}
	resp, out := e.do("POST", "/api/session", bad, auth{xff: "203.0.113.99"})
	if resp.StatusCode != 429 {
		t.Fatalf("6th wrong password (spoofed X-Forwarded-For) = %d (%s), want 429", resp.StatusCode, errMsg(out))
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra != 55 {
		t.Errorf("Retry-After = %q, want 55 (failures at t=0..4 s, now t=5 s: the first leaves the 60 s window in 55 s)", resp.Header.Get("Retry-After"))
	}
	// Even the right password is refused while blocked: no guessing continues.
	if resp, _ := e.do("POST", "/api/session", api.LoginRequest{Username: "owner", Password: userPassword}, auth{}); resp.StatusCode != 429 {
		t.Errorf("right password while blocked = %d, want 429", resp.StatusCode)
	}
	e.clock.Add(55 * time.Second)
	if resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "owner", Password: userPassword}, auth{}); resp.StatusCode != 200 {
		t.Errorf("right password after the window = %d (%s), want 200", resp.StatusCode, errMsg(out))
	}
	var fails, limited float64
	_, m := e.do("GET", "/metrics", nil, auth{})
	fmt.Sscanf(metricLine(string(m), `porthole_logins_total{result="fail"}`), "%g", &fails)
	fmt.Sscanf(metricLine(string(m), `porthole_logins_total{result="limited"}`), "%g", &limited)
	if fails != 5 || limited != 2 {
		t.Errorf("logins metric fail=%v limited=%v, want 5 and 2", fails, limited)
	}
	n := 0
	for _, ev := range e.audits() {
		if ev.Action == "login.fail" {
			n++
			if ev.Remote != "127.0.0.1" {
				t.Errorf("login.fail audited from %q, want the real peer 127.0.0.1 (X-Forwarded-For is not trusted)", ev.Remote)
			}
		}
	}
	if n != 5 {
		t.Errorf("%d login.fail audit events, want 5", n)
	}
}

func metricLine(body, name string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	return ""
}

// TestLoginRateLimitTrustedProxy: behind a trusted proxy the forwarded client address is
// what is limited (and audited); another client behind the same proxy is not blocked.
// TestLoginRateLimitParallelBurst: 40 wrong passwords sent at once from one address get at
// most 5 password checks; the rest are refused with 429 before any check runs.
func TestLoginRateLimitParallelBurst(t *testing.T) {
	e := newEnv(t)
	bad := api.LoginRequest{Username: "owner", Password: "wrong-password"}
	const burst = 40
	codes := make(chan int, burst)
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := e.do("POST", "/api/session", bad, auth{})
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[401] > 5 || count[401]+count[429] != burst {
		t.Errorf("parallel burst of %d wrong passwords = %v, want at most 5 × 401 and the rest 429", burst, count)
	}
}

func TestLoginRateLimitTrustedProxy(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	bad := api.LoginRequest{Username: "owner", Password: "wrong-password"}
	for i := 1; i <= 5; i++ {
		if resp, _ := e.do("POST", "/api/session", bad, auth{xff: "198.51.100.7"}); resp.StatusCode != 401 {
			t.Fatalf("wrong password #%d = %d, want 401", i, resp.StatusCode)
		}
	}
	if resp, _ := e.do("POST", "/api/session", bad, auth{xff: "198.51.100.7"}); resp.StatusCode != 429 {
		t.Errorf("6th from the forwarded client = %d, want 429", resp.StatusCode)
	}
	// A client that prepends its own X-Forwarded-For entry is still identified by what the proxy appended.
	if resp, _ := e.do("POST", "/api/session", bad, auth{xff: "192.0.2.1, 198.51.100.7"}); resp.StatusCode != 429 {
		t.Errorf("spoofed extra hop before the real client = %d, want 429", resp.StatusCode)
	}
	if resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "owner", Password: userPassword}, auth{xff: "198.51.100.8"}); resp.StatusCode != 200 {
		t.Errorf("another client behind the proxy = %d (%s), want 200", resp.StatusCode, errMsg(out))
	}
	var remotes []string
	for _, ev := range e.audits() {
		if strings.HasPrefix(ev.Action, "login.") {
			remotes = append(remotes, ev.Action+"@"+ev.Remote)
		}
	}
	if len(remotes) != 6 || remotes[0] != "login.ok@198.51.100.8" || remotes[1] != "login.fail@198.51.100.7" {
		t.Errorf("login audit (newest first) = %v, want login.ok@198.51.100.8 then 5× login.fail@198.51.100.7", remotes)
	}
}

// TestClientAddr: X-Forwarded-For counts only from trusted peers, walked from the right.
func TestClientAddr(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}
	cases := []struct {
		peer, xff, want string
	}{
		{"192.0.2.5:1234", "", "192.0.2.5"},
		{"192.0.2.5:1234", "198.51.100.1", "192.0.2.5"},   // untrusted peer: header ignored
		{"127.0.0.1:1234", "198.51.100.1", "127.0.0.1"},   // loopback is not trusted unless configured
		{"10.1.2.3:1234", "198.51.100.1", "198.51.100.1"}, // trusted proxy
		{"10.1.2.3:1234", "203.0.113.9, 198.51.100.1", "198.51.100.1"},
		{"10.1.2.3:1234", "198.51.100.1, 10.9.9.9", "198.51.100.1"}, // two trusted hops
		{"10.1.2.3:1234", "garbage, 198.51.100.1", "198.51.100.1"},
		{"10.1.2.3:1234", "198.51.100.1, garbage", "10.1.2.3"}, // malformed last hop: stop at the proxy
		{"10.1.2.3:1234", "", "10.1.2.3"},
		{"[::1]:80", "2001:db8::1", "2001:db8::1"},
		{"[::ffff:192.0.2.5]:80", "198.51.100.1", "192.0.2.5"},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := s.clientAddr(r).String(); got != c.want {
			t.Errorf("clientAddr(peer %q, XFF %q) = %q, want %q", c.peer, c.xff, got, c.want)
		}
	}
}

// TestPasswordChangeRevokesOtherSessions: the caller's own session stays, the others end;
// an admin resetting someone's password ends all of theirs.
func TestPasswordChangeRevokesOtherSessions(t *testing.T) {
	e := newEnv(t)
	login := func(pw string) (string, int) {
		resp, _ := e.do("POST", "/api/session", api.LoginRequest{Username: "owner", Password: pw}, auth{})
		for _, c := range resp.Cookies() {
			if c.Name == SessionCookie {
				return c.Value, resp.StatusCode
			}
		}
		return "", resp.StatusCode
	}
	a, _ := login(userPassword)
	b, _ := login(userPassword)
	if a == "" || b == "" || a == b {
		t.Fatalf("two logins gave cookies %q and %q", a, b)
	}
	newPW, cur := "brand-new-password", userPassword
	resp, out := e.do("PATCH", "/api/users/"+e.users["owner"].ID, api.UpdateUserRequest{Password: &newPW, CurrentPassword: &cur}, auth{cookie: a})
	if resp.StatusCode != 200 {
		t.Fatalf("change own password = %d (%s)", resp.StatusCode, errMsg(out))
	}
	if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: a}); resp.StatusCode != 200 {
		t.Errorf("the session that changed the password = %d, want 200", resp.StatusCode)
	}
	if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: b}); resp.StatusCode != 401 {
		t.Errorf("the other session after a password change = %d, want 401", resp.StatusCode)
	}
	if _, st := login(userPassword); st != 401 {
		t.Errorf("login with the old password = %d, want 401", st)
	}
	c, st := login(newPW)
	if st != 200 {
		t.Fatalf("login with the new password = %d, want 200", st)
	}
	// A non-admin may not change someone else's password, nor their own admin flag.
	yes := true
	if resp, _ := e.do("PATCH", "/api/users/"+e.users["other"].ID, api.UpdateUserRequest{Password: &newPW}, auth{cookie: c}); resp.StatusCode != 403 {
		t.Errorf("change another user's password = %d, want 403", resp.StatusCode)
	}
	if resp, _ := e.do("PATCH", "/api/users/"+e.users["owner"].ID, api.UpdateUserRequest{Admin: &yes}, auth{cookie: c}); resp.StatusCode != 403 {
		t.Errorf("make oneself admin = %d, want 403", resp.StatusCode)
	}
	// Admin reset: every session of the user ends.
	reset := "admin-set-password"
	adm := auth{cookie: e.session(e.users["admin"].ID)}
	if resp, out := e.do("PATCH", "/api/users/"+e.users["owner"].ID, api.UpdateUserRequest{Password: &reset}, adm); resp.StatusCode != 200 {
		t.Fatalf("admin reset = %d (%s)", resp.StatusCode, errMsg(out))
	}
	for _, ck := range []string{a, c} {
		if resp, _ := e.do("GET", "/api/me", nil, auth{cookie: ck}); resp.StatusCode != 401 {
			t.Errorf("owner session after an admin reset = %d, want 401", resp.StatusCode)
		}
	}
	if resp, _ := e.do("GET", "/api/me", nil, adm); resp.StatusCode != 200 {
		t.Errorf("admin's own session after resetting another user = %d, want 200", resp.StatusCode)
	}
}

// TestCookieFlags: HttpOnly, SameSite=Strict, Path=/, Secure only under TLS; logout clears it.
func TestCookieFlags(t *testing.T) {
	for _, tls := range []bool{false, true} {
		e := newEnvTLS(t, tls)
		resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "admin", Password: adminPassword}, auth{})
		if resp.StatusCode != 200 {
			t.Fatalf("login (tls=%v) = %d (%s)", tls, resp.StatusCode, errMsg(out))
		}
		me := decode[api.Me](t, out)
		if me.Username != "admin" || !me.Admin {
			t.Errorf("login body = %+v, want admin", me)
		}
		raw := resp.Header.Get("Set-Cookie")
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == SessionCookie {
				ck = c
			}
		}
		if ck == nil {
			t.Fatalf("no %s cookie in %q", SessionCookie, raw)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure != tls {
			t.Errorf("cookie (tls=%v) %q: want HttpOnly, SameSite=Strict, Path=/, Secure=%v", tls, raw, tls)
		}
		if b, err := decodeB64(ck.Value); err != nil || len(b) != 32 {
			t.Errorf("cookie value %q: want 32 random bytes base64url (%v)", ck.Value, err)
		}
		// Stored as SHA-256, not in the clear: the store knows the hash, not the value.
		if _, err := e.srv.st.GetSession(e.ctx(), []byte(ck.Value)); err == nil {
			t.Errorf("the store finds the session by its plain cookie value; want only by SHA-256")
		}
		resp, _ = e.do("DELETE", "/api/session", nil, auth{cookie: ck.Value})
		if resp.StatusCode != 204 {
			t.Errorf("logout = %d", resp.StatusCode)
		}
		cleared := false
		for _, c := range resp.Cookies() {
			cleared = cleared || (c.Name == SessionCookie && c.MaxAge < 0)
		}
		if !cleared {
			t.Errorf("logout did not clear the cookie: %q", resp.Header.Get("Set-Cookie"))
		}
	}
}

// TestPasswordHashPHC: argon2id PHC strings with m ≥ 19 MiB, t ≥ 2, p ≥ 1, a random salt,
// verified only by the right password; weakened parameters are refused.
func TestPasswordHashPHC(t *testing.T) {
	e := newEnv(t)
	resp, out := e.do("POST", "/api/users", api.CreateUserRequest{Username: "carol", Password: "carol-password"}, auth{cookie: e.session(e.users["admin"].ID)})
	if resp.StatusCode != 201 {
		t.Fatalf("create user = %d (%s)", resp.StatusCode, errMsg(out))
	}
	if strings.Contains(string(out), "argon2") || strings.Contains(string(out), "carol-password") {
		t.Errorf("create response leaks the password or its hash: %s", out)
	}
	u, err := e.srv.st.GetUserByName(e.ctx(), "carol")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)
	m := re.FindStringSubmatch(u.PasswordHash)
	if m == nil {
		t.Fatalf("stored hash %q is not an argon2id PHC string", u.PasswordHash)
	}
	mem, _ := strconv.Atoi(m[1])
	tm, _ := strconv.Atoi(m[2])
	p, _ := strconv.Atoi(m[3])
	if mem < 19*1024 || tm < 2 || p < 1 {
		t.Errorf("argon2id parameters m=%d t=%d p=%d, want m>=19456 t>=2 p>=1", mem, tm, p)
	}
	cases := []struct {
		pw   string
		want bool
	}{{"carol-password", true}, {"carol-passwore", false}, {"", false}, {"Carol-password", false}}
	for _, c := range cases {
		if got, err := verifyPassword(u.PasswordHash, c.pw); got != c.want || err != nil {
			t.Errorf("verifyPassword(%q) = %v, %v; want %v", c.pw, got, err, c.want)
		}
	}
	h2, _ := hashPassword("carol-password")
	if h2 == u.PasswordHash {
		t.Errorf("two hashes of one password are equal: the salt is not random")
	}
	weak := strings.Replace(u.PasswordHash, "m="+m[1], "m=1024", 1)
	if ok, err := verifyPassword(weak, "carol-password"); ok || err == nil {
		t.Errorf("verifyPassword with m=1024 = %v, %v; want refused", ok, err)
	}
}

// TestSecurityHeaders: CSP (wasm-unsafe-eval, never unsafe-eval), nosniff, Referrer-Policy and
// frame denial on every kind of response.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/api/me", "/api/nope", "/healthz", "/", "/agents/x"} {
		resp, _ := e.do("GET", path, nil, auth{})
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if csp != contentSecurityPolicy {
			t.Errorf("GET %s: CSP %q, want %q", path, csp, contentSecurityPolicy)
		}
		if strings.Contains(csp, "'unsafe-eval'") || !strings.Contains(csp, "script-src 'self' 'wasm-unsafe-eval'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q must allow wasm-unsafe-eval only and deny framing", path, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if got := h.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
}

// TestBodyLimits: bodies over 1 MiB get 413 (announced or streamed); unknown fields and
// trailing data get 400; all as JSON errors.
func TestBodyLimits(t *testing.T) {
	e := newEnv(t)
	ck := e.session(e.users["owner"].ID)
	big := `{"name":"` + strings.Repeat("a", 2<<20) + `","backend":{"type":"bwrap"}}`
	resp, out := e.do("POST", "/api/agents", big, auth{cookie: ck})
	if resp.StatusCode != 413 || !strings.Contains(errMsg(out), "too large") {
		t.Errorf("2 MiB body = %d %s, want 413 JSON", resp.StatusCode, errMsg(out))
	}
	// Chunked (no Content-Length): the limit holds while reading.
	req, _ := http.NewRequest("POST", e.ts.URL+"/api/agents", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	auth{cookie: ck}.apply(req.Header)
	r2, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 413 {
		t.Errorf("chunked 2 MiB body = %d %s, want 413", r2.StatusCode, b2)
	}
	cases := []struct {
		body string
		want int
	}{
		{`{"name":"ok1","backend":{"type":"bwrap"},"evil":true}`, 400},
		{`{"name":"ok2","backend":{"type":"bwrap","privileged":true}}`, 400},
		{`{"name":"ok3","backend":{"type":"bwrap"}} {"name":"x"}`, 400},
		{`{"name":"ok4","backend":{"type":"bwrap"}`, 400},
		{``, 400},
		{`{"name":"../etc","backend":{"type":"bwrap"}}`, 400},
		{`{"name":"ok5","backend":{"type":"qemu"}}`, 400},
		{`{"name":"ok6","backend":{"type":"bwrap","network":"bridge"}}`, 400},
		{`{"name":"ok7","backend":{"type":"bwrap"},"share":"root"}`, 400},
		{`{"name":"ok8","backend":{"type":"bwrap","image":"debian"}}`, 400},
		{`{"name":"ok9","backend":{"type":"container","limits":{"pids":-1}}}`, 400},
		{`{"name":"ok10","backend":{"type":"container","image":"localhost/porthole-agent:latest"}}`, 201},
	}
	for _, c := range cases {
		resp, out := e.do("POST", "/api/agents", c.body, auth{cookie: ck})
		if resp.StatusCode != c.want || (c.want >= 400 && strings.HasPrefix(errMsg(out), "(not")) {
			t.Errorf("POST /api/agents %s = %d %s, want %d", c.body, resp.StatusCode, out, c.want)
		}
	}
}

// TestHostBackendRules: a host agent needs an admin AND --allow-host-backend; the 403 says why.
func TestHostBackendRules(t *testing.T) {
	host := func(name string) any {
		return api.CreateAgentRequest{Name: name, Backend: api.Backend{Type: "host", Network: "full"}}
	}
	off := newEnv(t)
	resp, out := off.do("POST", "/api/agents", host("h1"), auth{cookie: off.session(off.users["owner"].ID)})
	if resp.StatusCode != 403 || !strings.Contains(errMsg(out), "only an admin") {
		t.Errorf("host agent by a non-admin = %d %q, want 403 saying only an admin", resp.StatusCode, errMsg(out))
	}
	resp, out = off.do("POST", "/api/agents", host("h2"), auth{cookie: off.session(off.users["admin"].ID)})
	if resp.StatusCode != 403 || !strings.Contains(errMsg(out), "--allow-host-backend") {
		t.Errorf("host agent by an admin without --allow-host-backend = %d %q, want 403 naming the flag", resp.StatusCode, errMsg(out))
	}
	// Nor by changing an existing agent's backend.
	a := off.addAgent("admin", api.LevelNone, api.BackendBwrap)
	resp, out = off.do("PATCH", "/api/agents/"+a.ID, map[string]any{"backend": map[string]string{"type": "host"}}, auth{cookie: off.session(off.users["admin"].ID)})
	if resp.StatusCode != 403 {
		t.Errorf("PATCH backend to host without the flag = %d %q, want 403", resp.StatusCode, errMsg(out))
	}

	on := newEnv(t, func(c *Config) { c.AllowHostBackend = true })
	resp, out = on.do("POST", "/api/agents", host("h3"), auth{cookie: on.session(on.users["owner"].ID)})
	if resp.StatusCode != 403 {
		t.Errorf("host agent by a non-admin with the flag = %d %q, want 403", resp.StatusCode, errMsg(out))
	}
	resp, out = on.do("POST", "/api/agents", host("h4"), auth{cookie: on.session(on.users["admin"].ID)})
	if resp.StatusCode != 201 {
		t.Fatalf("host agent by an admin with the flag = %d %q, want 201", resp.StatusCode, errMsg(out))
	}
	if got := decode[api.Agent](t, out); got.Backend.Type != "host" || got.ID == "" || got.Owner != "admin" {
		t.Errorf("created host agent = %+v", got)
	}
}

// TestExecErrors: backend failures map to clear statuses with the cause in the message.
func TestExecErrors(t *testing.T) {
	e := newEnv(t)
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	ck := auth{cookie: e.session(e.users["owner"].ID)}
	cases := []struct {
		err      error
		want     int
		contains string
	}{
		{fmt.Errorf("bwrap: %w: user namespaces are disabled (kernel.unprivileged_userns_clone=0)", bridges.ErrBackendUnavailable), 503, "user namespaces are disabled"},
		{fmt.Errorf("agent %s: %w", a.ID, bridges.ErrHostNotAllowed), 403, "host backend not allowed"},
		{fmt.Errorf("yamux: stream reset (secret internal detail)"), 502, "exec failed"},
	}
	for _, c := range cases {
		e.bridge.mu.Lock()
		e.bridge.execErr = c.err
		e.bridge.mu.Unlock()
		resp, out := e.do("POST", "/api/agents/"+a.ID+"/exec", api.ExecRequest{Command: []string{"true"}}, ck)
		if resp.StatusCode != c.want || !strings.Contains(errMsg(out), c.contains) {
			t.Errorf("exec with bridge error %q = %d %q, want %d containing %q", c.err, resp.StatusCode, errMsg(out), c.want, c.contains)
		}
		if strings.Contains(errMsg(out), "secret internal detail") {
			t.Errorf("an internal error reached the client: %q", errMsg(out))
		}
	}
	e.bridge.mu.Lock()
	e.bridge.execErr = nil
	e.bridge.mu.Unlock()
	resp, out := e.do("POST", "/api/agents/"+a.ID+"/exec", api.ExecRequest{Command: []string{"echo", "hi"}}, ck)
	if res := decode[api.ExecResult](t, out); resp.StatusCode != 200 || res.Stdout != "ran echo hi in "+a.ID {
		t.Errorf("exec = %d %+v, want 200 with the bridge's result", resp.StatusCode, res)
	}
	for _, bad := range []string{`{"command":[]}`, `{"command":["x"],"timeout_s":-1}`, `{"command":["x"],"timeout_s":99999}`} {
		if resp, out := e.do("POST", "/api/agents/"+a.ID+"/exec", bad, ck); resp.StatusCode != 400 {
			t.Errorf("exec %s = %d %s, want 400", bad, resp.StatusCode, out)
		}
	}
}

func decodeB64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(s)
}
