package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// Tests for issue 7 (containment), server side: limits are the admin's, per-user quotas,
// the exec cap, web hardening. Each names the row of the table it covers.

// TestAgentLimitsAreTheAdmins (row 3): a non-admin cannot ask for limits above the server's
// defaults (403 naming the limit and the default); an admin can, up to the maximum (403 naming
// it beyond); negative or absurd values are 400; the owner may keep limits an admin raised.
func TestAgentLimitsAreTheAdmins(t *testing.T) {
	e := newEnv(t)
	owner := e.session(e.users["owner"].ID)
	admin := e.session(e.users["admin"].ID)
	cases := []struct {
		name   string
		who    string
		limits api.Limits
		want   int
		msg    string
	}{
		{"the issue's request", owner, api.Limits{Pids: 1048576, MemoryMiB: 16777216, CPUPct: 102400}, 403, "backend.limits.pids 1048576 is above the server default 512"},
		{"pids above default", owner, api.Limits{Pids: 513}, 403, "pids 513 is above the server default 512: only an admin"},
		{"memory above default", owner, api.Limits{MemoryMiB: 4096}, 403, "memory_mib 4096 is above the server default 2048"},
		{"cpu above default", owner, api.Limits{CPUPct: 101}, 403, "cpu_pct 101 is above the server default 100"},
		{"disk above default", owner, api.Limits{DiskMiB: 10241}, 403, "disk_mib 10241 is above the server default 10240"},
		{"admin above the disk max", admin, api.Limits{DiskMiB: 102401}, 403, "disk_mib 102401 is above the server's maximum 102400 (--max-disk-mib)"},
		{"zero means default", owner, api.Limits{}, 201, ""},
		{"at the defaults", owner, api.Limits{Pids: 512, MemoryMiB: 2048, CPUPct: 100}, 201, ""},
		{"below the defaults", owner, api.Limits{Pids: 64, MemoryMiB: 256, CPUPct: 50}, 201, ""},
		{"negative", owner, api.Limits{Pids: -1}, 400, "out of range"},
		{"absurd", owner, api.Limits{MemoryMiB: 1 << 40}, 400, "out of range"},
		{"admin above default", admin, api.Limits{Pids: 4096, MemoryMiB: 8192}, 201, ""},
		{"admin at the max", admin, api.Limits{Pids: 8192}, 201, ""},
		{"admin above the max", admin, api.Limits{Pids: 8193}, 403, "pids 8193 is above the server's maximum 8192 (--max-pids)"},
		{"admin absurd", admin, api.Limits{Pids: 1 << 30}, 400, "out of range"},
	}
	for _, c := range cases {
		resp, out := e.do("POST", "/api/agents", api.CreateAgentRequest{Name: e.uniq("lim"),
			Backend: api.Backend{Type: api.BackendBwrap, Limits: c.limits}}, auth{cookie: c.who})
		if resp.StatusCode != c.want || !strings.Contains(errMsg(out), c.msg) && c.msg != "" {
			t.Errorf("%s: create with limits %+v = %d (%s), want %d with %q", c.name, c.limits, resp.StatusCode, errMsg(out), c.want, c.msg)
		}
	}
	// PATCH follows the same rule; the owner may keep what an admin granted, not raise it.
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	patch := func(who string, l api.Limits) (int, string) {
		resp, out := e.do("PATCH", "/api/agents/"+a.ID, api.UpdateAgentRequest{Backend: &api.Backend{Type: api.BackendBwrap, Limits: l}}, auth{cookie: who})
		return resp.StatusCode, errMsg(out)
	}
	if code, msg := patch(owner, api.Limits{Pids: 100000}); code != 403 || !strings.Contains(msg, "server default 512") {
		t.Errorf("owner PATCH pids 100000 = %d (%s), want 403 naming the default", code, msg)
	}
	if code, msg := patch(admin, api.Limits{Pids: 2048}); code != 200 {
		t.Errorf("admin PATCH pids 2048 = %d (%s), want 200", code, msg)
	}
	if code, msg := patch(owner, api.Limits{Pids: 2048, CPUPct: 50}); code != 200 {
		t.Errorf("owner PATCH keeping the admin's pids 2048 = %d (%s), want 200", code, msg)
	}
	if code, msg := patch(owner, api.Limits{Pids: 2049}); code != 403 {
		t.Errorf("owner PATCH pids 2049 (above what the admin granted) = %d (%s), want 403", code, msg)
	}
	got, err := e.srv.st.GetAgent(e.ctx(), a.ID)
	if err != nil || got.Backend.Limits.Pids != 2048 {
		t.Errorf("stored limits = %+v, %v, want pids 2048", got.Backend.Limits, err)
	}
}

