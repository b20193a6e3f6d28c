package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
)

// People's browser profiles (docs/api.md, "Browser profiles"). A person keeps profiles of their
// own (their logins) in the gateway's data dir, <data>/profiles/<id>, and lends one to one of
// their own agents at a time. The store enforces who may borrow what (migration 0003); the
// bridges mount a lent profile into the agent's sandbox when it starts (bridges/profile.go).
//
// Lending and taking back restart the agent's helper: a sandbox gets its mounts only when it
// starts, and a profile taken back must leave the sandbox at once, so the only way to swap the
// browser's profile is a new sandbox. Its terminals and desktop go with it (shells cannot move
// into a new sandbox); the answer says so in Restarted, and the UI shows it.

// maxProfilesPerUser is how many profiles a non-admin may keep.
const maxProfilesPerUser = 16

// Messages for people about what a lend or a take-back restarted.
const (
	restartedOnLend = "The agent's sandbox was stopped so that its browser starts on this profile: a sandbox gets a profile only when it starts. " +
		"Its open terminals, desktop and browser were closed; opening any of them starts the sandbox again, with the profile."
	restartedOnReturn = "The agent's sandbox was stopped so that the profile leaves it: its open terminals, desktop and browser were closed. " +
		"Opening any of them starts the sandbox again, with the agent's own browser profile."
)

// profilesDataDir is the data dir as an absolute path (the bridges' own view of it).
func (s *Server) profilesDataDir() string {
	if d, err := filepath.Abs(s.cfg.DataDir); err == nil {
		return d
	}
	return s.cfg.DataDir
}

// lentProfileID is bridges.Config.BrowserProfile: the id of the profile lent to the agent, ""
// when its browser uses its own.
func (s *Server) lentProfileID(ctx context.Context, agentID string) (string, error) {
	p, err := s.st.ProfileLentTo(ctx, agentID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return p.ID, nil
}

// reconcileProfiles removes profile directories whose profile is gone (its owner was deleted
// with `porthole user rm`, or the gateway died between the two steps of a delete).
func (s *Server) reconcileProfiles(ctx context.Context) {
	ents, err := os.ReadDir(bridges.ProfilesDir(s.profilesDataDir()))
	if err != nil {
		return // none yet
	}
	ids, err := s.st.ProfileIDs(ctx)
	if err != nil {
		s.log.Warn("browser profiles: cannot list them to remove leftovers", "err", err)
		return
	}
	for _, e := range ents {
		if ids[e.Name()] {
			continue
		}
		if err := bridges.RemoveProfileDir(s.profilesDataDir(), e.Name()); err != nil {
			s.log.Warn("browser profiles: remove a leftover directory", "dir", e.Name(), "err", err)
		} else {
			s.log.Info("browser profiles: removed the directory of a deleted profile", "profile", e.Name())
		}
	}
}

func validateProfileName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > store.MaxProfileName || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return "", fmt.Errorf("a profile name is 1-%d printable characters", store.MaxProfileName)
	}
	return name, nil
}

func profileDetail(p api.BrowserProfile) string {
	return fmt.Sprintf("profile %s %s of %s", p.ID, strconv.Quote(p.Name), p.Owner)
}

// GET /api/profiles: the caller's profiles; an admin sees everyone's.
func (s *Server) listProfiles(c echo.Context) error {
	p := principalOf(c)
	owner := p.user.ID
	if p.user.Admin {
		owner = ""
	}
	ps, err := s.st.ListProfiles(c.Request().Context(), owner)
	if err != nil {
		return internalError("listing browser profiles", err)
	}
	return c.JSON(http.StatusOK, ps)
}

// POST /api/profiles {"name"}: a new, empty profile of the caller.
func (s *Server) createProfile(c echo.Context) error {
	u := principalOf(c).user
	var req api.CreateProfileRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	name, err := validateProfileName(req.Name)
	if err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	quota := maxProfilesPerUser
	if u.Admin {
		quota = 0
	}
	ctx := c.Request().Context()
	p, err := s.st.CreateProfile(ctx, u.ID, name, quota)
	switch {
	case errors.Is(err, store.ErrQuota):
		return errorf(http.StatusForbidden, err, "you already keep %d browser profiles (max %d per user); delete one first", quota, quota)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, nil, "you have a browser profile named %q", name)
	case err != nil:
		return internalError("creating the browser profile", err)
	}
	if err := bridges.CreateProfileDir(s.profilesDataDir(), p.ID); err != nil {
		if _, derr := s.st.DeleteProfile(context.WithoutCancel(ctx), p.ID); derr != nil {
			s.log.Error("browser profiles: forget a profile whose directory could not be made", "profile", p.ID, "err", derr)
		}
		return internalError("creating the browser profile's directory", err)
	}
	s.audit(c, api.AuditEvent{Action: "profile.create", Surface: api.SurfaceBrowser, Detail: profileDetail(p)})
	return c.JSON(http.StatusCreated, p)
}

