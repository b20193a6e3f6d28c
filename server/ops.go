package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
)

func (s *Server) healthz(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }

// auditQuery reads the audit log's filters: user (the actor: a username or token:<id>),
// surface, action (exact, or a prefix ending in "."), since and until (RFC 3339).
func auditQuery(c echo.Context, q *store.AuditQuery) error {
	q.Actor = c.QueryParam("user")
	if len(q.Actor) > 200 {
		return errorf(http.StatusBadRequest, nil, "user is too long")
	}
	if v := c.QueryParam("surface"); v != "" {
		if !slices.Contains(api.Surfaces, api.Surface(v)) {
			return errorf(http.StatusBadRequest, nil, "surface %q is not one of terminal, desktop, browser", truncate(v, 40))
		}
		q.Surface = api.Surface(v)
	}
	q.Action = c.QueryParam("action")
	if len(q.Action) > 100 {
		return errorf(http.StatusBadRequest, nil, "action is too long")
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		v := c.QueryParam(t.name)
		if v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return errorf(http.StatusBadRequest, nil, "%s must be a time like 2026-05-01T09:00:00Z", t.name)
		}
		*t.dst = at
	}
	return nil
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Ready    bool                  `json:"ready"`
	Store    StoreReadiness        `json:"store"`
	Backends []bridges.ProbeResult `json:"backends"`
}

// StoreReadiness reports the store's state in /readyz.
type StoreReadiness struct {
	OK    bool   `json:"ok"`
	Kind  string `json:"kind"`
	Error string `json:"error,omitempty"`
}

// readyz: 503 when the store is unreachable; backends are reported one by one (an
// unavailable backend makes its agents fail with a clear error, not the gateway unready).
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	r := Readiness{Store: StoreReadiness{OK: true, Kind: s.st.Kind()}}
	if err := s.st.Ping(ctx); err != nil {
		r.Store.OK = false
		r.Store.Error = err.Error()
		s.log.Warn("readyz: store unreachable", "err", err)
	}
	r.Backends = s.bridge.Probe(ctx)
	if r.Backends == nil {
		r.Backends = []bridges.ProbeResult{}
	}
	r.Ready = r.Store.OK
	status := http.StatusOK
	if !r.Ready {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, r)
}

// listAudit: GET /api/audit?agent=ID&user=NAME&surface=S&action=A&since=T&until=T&limit=N&before=ID.
// Admins read everything; anyone else only the events of agents they own.
func (s *Server) listAudit(c echo.Context) error {
	p := principalOf(c)
	ctx := c.Request().Context()
	var q store.AuditQuery
	if err := auditQuery(c, &q); err != nil {
		return err
	}
	f := &q.AuditFilter
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return errorf(http.StatusBadRequest, nil, "limit must be 1-1000")
		}
		f.Limit = n
	}
	if v := c.QueryParam("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, nil, "before must be an event id")
		}
		f.BeforeID = n
	}
	agent := c.QueryParam("agent")
	if p.user.Admin {
		if agent != "" {
			f.AgentIDs = []string{agent}
		}
	} else {
		all, err := s.st.ListAgents(ctx)
		if err != nil {
			return internalError("listing agents", err)
		}
		own := []string{}
		for _, a := range all {
			if a.OwnerID == p.user.ID {
				own = append(own, a.ID)
			}
		}
		if agent != "" {
			if !slices.Contains(own, agent) {
				return errorf(http.StatusForbidden, nil, "you may read the audit log of your own agents only")
			}
			own = []string{agent}
		}
		if len(own) == 0 {
			return c.JSON(http.StatusOK, []api.AuditEvent{})
		}
		f.AgentIDs = own
	}
	evs, err := s.st.ListAuditQuery(ctx, q)
	if err != nil {
		return internalError("reading the audit log", err)
	}
	if evs == nil {
		evs = []api.AuditEvent{}
	}
	return c.JSON(http.StatusOK, evs)
}