// TestAgentQuotaPerUser (item 2): a non-admin owns at most the per-user agent quota (403
// naming it); another user and an admin are not held back by it.
func TestAgentQuotaPerUser(t *testing.T) {
	e := newEnv(t)
	owner := e.session(e.users["owner"].ID)
	create := func(ck string) (int, string) {
		resp, out := e.do("POST", "/api/agents", api.CreateAgentRequest{Name: e.uniq("q"), Backend: api.Backend{Type: api.BackendBwrap}}, auth{cookie: ck})
		return resp.StatusCode, errMsg(out)
	}
	for i := range 32 {
		if code, msg := create(owner); code != 201 {
			t.Fatalf("owner's agent #%d = %d (%s), want 201", i+1, code, msg)
		}
	}
	if code, msg := create(owner); code != 403 || !strings.Contains(msg, "max 32 per user") {
		t.Errorf("owner's 33rd agent = %d (%s), want 403 naming the quota of 32", code, msg)
	}
	if code, msg := create(e.session(e.users["other"].ID)); code != 201 {
		t.Errorf("another user's agent = %d (%s), want 201", code, msg)
	}
	admin := e.session(e.users["admin"].ID)
	for i := range 33 {
		if code, msg := create(admin); code != 201 {
			t.Fatalf("admin's agent #%d = %d (%s), want 201 (admins are exempt)", i+1, code, msg)
		}
	}
}

// TestWritesRequireJSON (row 10): a write whose body is not application/json is refused with
// 415 and a JSON error, with no Origin (a non-browser client, or a "simple" cross-site request
// from an old browser); nothing changes.
func TestWritesRequireJSON(t *testing.T) {
	e := newEnv(t)
	ck := e.session(e.users["owner"].ID)
	a := e.addAgent("owner", api.LevelNone, api.BackendBwrap)
	agentJSON := `{"name":"ctype","backend":{"type":"bwrap"}}`
	cases := []struct {
		method, path, ctype, body string
		want                      int
	}{
		{"POST", "/api/agents", "text/plain", agentJSON, 415},
		{"POST", "/api/agents", "text/plain;charset=UTF-8", agentJSON, 415},
		{"POST", "/api/agents", "application/x-www-form-urlencoded", agentJSON, 415},
		{"POST", "/api/agents", "multipart/form-data; boundary=x", agentJSON, 415},
		{"POST", "/api/agents", "", agentJSON, 415},
		{"PATCH", "/api/agents/" + a.ID, "text/plain", `{"share":"drive"}`, 415},
		{"POST", "/api/agents/" + a.ID + "/exec", "text/plain", `{"command":["id"]}`, 415},
		{"POST", "/api/session", "text/plain", `{"username":"owner","password":"` + userPassword + `"}`, 415},
		{"PATCH", "/api/agents/" + a.ID, "application/json; charset=utf-8", `{"share":"watch"}`, 200},
		{"POST", "/api/agents/" + a.ID + "/tokens", "", "", 201}, // no body: no type needed
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, e.ts.URL+c.path, strings.NewReader(c.body))
		if c.body == "" {
			req.Body, req.ContentLength = nil, 0
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		auth{cookie: ck}.apply(req.Header)
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		msg := errMsg(buf.Bytes())
		if resp.StatusCode != c.want || c.want == 415 && !strings.Contains(msg, "application/json") {
			t.Errorf("%s %s with Content-Type %q = %d (%s), want %d", c.method, c.path, c.ctype, resp.StatusCode, msg, c.want)
		}
	}
	if _, err := e.srv.st.GetUserByName(e.ctx(), "owner"); err != nil {
		t.Fatal(err)
	}
	got, _ := e.srv.st.GetAgent(e.ctx(), a.ID)
	if got.Share != api.LevelWatch {
		t.Errorf("share = %s, want watch (only the JSON PATCH applies)", got.Share)
	}
	agents, _ := e.srv.st.ListAgents(e.ctx())
	for _, x := range agents {
		if x.Name == "ctype" {
			t.Errorf("an agent was created from a non-JSON body")
		}
	}
}

