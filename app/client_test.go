//go:build !js

package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/app"
	"github.com/porthole/porthole/server"
)

// gateway runs the real gateway in process (SQLite in a temporary directory).
func gateway(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{
		DataDir:       t.TempDir(),
		AdminPassword: "client-test-admin-pw",
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		ts.Close()
		cancel()
	})
	return ts.URL
}

// browserClient is the app's API client with a cookie jar, as a browser tab has.
func browserClient(base string) *app.Client {
	jar, _ := cookiejar.New(nil)
	return &app.Client{Base: base, RoundTrip: app.HTTPRoundTrip(&http.Client{Jar: jar})}
}

// TestClientAgainstGateway drives the app's API client through what the pages do.
func TestClientAgainstGateway(t *testing.T) {
	base := gateway(t)
	ctx := context.Background()
	c := browserClient(base)

	if _, err := c.Me(ctx); !errors.Is(err, app.ErrUnauthorized) {
		t.Fatalf("Me before login: err = %v, want ErrUnauthorized", err)
	}
	err := c.Login(ctx, "admin", "wrong")
	var apiErr *app.APIError
	if !errors.Is(err, app.ErrUnauthorized) || !errors.As(err, &apiErr) || apiErr.Message == "" {
		t.Fatalf("Login with a wrong password: err = %v, want ErrUnauthorized with the gateway's message", err)
	}
	if err := c.Login(ctx, "admin", "client-test-admin-pw"); err != nil {
		t.Fatalf("Login: %v", err)
	}
	me, err := c.Me(ctx)
	if err != nil || me.Username != "admin" || !me.Admin {
		t.Fatalf("Me = %+v, %v; want admin", me, err)
	}

	a, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "client-agent",
		Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelWatch})
	if err != nil || a.ID == "" {
		t.Fatalf("CreateAgent = %+v, %v", a, err)
	}
	_, err = c.CreateAgent(ctx, api.CreateAgentRequest{Name: "<b>bad</b>", Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone})
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Error() != apiErr.Message {
		t.Errorf("CreateAgent with a bad name: err = %v, want a 400 carrying the gateway's message", err)
	}
	newName := "client-renamed"
	if _, err := c.UpdateAgent(ctx, a.ID, api.UpdateAgentRequest{Name: &newName}); err != nil {
		t.Fatalf("UpdateAgent: %v", err)
	}
	list, err := c.Agents(ctx)
	if err != nil || len(list) != 1 || list[0].Name != newName || list[0].Owner != "admin" {
		t.Fatalf("Agents = %+v, %v; want one agent %q owned by admin", list, err, newName)
	}

	// Users: create, change permissions, delete.
	u, err := c.CreateUser(ctx, api.CreateUserRequest{Username: "carol", Password: "carol-password-1"})
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	perms := api.Permissions{Terminal: api.LevelWatch, Desktop: api.LevelNone, Browser: api.LevelDrive}
	if err := c.UpdateUser(ctx, u.ID, api.UpdateUserRequest{Permissions: &perms}); err != nil {
		t.Fatalf("UpdateUser: %v", err)
	}
	users, err := c.Users(ctx)
	if err != nil {
		t.Fatalf("Users: %v", err)
	}
	var found bool
	for _, x := range users {
		if x.ID == u.ID {
			found = true
			if x.Permissions != perms {
				t.Errorf("carol's permissions = %+v, want %+v", x.Permissions, perms)
			}
		}
	}
	if !found {
		t.Errorf("Users = %+v, want carol in it", users)
	}

	// A non-admin is refused the users page's calls.
	carol := browserClient(base)
	if err := carol.Login(ctx, "carol", "carol-password-1"); err != nil {
		t.Fatalf("carol Login: %v", err)
	}
	if _, err := carol.Users(ctx); !errors.Is(err, app.ErrForbidden) {
		t.Errorf("Users as carol: err = %v, want ErrForbidden", err)
	}
	if err := c.DeleteUser(ctx, u.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}

	if err := c.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatalf("DeleteAgent: %v", err)
	}
	if _, err := c.Agent(ctx, a.ID); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("Agent after delete: err = %v, want ErrNotFound", err)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatalf("Logout: %v", err)
	}
	if _, err := c.Agents(ctx); !errors.Is(err, app.ErrUnauthorized) {
		t.Errorf("Agents after logout: err = %v, want ErrUnauthorized", err)
	}
}

// TestClientRateLimited: the login page shows the gateway's 429 with its Retry-After.
func TestClientRateLimited(t *testing.T) {
	base := gateway(t)
	c := browserClient(base)
	var err error
	for i := 0; i < 10 && !errors.Is(err, app.ErrRateLimited); i++ {
		err = c.Login(context.Background(), "admin", "wrong")
	}
	var apiErr *app.APIError
	if !errors.Is(err, app.ErrRateLimited) || !errors.As(err, &apiErr) || apiErr.RetryAfter == "" {
		t.Fatalf("after 10 wrong passwords: err = %v, want ErrRateLimited with Retry-After", err)
	}
}

// TestClientServerDown: an unreachable gateway is an error the page can show, not a hang.
func TestClientServerDown(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	base := ts.URL
	ts.Close()
	c := &app.Client{Base: base, Timeout: 5 * time.Second}
	if _, err := c.Me(context.Background()); err == nil {
		t.Fatal("Me against a closed server: no error")
	}
}
