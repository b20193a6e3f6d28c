package server

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/server/store"
)

var usernameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)

func validateUsername(name string) error {
	if !usernameRE.MatchString(name) {
		return errors.New("a username is 1-32 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

func (s *Server) me(c echo.Context) error {
	return c.JSON(http.StatusOK, meOf(principalOf(c).user.User))
}

func (s *Server) listUsers(c echo.Context) error {
	us, err := s.st.ListUsers(c.Request().Context())
	if err != nil {
		return internalError("listing users", err)
	}
	if us == nil {
		us = []api.User{}
	}
	return c.JSON(http.StatusOK, us)
}

func (s *Server) createUser(c echo.Context) error {
	var req api.CreateUserRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := validateUsername(req.Username); err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	if err := validatePassword(req.Password); err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	perms := api.DefaultPermissions
	if req.Permissions != nil {
		perms = *req.Permissions
	}
	if err := perms.Validate(); err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	hash, err := hashPassword(req.Password)
	if err != nil {
		return internalError("hashing the password", err)
	}
	ctx := c.Request().Context()
	u, err := s.st.CreateUser(ctx, store.User{User: api.User{Username: req.Username, Admin: req.Admin, Permissions: perms}, PasswordHash: hash})
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, nil, "the username %q is taken", req.Username)
	} else if err != nil {
		return internalError("creating the user", err)
	}
	s.audit(c, api.AuditEvent{Action: "user.create", Detail: userDetail(u)})
	return c.JSON(http.StatusCreated, u)
}

func userDetail(u api.User) string {
	d := "user " + u.Username + " (" + u.ID + ")"
	if u.Admin {
		d += " admin"
	}
	return d
}

// updateUser: an admin changes anything; a user may change only their own password.
func (s *Server) updateUser(c echo.Context) error {
	p := principalOf(c)
	id := c.Param("id")
	self := id == p.user.ID
	if !p.user.Admin && !self {
		return errorf(http.StatusForbidden, nil, "only an admin may change another user")
	}
	var req api.UpdateUserRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !p.user.Admin && (req.Admin != nil || req.Permissions != nil) {
		return errorf(http.StatusForbidden, nil, "only an admin may change admin rights or permissions")
	}
	ctx := c.Request().Context()
	target, err := s.st.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such user")
	} else if err != nil {
		return internalError("loading the user", err)
	}
	var upd store.UserUpdate
	var changed []string
	if req.Password != nil {
		if err := validatePassword(*req.Password); err != nil {
			return errorf(http.StatusBadRequest, nil, "%v", err)
		}
		if self {
			// A stolen session must not be enough to take the account over.
			if err := s.checkCurrentPassword(c, target, req.CurrentPassword); err != nil {
				return err
			}
		}
		h, err := hashPassword(*req.Password)
		if err != nil {
			return internalError("hashing the password", err)
		}
		upd.PasswordHash = &h
		changed = append(changed, "password")
	}
	if req.Permissions != nil {
		if err := req.Permissions.Validate(); err != nil {
			return errorf(http.StatusBadRequest, nil, "%v", err)
		}
		upd.Permissions = req.Permissions
		changed = append(changed, "permissions")
	}
	if req.Admin != nil {
		if target.Admin && !*req.Admin {
			if err := s.keepAnAdmin(ctx, target.ID); err != nil {
				return err
			}
		}
		upd.Admin = req.Admin
		changed = append(changed, "admin")
	}
	u, err := s.st.UpdateUser(ctx, id, upd)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such user")
	} else if err != nil {
		return internalError("updating the user", err)
	}
	if upd.PasswordHash != nil {
		// A password change ends every other session of that user (the caller's own stays).
		var keep []byte
		if self {
			keep = p.sessionHash
		}
		if err := s.st.DeleteUserSessions(ctx, id, keep); err != nil {
			return internalError("revoking the user's other sessions", err)
		}
		keepHex := hex.EncodeToString(keep)
		s.kick(func(i socketInfo) bool {
			return i.userID == id && i.session != "" && (keep == nil || i.session != keepHex)
		}, "your password was changed; log in again")
	}
	if upd.Permissions != nil || upd.Admin != nil {
		s.kick(func(i socketInfo) bool { return i.userID == id }, "your permissions changed; reconnect")
	}
	s.audit(c, api.AuditEvent{Action: "user.update", Detail: userDetail(u) + ": " + strings.Join(changed, ", ")})
	return c.JSON(http.StatusOK, u)
}

// checkCurrentPassword verifies a user's current password before they change their own:
// 400 when missing, 403 when wrong. Wrong guesses count toward the login limits (and a
// limited caller gets 429), so this is no way around them.
func (s *Server) checkCurrentPassword(c echo.Context, u store.User, current *string) error {
	if current == nil || *current == "" {
		return errorf(http.StatusBadRequest, nil, "current_password is required to change your own password")
	}
	ip := c.RealIP()
	wait, done, why := s.limiter.begin(u.Username, limiterKey(ip), s.now())
	if wait > 0 {
		return s.limited(c, wait, why)
	}
	ok, err := verifyPassword(u.PasswordHash, *current)
	done(!ok, s.now())
	if !ok {
		s.appendAudit(c.Request().Context(), api.AuditEvent{Actor: u.Username, Action: "password.fail",
			Detail: "wrong current password on a password change", Remote: ip})
		return errorf(http.StatusForbidden, err, "the current password is wrong")
	}
	return nil
}

// keepAnAdmin refuses to remove the last admin (other than id).
func (s *Server) keepAnAdmin(ctx context.Context, id string) error {
	us, err := s.st.ListUsers(ctx)
	if err != nil {
		return internalError("listing users", err)
	}
	for _, u := range us {
		if u.Admin && u.ID != id {
			return nil
		}
	}
	return errorf(http.StatusConflict, nil, "this is the last admin; make another user admin first")
}

func (s *Server) deleteUser(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	target, err := s.st.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such user")
	} else if err != nil {
		return internalError("loading the user", err)
	}
	if target.Admin {
		if err := s.keepAnAdmin(ctx, id); err != nil {
			return err
		}
	}
	agents, err := s.st.ListAgents(ctx)
	if err != nil {
		return internalError("listing the user's agents", err)
	}
	profiles := s.ownedProfiles(ctx, id)
	if err := s.st.DeleteUser(ctx, id); errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such user")
	} else if err != nil {
		return internalError("deleting the user", err)
	}
	s.kick(func(i socketInfo) bool { return i.userID == id }, "your account was deleted")
	for _, a := range agents {
		if a.OwnerID == id {
			s.stopAgent(ctx, a.ID, true)
		}
	}
	s.deleteOwnedProfiles(ctx, principalOf(c).actor(), profiles)
	s.audit(c, api.AuditEvent{Action: "user.delete", Detail: userDetail(target.User)})
	return c.NoContent(http.StatusNoContent)
}

// audit records e with the request's actor and client address.
func (s *Server) audit(c echo.Context, e api.AuditEvent) {
	if p := principalOf(c); p != nil && e.Actor == "" {
		e.Actor = p.actor()
	}
	if e.Remote == "" {
		e.Remote = c.RealIP()
	}
	if p := principalOf(c); p != nil && p.user.Admin {
		if a := agentOf(c); a.ID != "" && a.OwnerID != p.user.ID {
			e.Detail = strings.TrimSpace(e.Detail + " (admin acting on " + a.Owner + "'s agent)")
		}
	}
	s.appendAudit(c.Request().Context(), e)
}