// TestHostHeaderChecked (row 10): a request whose Host is a name the server does not serve (a
// DNS-rebinding page: evil.example resolving to 127.0.0.1) gets 421 with a JSON error, on the
// API and on the app; IP literals and localhost pass.
func TestHostHeaderChecked(t *testing.T) {
	e := newEnv(t)
	ck := e.session(e.users["owner"].ID)
	port := e.ts.URL[strings.LastIndex(e.ts.URL, ":")+1:]
	cases := []struct {
		host string
		want int
	}{
		{"evil.example:" + port, 421},
		{"evil.example", 421},
		{"127.0.0.1.evil.example:" + port, 421},
		{"localhost.evil.example", 421},
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST", 200},
		{"[::1]:" + port, 200},
	}
	for _, c := range cases {
		for _, path := range []string{"/api/me", "/healthz"} {
			req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
			req.Host = c.host
			auth{cookie: ck}.apply(req.Header)
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s with Host %q = %d, want %d", path, c.host, resp.StatusCode, c.want)
			}
			if c.want == 421 && !strings.Contains(errMsg(buf.Bytes()), "--allowed-host") {
				t.Errorf("GET %s with Host %q: body %s, want a JSON error naming --allowed-host", path, c.host, buf.Bytes())
			}
		}
	}
}

// TestOwnPasswordChangeNeedsCurrent (row 10): changing your own password needs the current
// one (400 without, 403 wrong, and wrong guesses count toward the login limit: 429 after 5);
// an admin resetting another user's password does not.
func TestOwnPasswordChangeNeedsCurrent(t *testing.T) {
	e := newEnv(t)
	ck := e.session(e.users["owner"].ID)
	path := "/api/users/" + e.users["owner"].ID
	change := func(body map[string]any, a auth) (int, string) {
		resp, out := e.do("PATCH", path, body, a)
		return resp.StatusCode, errMsg(out)
	}
	if code, msg := change(map[string]any{"password": "stolen-session-pw"}, auth{cookie: ck}); code != 400 || !strings.Contains(msg, "current_password") {
		t.Errorf("own change without current_password = %d (%s), want 400 naming it", code, msg)
	}
	for i := range 5 {
		if code, msg := change(map[string]any{"password": "stolen-session-pw", "current_password": "a-wrong-guess"}, auth{cookie: ck}); code != 403 {
			t.Errorf("own change with a wrong current password #%d = %d (%s), want 403", i+1, code, msg)
		}
	}
	code, msg := change(map[string]any{"password": "stolen-session-pw", "current_password": userPassword}, auth{cookie: ck})
	if code != 429 {
		t.Errorf("6th attempt after 5 wrong current passwords = %d (%s), want 429", code, msg)
	}
	if ok, _ := verifyPassword(must(e.srv.st.GetUser(e.ctx(), e.users["owner"].ID)).PasswordHash, userPassword); !ok {
		t.Errorf("the password changed without the current password")
	}
	e.clock.Add(11 * time.Minute)
	if code, msg := change(map[string]any{"password": "new-owner-password", "current_password": userPassword}, auth{cookie: ck}); code != 200 {
		t.Errorf("own change with the right current password = %d (%s), want 200", code, msg)
	}
	// An admin resets another user's password without knowing it; their own needs it.
	admin := e.session(e.users["admin"].ID)
	if code, msg := change(map[string]any{"password": "reset-by-admin-1"}, auth{cookie: admin}); code != 200 {
		t.Errorf("admin reset of owner's password = %d (%s), want 200", code, msg)
	}
	resp, out := e.do("PATCH", "/api/users/"+e.users["admin"].ID, map[string]any{"password": "admin-new-password"}, auth{cookie: admin})
	if resp.StatusCode != 400 {
		t.Errorf("admin's own change without current_password = %d (%s), want 400", resp.StatusCode, errMsg(out))
	}
}

