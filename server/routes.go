package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
)

// routes builds the Echo instance: middleware shared by every response, then each route
// with its access rule (see require).
func (s *Server) routes(web http.Handler) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = s.realIP
	e.Use(s.observe, s.recoverPanic, s.securityHeaders, s.hostCheck, s.originCheck, jsonOnly, bodyLimit)

	var (
		anyone    = rule{anonymous: true}
		user      = rule{}
		admin     = rule{admin: true}
		seeAgent  = rule{agent: true, token: true}
		manage    = rule{agent: true, manage: true}
		execRule  = rule{agent: true, token: true, surface: api.SurfaceTerminal, level: api.LevelDrive}
		watchOn   = func(sf api.Surface) rule { return rule{agent: true, token: true, surface: sf, level: api.LevelWatch} }
		allowed   = func(r rule) echo.MiddlewareFunc { return s.require(r) }
		agentPath = "/api/agents/:id"
	)
	e.POST("/api/session", s.login, allowed(anyone))
	e.DELETE("/api/session", s.logout, allowed(user))
	e.GET("/api/me", s.me, allowed(user))
	e.GET("/api/sessions", s.listSessions, allowed(user))
	e.DELETE("/api/sessions", s.deleteOtherSessions, allowed(user))
	e.DELETE("/api/sessions/:sid", s.deleteSession, allowed(user))
	e.GET("/api/dashboard", s.dashboard, allowed(user))

	e.GET("/api/users", s.listUsers, allowed(admin))
	e.POST("/api/users", s.createUser, allowed(admin))
	e.PATCH("/api/users/:id", s.updateUser, allowed(user)) // admin, or self for the password (checked in updateUser)
	e.DELETE("/api/users/:id", s.deleteUser, allowed(admin))

	e.GET("/api/agents", s.listAgents, allowed(user))
	e.POST("/api/agents", s.createAgent, allowed(user))
	e.GET(agentPath, s.getAgent, allowed(seeAgent))
	e.PATCH(agentPath, s.updateAgent, allowed(manage))
	e.DELETE(agentPath, s.deleteAgent, allowed(manage))
	e.GET(agentPath+"/tokens", s.listTokens, allowed(manage))
	e.POST(agentPath+"/tokens", s.createToken, allowed(manage))
	e.DELETE(agentPath+"/tokens/:tid", s.deleteToken, allowed(manage))
	e.POST(agentPath+"/exec", s.exec, allowed(execRule))
	for _, sf := range api.Surfaces {
		e.GET(agentPath+"/"+string(sf), s.surface(sf), allowed(watchOn(sf)))
	}
	for _, h := range s.surfaces {
		for _, r := range h.gw.Routes() {
			on := rule{agent: true, token: true, surface: h.name, level: r.Level}
			e.Add(r.Method, agentPath+"/"+string(h.name)+"/"+r.Path, s.surfaceRoute(h.name, r), allowed(on))
		}
	}

	// People's browser profiles (profiles.go): lending checks the profile's owner itself.
	e.GET("/api/profiles", s.listProfiles, allowed(user))
	e.POST("/api/profiles", s.createProfile, allowed(user))
	e.DELETE("/api/profiles/:pid", s.deleteProfile, allowed(user))
	e.GET(agentPath+"/browser/profile", s.getAgentProfile, allowed(seeAgent))
	e.POST(agentPath+"/browser/profile", s.lendProfile, allowed(user))
	e.DELETE(agentPath+"/browser/profile", s.returnProfile, allowed(manage))

	e.GET("/api/audit", s.listAudit, allowed(user))
	e.Any("/api/*", func(c echo.Context) error {
		return errorf(http.StatusNotFound, nil, "no such route: %s %s", c.Request().Method, c.Request().URL.Path)
	})

	e.GET("/healthz", s.healthz)
	e.HEAD("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.handler()))

	w := s.pages(web)
	e.GET("/*", w)
	e.HEAD("/*", w)
	return e
}
