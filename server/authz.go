package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/server/store"
)

// rule is one route's access requirement. Every API route declares one and require
// enforces it: this is the only place that decides who may do what.
type rule struct {
	anonymous bool        // no principal needed (POST /api/session)
	admin     bool        // admins only
	token     bool        // agent tokens allowed; on agent routes, for their own agent only
	agent     bool        // the route names an agent in :id; it is loaded, must be visible, and is put in the context
	manage    bool        // the agent's owner or an admin
	surface   api.Surface // with level: the caller's effective level on surface must reach level
	level     api.Level
}

const agentKey = "porthole.agent"

// agentOf is the agent require loaded and authorized, with Access filled for the caller.
func agentOf(c echo.Context) api.Agent { a, _ := c.Get(agentKey).(api.Agent); return a }

// effectiveAccess is a user's level per surface on an agent: an admin drives everything;
// the owner gets their own permissions; anyone else min(their permission, the agent's share).
func effectiveAccess(u api.User, a api.Agent) api.Permissions {
	if u.Admin {
		return api.Permissions{Terminal: api.LevelDrive, Desktop: api.LevelDrive, Browser: api.LevelDrive}
	}
	if a.OwnerID == u.ID {
		return u.Permissions
	}
	share := a.Share
	if !share.Valid() {
		share = api.LevelNone
	}
	return api.Permissions{
		Terminal: api.Min(u.Permissions.Terminal, share),
		Desktop:  api.Min(u.Permissions.Desktop, share),
		Browser:  api.Min(u.Permissions.Browser, share),
	}
}

// visible: the owner, an admin, and — when the agent is shared — everyone may see it.
func visible(u api.User, a api.Agent) bool {
	return u.Admin || a.OwnerID == u.ID || (a.Share.Valid() && a.Share != api.LevelNone)
}

// require authenticates the request and enforces r before the handler (and before any
// WebSocket upgrade) runs: 401 without a valid principal, 404 for an agent the caller
// cannot see, 403 for anything they can see but may not do.
func (s *Server) require(r rule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if r.anonymous {
				// Not even a stale cookie may stand in the way of logging in.
				return next(c)
			}
			p, err := s.authenticate(c)
			if err != nil {
				return err
			}
			if p == nil {
				return errorf(http.StatusUnauthorized, nil, "log in first (or send an agent token)")
			}
			if p.token != nil && !r.token {
				return errorf(http.StatusForbidden, nil,
					"an agent token may only read its own agent, run exec on it and open its surfaces")
			}
			if r.admin && !p.user.Admin {
				return errorf(http.StatusForbidden, nil, "only an admin may do this")
			}
			if !r.agent {
				return next(c)
			}
			a, err := s.st.GetAgent(c.Request().Context(), c.Param("id"))
			if errors.Is(err, store.ErrNotFound) {
				return errorf(http.StatusNotFound, nil, "no such agent")
			} else if err != nil {
				return internalError("loading the agent", err)
			}
			if p.token != nil && p.token.AgentID != a.ID {
				return errorf(http.StatusNotFound, nil, "no such agent (an agent token acts on its own agent only)")
			}
			if !visible(p.user.User, a) {
				return errorf(http.StatusNotFound, nil, "no such agent")
			}
			a.Access = effectiveAccess(p.user.User, a)
			if r.manage && !(a.OwnerID == p.user.ID || p.user.Admin) {
				return errorf(http.StatusForbidden, nil, "only the agent's owner or an admin may do this")
			}
			if r.level != "" {
				if have := a.Access.Get(r.surface); !have.AtLeast(r.level) {
					msg := needMsg(r.surface, r.level, have)
					if r.surface != "" {
						// A refused surface call (e.g. a watcher's desktop action) is audited.
						s.appendAudit(c.Request().Context(), api.AuditEvent{Actor: p.actor(), Action: "surface.refused",
							AgentID: a.ID, Surface: r.surface, Mode: have, Remote: c.RealIP(),
							Detail: c.Request().Method + " " + truncate(c.Request().URL.Path, 200) + ": " + msg})
					}
					return errorf(http.StatusForbidden, nil, "%s", msg)
				}
			}
			c.Set(agentKey, a)
			return next(c)
		}
	}
}

func needMsg(s api.Surface, need, have api.Level) string {
	return fmt.Sprintf("this needs %s on the agent's %s; you have %s", need, s, have)
}