// buildHelper builds the porthole binary the jails run as their helper.
func buildHelper(t *testing.T) string {
	dir, err := os.MkdirTemp("", "porthole-server-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "porthole")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/porthole")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build porthole: %v\n%s", err, out)
	}
	return bin
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestUsernamesCaseInsensitiveAPI (row 10): creating "Owner" beside "owner" is 409; login
// ignores the case of the username.
func TestUsernamesCaseInsensitiveAPI(t *testing.T) {
	e := newEnv(t)
	admin := e.session(e.users["admin"].ID)
	for _, name := range []string{"Owner", "OWNER"} {
		resp, out := e.do("POST", "/api/users", map[string]any{"username": name, "password": "another-password"}, auth{cookie: admin})
		if resp.StatusCode != 409 || !strings.Contains(errMsg(out), "taken") {
			t.Errorf("create %q beside owner = %d (%s), want 409", name, resp.StatusCode, errMsg(out))
		}
	}
	resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "OWNER", Password: userPassword}, auth{})
	if resp.StatusCode != 200 || decode[api.Me](t, out).Username != "owner" {
		t.Errorf("login as OWNER = %d %s, want 200 as owner", resp.StatusCode, out)
	}
}

// TestLoginLimitPerAccount (row 2): behind a trusted proxy an attacker rotating
// X-Forwarded-For gets at most 20 guesses per 10 minutes against one account (then 429 naming
// the account), while the account's user, from an address they logged in from before, still
// logs in; other accounts are not affected; the block lifts with the window.
func TestLoginLimitPerAccount(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	login := func(user, pw, from string) (int, string) {
		resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: user, Password: pw}, auth{xff: from})
		return resp.StatusCode, errMsg(out)
	}
	if code, msg := login("owner", userPassword, "198.51.100.7"); code != 200 {
		t.Fatalf("owner's first login = %d (%s)", code, msg)
	}
	for i := range 20 {
		if code, msg := login("owner", "guess", fmt.Sprintf("203.0.113.%d", i+1)); code != 401 {
			t.Fatalf("guess #%d from a fresh address = %d (%s), want 401", i+1, code, msg)
		}
	}
	for i := range 5 {
		code, msg := login("owner", userPassword, fmt.Sprintf("203.0.114.%d", i+1))
		if code != 429 || !strings.Contains(msg, "for this account") {
			t.Errorf("attempt #%d past 20 from a fresh address = %d (%s), want 429 for this account", 21+i, code, msg)
		}
	}
	if code, msg := login("owner", userPassword, "198.51.100.7"); code != 200 {
		t.Errorf("owner from the address they logged in from before = %d (%s), want 200", code, msg)
	}
	if code, msg := login("other", userPassword, "203.0.113.77"); code != 200 {
		t.Errorf("another account = %d (%s), want 200", code, msg)
	}
	e.clock.Add(userWindow)
	if code, msg := login("owner", userPassword, "203.0.115.1"); code != 200 {
		t.Errorf("owner from a new address after the window = %d (%s), want 200", code, msg)
	}
}

// TestLoginLimitSharedAddress (row 2): six wrong logins from one address (an agent sharing
// the host's 127.0.0.1) against one account do not stop another user, who logged in from that
// address before, from logging in there; the guesser is limited.
func TestLoginLimitSharedAddress(t *testing.T) {
	e := newEnv(t)
	login := func(user, pw string) (int, string) {
		resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: user, Password: pw}, auth{})
		return resp.StatusCode, errMsg(out)
	}
	if code, msg := login("other", userPassword); code != 200 {
		t.Fatalf("other's first login = %d (%s)", code, msg)
	}
	for i := range 5 {
		if code, _ := login("owner", "guess"); code != 401 {
			t.Fatalf("guess #%d = %d, want 401", i+1, code)
		}
	}
	if code, _ := login("owner", "guess"); code != 429 {
		t.Errorf("6th guess from one address = %d, want 429", code)
	}
	if code, msg := login("other", userPassword); code != 200 {
		t.Errorf("other's correct login from the same address after the guesses = %d (%s), want 200", code, msg)
	}
}