// DELETE /api/profiles/:pid: its owner (or an admin) deletes a profile that is not lent, with
// its directory.
func (s *Server) deleteProfile(c echo.Context) error {
	u := principalOf(c).user
	ctx := c.Request().Context()
	p, err := s.st.GetProfile(ctx, c.Param("pid"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.OwnerID != u.ID && !u.Admin) {
		return errorf(http.StatusNotFound, nil, "no such browser profile")
	} else if err != nil {
		return internalError("loading the browser profile", err)
	}
	p, err = s.st.DeleteProfile(ctx, p.ID)
	switch {
	case errors.Is(err, store.ErrProfileInUse):
		return s.profileInUse(c, p, "delete")
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, nil, "no such browser profile")
	case err != nil:
		return internalError("deleting the browser profile", err)
	}
	if err := bridges.RemoveProfileDir(s.profilesDataDir(), p.ID); err != nil {
		// The row is gone: the next gateway start removes what is left.
		s.log.Error("browser profiles: remove a deleted profile's directory", "profile", p.ID, "err", err)
	}
	s.audit(c, api.AuditEvent{Action: "profile.delete", Surface: api.SurfaceBrowser, Detail: profileDetail(p)})
	return c.NoContent(http.StatusNoContent)
}

// profileInUse answers 409 naming the agent that has the profile, so that the caller can take
// it back (DELETE /api/agents/<that agent>/browser/profile).
func (s *Server) profileInUse(c echo.Context, p api.BrowserProfile, what string) error {
	if p.LentTo == "" { // lent meanwhile: look again
		if cur, err := s.st.GetProfile(c.Request().Context(), p.ID); err == nil {
			p = cur
		}
	}
	msg := fmt.Sprintf("profile in use by agent %s: take it back from that agent first (DELETE /api/agents/%s/browser/profile), then %s it",
		p.LentToName, p.LentTo, what)
	return c.JSON(http.StatusConflict, api.ProfileInUse{Error: msg, ProfileID: p.ID, LentTo: p.LentTo, LentToName: p.LentToName})
}

// GET /api/agents/:id/browser/profile: which profile the agent's browser uses.
func (s *Server) getAgentProfile(c echo.Context) error {
	a := agentOf(c)
	p, err := s.st.ProfileLentTo(c.Request().Context(), a.ID)
	if errors.Is(err, store.ErrNotFound) {
		return c.JSON(http.StatusOK, api.AgentBrowserProfile{Kind: api.ProfileAgent})
	} else if err != nil {
		return internalError("loading the agent's browser profile", err)
	}
	return c.JSON(http.StatusOK, api.AgentBrowserProfile{Kind: api.ProfileLent, Profile: &p})
}

// POST /api/agents/:id/browser/profile {"profile_id"}: the profile's owner lends it to an agent
// of theirs. 403 for anyone else's profile or agent (visible or not, admins included: a
// profile holds a person's logins), 409 when another agent has it or this agent has another.
func (s *Server) lendProfile(c echo.Context) error {
	u := principalOf(c).user
	var req api.LendProfileRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.ProfileID == "" {
		return errorf(http.StatusBadRequest, nil, "profile_id is required")
	}
	ctx := c.Request().Context()
	a, err := s.st.GetAgent(ctx, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such agent")
	} else if err != nil {
		return internalError("loading the agent", err)
	}
	p, err := s.st.GetProfile(ctx, req.ProfileID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.OwnerID != u.ID && !u.Admin) {
		return errorf(http.StatusNotFound, nil, "no such browser profile")
	} else if err != nil {
		return internalError("loading the browser profile", err)
	}
	if p.OwnerID != u.ID {
		return errorf(http.StatusForbidden, nil, "only the profile's owner (%s) may lend it", p.Owner)
	}
	if a.OwnerID != u.ID {
		return errorf(http.StatusForbidden, nil, "a browser profile may be lent only to an agent of its owner; this agent is not yours")
	}
	if !a.Backend.Isolated() {
		return errorf(http.StatusConflict, nil, "agent %s runs on the host, not in a sandbox: there is nowhere to mount a profile", a.Name)
	}
	p, err = s.st.LendProfile(ctx, p.ID, a.ID)
	switch {
	case errors.Is(err, store.ErrProfileInUse):
		return s.profileInUse(c, p, "lend")
	case errors.Is(err, store.ErrAgentHasProfile):
		return errorf(http.StatusConflict, err, "agent %s already uses your profile %q: take it back first (DELETE /api/agents/%s/browser/profile)", a.Name, p.Name, a.ID)
	case errors.Is(err, store.ErrNotOwner):
		return errorf(http.StatusForbidden, err, "a browser profile may be lent only to an agent of its owner")
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, err, "no such agent or profile")
	case err != nil:
		return internalError("lending the browser profile", err)
	}
	c.Set(agentKey, a) // for the audit's detail
	s.audit(c, api.AuditEvent{Action: "profile.lend", AgentID: a.ID, Surface: api.SurfaceBrowser,
		Detail: profileDetail(p) + " lent to agent " + a.Name})
	s.restartForProfile(ctx, a.ID, "this agent's browser profile changed: its sandbox restarts; reconnect")
	return c.JSON(http.StatusOK, api.AgentBrowserProfile{Kind: api.ProfileLent, Profile: &p, Restarted: restartedOnLend})
}

