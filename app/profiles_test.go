//go:build !js

package app_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/app"
)

// TestClientProfiles drives the app's profile calls against the real gateway, as the agent
// page's control and the account page do: create, lend (what restarted), 409 naming the agent
// that has it, take back, delete.
func TestClientProfiles(t *testing.T) {
	ctx := context.Background()
	c := browserClient(gateway(t))
	if err := c.Login(ctx, "admin", "client-test-admin-pw"); err != nil {
		t.Fatalf("Login: %v", err)
	}
	jail := api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}
	a1, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "a1", Backend: jail})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "a2", Backend: jail})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProfile(ctx, "Personal")
	if err != nil || p.ID == "" {
		t.Fatalf("CreateProfile = %+v, %v", p, err)
	}
	if cur, err := c.AgentProfile(ctx, a1.ID); err != nil || cur.Kind != api.ProfileAgent {
		t.Errorf("AgentProfile before = %+v, %v", cur, err)
	}
	res, err := c.LendProfile(ctx, a1.ID, p.ID)
	if err != nil || res.Kind != api.ProfileLent || res.Profile == nil || res.Profile.Name != "Personal" || !strings.Contains(res.Restarted, "sandbox") {
		t.Fatalf("LendProfile = %+v, %v", res, err)
	}
	if list, err := c.Profiles(ctx); err != nil || len(list) != 1 || list[0].LentTo != a1.ID || list[0].LentToName != "a1" {
		t.Errorf("Profiles while lent = %+v, %v", list, err)
	}
	var apiErr *app.APIError
	_, err = c.LendProfile(ctx, a2.ID, p.ID)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "profile in use by agent a1") {
		t.Errorf("second lend: %v, want 409 naming a1", err)
	}
	if err := c.DeleteProfile(ctx, p.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("DeleteProfile while lent: %v, want 409", err)
	}
	if res, err := c.ReturnProfile(ctx, a1.ID); err != nil || res.Kind != api.ProfileAgent || res.Restarted == "" {
		t.Errorf("ReturnProfile = %+v, %v", res, err)
	}
	if err := c.DeleteProfile(ctx, p.ID); err != nil {
		t.Errorf("DeleteProfile: %v", err)
	}
	if list, err := c.Profiles(ctx); err != nil || len(list) != 0 {
		t.Errorf("Profiles after delete = %+v, %v", list, err)
	}
}