// TestExecFloodRealAgent (row 7): 200 concurrent execs against one real bwrap agent: every
// answer is 200 or 429 with a message naming the cap, none is 502, and afterwards the agent's
// exec and terminal still work.
func TestExecFloodRealAgent(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	dir := t.TempDir()
	s, err := New(context.Background(), Config{DataDir: dir, AdminPassword: adminPassword, HelperPath: buildHelper(t),
		Surfaces:        []surface.Description{terminal.Surface},
		ContainerEngine: "unix://" + filepath.Join(dir, "no-engine.sock"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := newHTTPTestServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	e := &env{t: t, srv: s, ts: ts}
	resp, out := e.do("POST", "/api/session", api.LoginRequest{Username: "admin", Password: adminPassword}, auth{})
	if resp.StatusCode != 200 {
		t.Fatalf("login = %d %s", resp.StatusCode, out)
	}
	var ck string
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			ck = c.Value
		}
	}
	resp, out = e.do("POST", "/api/agents", api.CreateAgentRequest{Name: "flood", Backend: api.Backend{Type: api.BackendBwrap}}, auth{cookie: ck})
	if resp.StatusCode != 201 {
		t.Fatalf("create agent = %d %s", resp.StatusCode, out)
	}
	a := decode[api.Agent](t, out)
	execPath := "/api/agents/" + a.ID + "/exec"
	// Warm the helper up so that the flood hits a running one.
	if resp, out := e.do("POST", execPath, api.ExecRequest{Command: []string{"true"}}, auth{cookie: ck}); resp.StatusCode != 200 {
		t.Fatalf("first exec = %d %s", resp.StatusCode, out)
	}

	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var bad []string
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Three processes each: 200 at once would be 600, over the agent's 512 pids.
			body := fmt.Sprintf(`{"command":["sh","-c","sleep 1 | cat; echo %d"],"timeout_s":60}`, i)
			req, _ := http.NewRequest("POST", ts.URL+execPath, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			auth{cookie: ck}.apply(req.Header)
			resp, err := ts.Client().Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad = append(bad, err.Error())
				return
			}
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
			switch {
			case resp.StatusCode == 200:
				if r := decode[api.ExecResult](t, buf.Bytes()); r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprint(i) {
					bad = append(bad, fmt.Sprintf("exec %d: %+v", i, r))
				}
			case resp.StatusCode == 429 && strings.Contains(errMsg(buf.Bytes()), "max 16 per agent") && resp.Header.Get("Retry-After") != "":
			default:
				bad = append(bad, fmt.Sprintf("exec %d: %d %s", i, resp.StatusCode, errMsg(buf.Bytes())))
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("200 concurrent execs: %v", codes)
	if len(bad) > 0 {
		t.Errorf("%d of %d execs answered neither 200 nor 429 with the cap named, e.g.: %s", len(bad), n, strings.Join(bad[:min(5, len(bad))], "; "))
	}
	if codes[429] == 0 {
		t.Errorf("no exec was refused: 200 execs of a second each at once, and the per-agent cap (16) never engaged")
	}
	if codes[200] < 16 {
		t.Errorf("%d execs ran, want at least the cap (16)", codes[200])
	}
	// The agent still works: exec, and a terminal.
	if resp, out := e.do("POST", execPath, api.ExecRequest{Command: []string{"echo", "alive"}}, auth{cookie: ck}); resp.StatusCode != 200 || !strings.Contains(string(out), "alive") {
		t.Errorf("exec after the flood = %d %s, want 200 alive", resp.StatusCode, out)
	}
	ws, code, body := e.dialWS("/api/agents/"+a.ID+"/terminal", auth{cookie: ck})
	if ws == nil {
		t.Fatalf("terminal after the flood: %d %s", code, body)
	}
	ws.WriteMessage(websocket.BinaryMessage, terminal.Encode(terminal.Open{Tag: 1, Cols: 80, Rows: 24}))
	var id uint32
	var seen strings.Builder
	sent := false
	deadline := time.Now().Add(30 * time.Second)
	ws.SetReadDeadline(deadline)
	for !strings.Contains(seen.String(), "still-here") {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("terminal after the flood: %v; output %q", err, seen.String())
		}
		m, err := terminal.Decode(b)
		if err != nil {
			continue
		}
		switch m := m.(type) {
		case terminal.Opened:
			id = m.ID
		case terminal.Output:
			seen.Write(m.Data)
		case terminal.ErrorMsg:
			t.Fatalf("terminal after the flood: %+v", m)
		}
		if id != 0 && !sent {
			ws.WriteMessage(websocket.BinaryMessage, terminal.Encode(terminal.Input{ID: id, Data: []byte("echo still-''here\r")}))
			sent = true
		}
	}
}