// DELETE /api/agents/:id/browser/profile: the agent's owner (who owns the profile too) or an
// admin takes the lent profile back; the agent's browser uses its own again.
func (s *Server) returnProfile(c echo.Context) error {
	a := agentOf(c)
	ctx := c.Request().Context()
	p, err := s.st.ReturnAgentProfile(ctx, a.ID)
	if errors.Is(err, store.ErrNotFound) {
		return c.JSON(http.StatusOK, api.AgentBrowserProfile{Kind: api.ProfileAgent})
	} else if err != nil {
		return internalError("taking the browser profile back", err)
	}
	s.audit(c, api.AuditEvent{Action: "profile.return", AgentID: a.ID, Surface: api.SurfaceBrowser,
		Detail: profileDetail(p) + " taken back from agent " + a.Name})
	s.restartForProfile(ctx, a.ID, "this agent's browser profile was taken back: its sandbox restarts; reconnect")
	return c.JSON(http.StatusOK, api.AgentBrowserProfile{Kind: api.ProfileAgent, Restarted: restartedOnReturn})
}

// restartForProfile stops the agent's helper (its sandbox), as a backend change does, so that
// the next use starts a sandbox with the profile now lent (or none). It returns once the
// sandbox is gone: a profile taken back is then mounted nowhere.
func (s *Server) restartForProfile(ctx context.Context, agentID, why string) {
	s.kick(func(i socketInfo) bool { return i.agentID == agentID }, why)
	for _, h := range s.surfaces {
		h.gw.CloseAgent(agentID)
	}
	if err := s.bridge.Forget(context.WithoutCancel(ctx), agentID, false); err != nil {
		s.log.Error("stop the agent's helper for its browser profile", "agent", agentID, "err", err)
	}
}

// returnAgentProfile takes back whatever profile is lent to the agent because the agent is
// being deleted or stopped (why), auditing it as actor. The caller stops the helper.
func (s *Server) returnAgentProfile(ctx context.Context, agentID, actor, why string) {
	p, err := s.st.ReturnAgentProfile(ctx, agentID)
	if errors.Is(err, store.ErrNotFound) {
		return
	} else if err != nil {
		s.log.Error("return the agent's browser profile", "agent", agentID, "err", err)
		return
	}
	s.appendAudit(ctx, api.AuditEvent{Actor: actor, Action: "profile.return", AgentID: agentID, Surface: api.SurfaceBrowser,
		Detail: profileDetail(p) + " returned from agent " + p.LentToName + ": " + why})
}

// ownedProfiles lists a user's profiles before the user is deleted (the store deletes their
// rows with the user; deleteOwnedProfiles then removes their directories).
func (s *Server) ownedProfiles(ctx context.Context, userID string) []api.BrowserProfile {
	ps, err := s.st.ListProfiles(ctx, userID)
	if err != nil {
		s.log.Error("list a deleted user's browser profiles", "user", userID, "err", err)
	}
	return ps
}

// deleteOwnedProfiles removes the directories of a deleted user's profiles (once their agents
// are stopped) and audits it.
func (s *Server) deleteOwnedProfiles(ctx context.Context, actor string, ps []api.BrowserProfile) {
	for _, p := range ps {
		if err := bridges.RemoveProfileDir(s.profilesDataDir(), p.ID); err != nil {
			s.log.Error("remove a deleted user's browser profile", "profile", p.ID, "err", err)
		}
		detail := profileDetail(p) + ": its owner was deleted"
		if p.LentTo != "" {
			detail += " (taken back from agent " + p.LentToName + ")"
		}
		s.appendAudit(ctx, api.AuditEvent{Actor: actor, Action: "profile.delete", AgentID: p.LentTo, Surface: api.SurfaceBrowser, Detail: detail})
	}
}
