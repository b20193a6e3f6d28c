package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

// loginAs returns a client of the same gateway logged in as another user, with its own cookie jar.
func (g *gateway) loginAs(t *testing.T, user, password string) *gateway {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u := &gateway{URL: g.URL, client: &http.Client{Jar: jar, Timeout: g.client.Timeout}}
	u.call(t, "POST", "/api/session", api.LoginRequest{Username: user, Password: password}, http.StatusOK, nil)
	return u
}

// addUser creates a non-admin user (as admin) and returns a client logged in as that user.
func (g *gateway) addUser(t *testing.T, name string) *gateway {
	t.Helper()
	pw := name + "-password-e2e-4711"
	g.call(t, "POST", "/api/users", api.CreateUserRequest{Username: name, Password: pw}, http.StatusCreated, nil)
	return g.loginAs(t, name, pw)
}

// withToken does one API request with an agent token instead of a cookie; it returns the status and body.
func (g *gateway) withToken(t *testing.T, token, method, path string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, g.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func sh(script string) api.ExecRequest {
	return api.ExecRequest{Command: []string{"sh", "-c", script}, TimeoutS: 30}
}

// TestAPIExecIsolation drives two users' bwrap agents through the public API, with real jails:
// each exec runs inside its own agent, and Bob reaches Alice's agent neither with his cookie
// nor with his own agent's token.
func TestAPIExecIsolation(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	admin := startGateway(t)
	alice := admin.addUser(t, "alice")
	bob := admin.addUser(t, "bob")

	aliceAgent := alice.createAgent(t, "alice-agent")
	bobAgent := bob.createAgent(t, "bob-agent")

	const secret = "alice-secret-marker-9d1e"
	var res api.ExecResult
	alice.call(t, "POST", "/api/agents/"+aliceAgent.ID+"/exec",
		sh("echo "+secret+" > /home/agent/secret.txt && cat /home/agent/secret.txt && id -un && echo $HOME"),
		http.StatusOK, &res)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, secret) {
		t.Fatalf("alice's exec = %+v, want exit 0 printing the secret", res)
	}
	if got := strings.Fields(res.Stdout); len(got) < 3 || got[1] != "agent" || got[2] != "/home/agent" {
		t.Errorf("alice's exec runs as %q, want user agent with HOME=/home/agent (stdout %q)", got, res.Stdout)
	}

	// Bob, with his cookie: Alice's agent is invisible to him.
	bob.call(t, "POST", "/api/agents/"+aliceAgent.ID+"/exec", sh("cat /home/agent/secret.txt"), http.StatusNotFound, nil)
	bob.call(t, "GET", "/api/agents/"+aliceAgent.ID, nil, http.StatusNotFound, nil)

	// Bob, with his own agent's token: it works on his agent, and nowhere else.
	var tok api.Token
	bob.call(t, "POST", "/api/agents/"+bobAgent.ID+"/tokens", nil, http.StatusCreated, &tok)
	if tok.Secret == "" {
		t.Fatalf("token create returned no secret: %+v", tok)
	}
	for _, tc := range []struct {
		path string
		want []int
	}{
		{"/api/agents/" + aliceAgent.ID + "/exec", []int{http.StatusForbidden, http.StatusNotFound}},
		{"/api/agents/" + bobAgent.ID + "/exec", []int{http.StatusOK}},
	} {
		code, body := admin.withToken(t, tok.Secret, "POST", tc.path, sh("cat /home/agent/secret.txt; ls -a /home; grep -rs "+secret+" /home /tmp /proc/1/environ; true"))
		ok := false
		for _, w := range tc.want {
			ok = ok || code == w
		}
		if !ok {
			t.Fatalf("POST %s with bob's token = %d %s, want one of %v", tc.path, code, body, tc.want)
		}
		if bytes.Contains(body, []byte(secret)) {
			t.Errorf("POST %s with bob's token leaked alice's secret: %s", tc.path, body)
		}
	}

	// The secret is on the host only under Alice's agent's home.
	matches, _ := filepath.Glob(filepath.Join(admin.dataDir, "agents", "*", "home", "secret.txt"))
	if len(matches) != 1 || !strings.Contains(matches[0], aliceAgent.ID) {
		t.Errorf("secret.txt on the host = %q, want exactly one, in alice's agent home", matches)
	}
}

// TestAPIBackendUnavailableFailsClosed removes bwrap from PATH: exec on a bwrap agent is a clear
// 503 naming bubblewrap, and the command does not run on the host instead.
func TestAPIBackendUnavailableFailsClosed(t *testing.T) {
	testenv.LookPath(t, "bwrap")
	marker := filepath.Join(t.TempDir(), "ran-on-host")
	t.Setenv("PATH", t.TempDir()) // an empty directory: no bwrap, no sh
	g := startGateway(t)
	a := g.createAgent(t, "jailed")

	req, _ := json.Marshal(sh("touch " + marker))
	r, _ := http.NewRequest("POST", g.URL+"/api/agents/"+a.ID+"/exec", bytes.NewReader(req))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", g.URL)
	resp, err := g.client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e api.Error
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(strings.ToLower(e.Error), "bwrap") {
		t.Errorf("exec without bwrap = %d %s, want 503 with an error naming bwrap", resp.StatusCode, body)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran on the host: %s exists", marker)
	}
}
