package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
)

// sessionID is what the API shows of a session: derived from its hash, not the cookie.
func sessionID(hash []byte) string {
	sum := sha256.Sum256(append([]byte("porthole session id\x00"), hash...))
	return hex.EncodeToString(sum[:8])
}

// listSessions: GET /api/sessions, the caller's own sessions.
func (s *Server) listSessions(c echo.Context) error {
	p := principalOf(c)
	list, err := s.st.ListSessions(c.Request().Context(), p.user.ID)
	if err != nil {
		return internalError("listing your sessions", err)
	}
	out := make([]api.Session, 0, len(list))
	for _, si := range list {
		out = append(out, api.Session{ID: sessionID(si.Hash), Current: bytes.Equal(si.Hash, p.sessionHash),
			CreatedAt: si.CreatedAt, ExpiresAt: si.ExpiresAt, UserAgent: si.UserAgent, Remote: si.Remote})
	}
	return c.JSON(http.StatusOK, out)
}

// deleteSession: DELETE /api/sessions/:sid logs out another of the caller's sessions.
func (s *Server) deleteSession(c echo.Context) error {
	p := principalOf(c)
	ctx := c.Request().Context()
	list, err := s.st.ListSessions(ctx, p.user.ID)
	if err != nil {
		return internalError("listing your sessions", err)
	}
	for _, si := range list {
		if sessionID(si.Hash) != c.Param("sid") {
			continue
		}
		if bytes.Equal(si.Hash, p.sessionHash) {
			return errorf(http.StatusBadRequest, nil, "this is the session you are using: log out instead")
		}
		if err := s.st.DeleteSession(ctx, si.Hash); err != nil {
			return internalError("ending the session", err)
		}
		h := hex.EncodeToString(si.Hash)
		s.kick(func(i socketInfo) bool { return i.session == h }, "this session was logged out from another one")
		s.audit(c, api.AuditEvent{Action: "session.revoke", Detail: "session " + sessionID(si.Hash)})
		return c.NoContent(http.StatusNoContent)
	}
	return errorf(http.StatusNotFound, nil, "no such session (it may have expired)")
}

// deleteOtherSessions: DELETE /api/sessions logs out every session of the caller but this one.
func (s *Server) deleteOtherSessions(c echo.Context) error {
	p := principalOf(c)
	if err := s.st.DeleteUserSessions(c.Request().Context(), p.user.ID, p.sessionHash); err != nil {
		return internalError("ending your other sessions", err)
	}
	keep := hex.EncodeToString(p.sessionHash)
	n := s.kick(func(i socketInfo) bool { return i.userID == p.user.ID && i.session != "" && i.session != keep },
		"this session was logged out from another one")
	s.audit(c, api.AuditEvent{Action: "session.revoke_others", Detail: "open connections closed: " + strconv.Itoa(n)})
	return c.NoContent(http.StatusNoContent)
}

// appPage reports whether p (cleaned) is a page of the web app rather than a file: no
// extension, outside /web/ and /api/.
func appPage(p string) bool {
	return !strings.HasPrefix(p, "/web/") && !strings.HasPrefix(p, "/api/") && p != "/api" &&
		!strings.Contains(path.Base(p), ".")
}

// safeNext reports whether next is a page of this app to go to after logging in (not another
// site: "//host", "/\host", "https:...").
func safeNext(next string) bool {
	return strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") &&
		!strings.ContainsAny(next, "\r\n") && !strings.HasPrefix(next, "/login")
}

// pages serves the web app. An app page asked for without a valid session is redirected to
// /login (with ?next= to come back), so a logged-out visit never shows the app's shell; /login
// with a valid session goes on to ?next= or the dashboard. Files are served as they are.
func (s *Server) pages(web http.Handler) echo.HandlerFunc {
	serve := echo.WrapHandler(web)
	return func(c echo.Context) error {
		r := c.Request()
		p := path.Clean("/" + r.URL.Path)
		if !appPage(p) {
			return serve(c)
		}
		pr, err := s.authenticate(c)
		if err != nil {
			var he *echo.HTTPError
			if !errors.As(err, &he) || he.Code != http.StatusUnauthorized {
				return err // the store failed: not a reason to send anyone to the login page
			}
		}
		loggedIn := err == nil && pr != nil && pr.token == nil
		c.Response().Header().Set("Cache-Control", "no-store")
		switch {
		case p == "/login" && loggedIn:
			next := r.URL.Query().Get("next")
			if !safeNext(next) {
				next = "/"
			}
			return c.Redirect(http.StatusFound, next)
		case p != "/login" && !loggedIn:
			to := "/login"
			if next := r.URL.RequestURI(); p != "/" && safeNext(next) {
				to += "?next=" + url.QueryEscape(next)
			}
			return c.Redirect(http.StatusFound, to)
		}
		c.Response().Header().Del("Cache-Control")
		return serve(c)
	}
}
