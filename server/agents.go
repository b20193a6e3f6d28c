package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/server/store"
)

var (
	agentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	imageRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$`)
)

const maxExecTimeoutS = 3600

func validateAgentName(name string) error {
	if !agentNameRE.MatchString(name) {
		return errors.New("an agent name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

func validateShare(l *api.Level) error {
	if *l == "" {
		*l = api.LevelNone
	}
	if !l.Valid() {
		return fmt.Errorf("share %q is not one of none, watch, drive", *l)
	}
	return nil
}

// checkBackend validates b (filling defaults) for a caller u; host backends need an admin
// and a server started with --allow-host-backend (403 with the reason); limits follow
// checkLimits (cur: the agent's current limits on an update, nil on create).
func (s *Server) checkBackend(u api.User, b *api.Backend, cur *api.Limits) error {
	switch b.Type {
	case api.BackendBwrap, api.BackendContainer, api.BackendHost:
	case "":
		return errorf(http.StatusBadRequest, nil, "backend.type is required: bwrap, container or host")
	default:
		return errorf(http.StatusBadRequest, nil, "backend.type %q is not one of bwrap, container, host", b.Type)
	}
	switch b.Network {
	case "":
		b.Network = api.NetworkNone
	case api.NetworkNone, api.NetworkFull:
	default:
		return errorf(http.StatusBadRequest, nil, "backend.network %q is not one of none, full", b.Network)
	}
	if b.Image != "" {
		if b.Type != api.BackendContainer {
			return errorf(http.StatusBadRequest, nil, "backend.image is only for container agents")
		}
		if !imageRE.MatchString(b.Image) {
			return errorf(http.StatusBadRequest, nil, "backend.image %q is not an image reference", b.Image)
		}
	}
	if err := s.checkLimits(u, b.Limits, cur); err != nil {
		return err
	}
	if b.Type == api.BackendHost {
		if !u.Admin {
			return errorf(http.StatusForbidden, nil, "a host agent is not isolated (it runs as the server's user): only an admin may create one")
		}
		if !s.cfg.AllowHostBackend {
			return errorf(http.StatusForbidden, nil, "a host agent is not isolated (it runs as the server's user): this server was not started with --allow-host-backend")
		}
	}
	return nil
}

func (s *Server) listAgents(c echo.Context) error {
	p := principalOf(c)
	all, err := s.st.ListAgents(c.Request().Context())
	if err != nil {
		return internalError("listing agents", err)
	}
	out := []api.Agent{}
	for _, a := range all {
		if visible(p.user.User, a) {
			a.Access = effectiveAccess(p.user.User, a)
			out = append(out, a)
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) createAgent(c echo.Context) error {
	p := principalOf(c)
	var req api.CreateAgentRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := validateAgentName(req.Name); err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	if err := validateShare(&req.Share); err != nil {
		return errorf(http.StatusBadRequest, nil, "%v", err)
	}
	if err := s.checkBackend(p.user.User, &req.Backend, nil); err != nil {
		return err
	}
	quota := s.cfg.Quotas.AgentsPerUser
	if p.user.Admin {
		quota = 0 // admins always have headroom
	}
	a, err := s.st.CreateAgentWithin(c.Request().Context(), api.Agent{Name: req.Name, OwnerID: p.user.ID, Backend: req.Backend, Share: req.Share}, quota)
	if errors.Is(err, store.ErrQuota) {
		return errorf(http.StatusForbidden, err, "agent quota reached: you already own %d agents (max %d per user); delete one first", quota, quota)
	} else if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, nil, "an agent named %q exists", req.Name)
	} else if err != nil {
		return internalError("creating the agent", err)
	}
	a.Access = effectiveAccess(p.user.User, a)
	s.dash.agentChanged(a.ID)
	s.audit(c, api.AuditEvent{Action: "agent.create", AgentID: a.ID, Detail: agentDetail(a)})
	return c.JSON(http.StatusCreated, a)
}

func agentDetail(a api.Agent) string {
	return fmt.Sprintf("agent %s owner=%s backend=%s network=%s share=%s", a.Name, a.Owner, a.Backend.Type, a.Backend.Network, a.Share)
}

func (s *Server) getAgent(c echo.Context) error { return c.JSON(http.StatusOK, agentOf(c)) }

func (s *Server) updateAgent(c echo.Context) error {
	p := principalOf(c)
	cur := agentOf(c)
	var req api.UpdateAgentRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name != nil {
		if err := validateAgentName(*req.Name); err != nil {
			return errorf(http.StatusBadRequest, nil, "%v", err)
		}
	}
	if req.Share != nil {
		if err := validateShare(req.Share); err != nil {
			return errorf(http.StatusBadRequest, nil, "%v", err)
		}
	}
	if req.Backend != nil {
		if err := s.checkBackend(p.user.User, req.Backend, &cur.Backend.Limits); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	a, err := s.st.UpdateAgent(ctx, cur.ID, store.AgentUpdate{Name: req.Name, Backend: req.Backend, Share: req.Share})
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such agent")
	} else if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, nil, "an agent with that name exists")
	} else if err != nil {
		return internalError("updating the agent", err)
	}
	// Viewers were authorized against the old share and backend: they reconnect and are
	// authorized again.
	s.kick(func(i socketInfo) bool { return i.agentID == a.ID }, "this agent's settings changed; reconnect")
	if req.Backend != nil && *req.Backend != cur.Backend {
		// The running helper was started by the old backend: stop it (keeping the home).
		s.stopAgent(ctx, a.ID, false)
	}
	a.Access = effectiveAccess(p.user.User, a)
	s.dash.agentChanged(a.ID)
	s.audit(c, api.AuditEvent{Action: "agent.update", AgentID: a.ID, Detail: agentDetail(a)})
	return c.JSON(http.StatusOK, a)
}

func (s *Server) deleteAgent(c echo.Context) error {
	a := agentOf(c)
	ctx := c.Request().Context()
	s.returnAgentProfile(ctx, a.ID, principalOf(c).actor(), "the agent was deleted")
	if err := s.st.DeleteAgent(ctx, a.ID); errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such agent")
	} else if err != nil {
		return internalError("deleting the agent", err)
	}
	s.stopAgent(ctx, a.ID, true)
	s.dash.agentChanged(a.ID)
	s.audit(c, api.AuditEvent{Action: "agent.delete", AgentID: a.ID, Detail: agentDetail(a)})
	return c.NoContent(http.StatusNoContent)
}

// stopAgent ends what every surface holds for the agent and stops its helper; purge also
// removes its home.
func (s *Server) stopAgent(ctx context.Context, id string, purge bool) {
	s.returnAgentProfile(ctx, id, "system", "the agent was stopped")
	s.kick(func(i socketInfo) bool { return i.agentID == id }, "this agent was stopped or deleted")
	for _, h := range s.surfaces {
		h.gw.CloseAgent(id)
	}
	if err := s.bridge.Forget(context.WithoutCancel(ctx), id, purge); err != nil {
		s.log.Error("stop agent helper", "agent", id, "purge", purge, "err", err)
	}
}

func (s *Server) listTokens(c echo.Context) error {
	ts, err := s.st.ListNamedTokens(c.Request().Context(), agentOf(c).ID)
	if err != nil {
		return internalError("listing tokens", err)
	}
	out := make([]api.Token, 0, len(ts))
	for _, t := range ts {
		t.Secret = ""
		out = append(out, t)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) createToken(c echo.Context) error {
	a := agentOf(c)
	var req api.CreateTokenRequest
	if r := c.Request(); r.ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	name := strings.TrimSpace(req.Name)
	if utf8.RuneCountInString(name) > store.MaxTokenName || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return errorf(http.StatusBadRequest, nil, "a token name is at most %d printable characters", store.MaxTokenName)
	}
	secret := TokenPrefix + newSecret()
	t, err := s.st.CreateNamedToken(c.Request().Context(), a.ID, sha(secret), name)
	if err != nil {
		return internalError("creating the token", err)
	}
	t.Secret = secret
	detail := "token " + t.ID
	if name != "" {
		detail += " " + strconv.Quote(name)
	}
	s.audit(c, api.AuditEvent{Action: "token.create", AgentID: a.ID, Detail: detail})
	return c.JSON(http.StatusCreated, t)
}

func (s *Server) deleteToken(c echo.Context) error {
	a := agentOf(c)
	tid := c.Param("tid")
	err := s.st.DeleteToken(c.Request().Context(), a.ID, tid)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, nil, "no such token on this agent")
	} else if err != nil {
		return internalError("revoking the token", err)
	}
	s.kick(func(i socketInfo) bool { return i.tokenID == tid }, "this agent token was revoked")
	s.audit(c, api.AuditEvent{Action: "token.revoke", AgentID: a.ID, Detail: "token " + tid})
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) exec(c echo.Context) error {
	a := agentOf(c)
	var req api.ExecRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return errorf(http.StatusBadRequest, nil, "command is required, e.g. [\"sh\",\"-c\",\"echo hi\"]")
	}
	if req.TimeoutS < 0 || req.TimeoutS > maxExecTimeoutS {
		return errorf(http.StatusBadRequest, nil, "timeout_s must be 0-%d", maxExecTimeoutS)
	}
	// The cap is taken before the helper is asked for a stream: a burst of execs waits its turn
	// here (429) instead of piling processes into the agent until its helper cannot fork.
	p := principalOf(c)
	release, err := s.execs.acquire(a.ID, p.user.ID, p.user.Admin && p.token == nil)
	if err != nil {
		return tooBusy(c, 1, err)
	}
	defer release()
	s.audit(c, api.AuditEvent{Action: "agent.exec", AgentID: a.ID, Surface: api.SurfaceTerminal, Mode: api.LevelDrive,
		Detail: truncate(quoteArgv(req.Command), 200)})
	res, err := s.bridge.Exec(c.Request().Context(), s.clampLimits(a), req)
	switch {
	case err == nil:
		return c.JSON(http.StatusOK, res)
	case errors.Is(err, bridges.ErrInvalidExec):
		return errorf(http.StatusBadRequest, err, "%v", err)
	case errors.Is(err, bridges.ErrHostNotAllowed):
		return errorf(http.StatusForbidden, err, "%v", err)
	case errors.Is(err, bridges.ErrBackendUnavailable):
		return errorf(http.StatusServiceUnavailable, err, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, err, "exec did not finish: %v", err)
	default:
		return errorf(http.StatusBadGateway, err, "exec failed in the agent's backend")
	}
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
