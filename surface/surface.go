// Package surface is the one plug-in point of Porthole's surfaces (terminal, desktop,
// browser): a surface is one package that exports a Description, and cmd/porthole lists the
// descriptions once. The helper (inside an agent's sandbox) serves the Description's
// Streams; the gateway (package server) builds the Gateway half from it and routes,
// authorizes, audits, stops and shuts it down without knowing the surface by name.
//
// The package is the contract between server and the surfaces: server consumes Gateway
// and Route, surfaces consume Viewer, Env and Lifetime. It imports no surface and no
// gateway package, so every surface can use it without importing another.
package surface

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// Description is one surface, as cmd/porthole lists it: both of its halves.
type Description struct {
	// Name is the surface's name in the API: its WebSocket is GET /api/agents/:id/<Name>,
	// its Routes live under it, and its permission is the user's level on Name.
	Name api.Surface
	// Streams are the helper's handlers, by stream kind (by convention the first is Name).
	Streams map[string]Handler
	// Gateway builds the gateway half once per gateway (nil = helper side only).
	Gateway func(env Env) (Gateway, error)
}

// Gateway is what the gateway (package server) uses of a surface's gateway half.
type Gateway interface {
	// Serve runs one viewer's WebSocket (GET /api/agents/:id/<surface>) until it closes or
	// ctx ends; the server has authenticated, authorized (at least watch) and upgraded it,
	// tracks it for shutdown and access changes, and audits attach and detach. Serve is the
	// only writer of ws. It returns nil when the viewer closed normally.
	Serve(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error
	// Routes are the surface's extra routes under /api/agents/:id/<surface>/.
	Routes() []Route
	// CloseAgent ends everything the surface holds for one agent: the agent was stopped,
	// deleted, or its backend changed (its helper is stopped next).
	CloseAgent(agentID string)
	// Close ends everything on gateway shutdown and waits for the surface's goroutines.
	Close()
}

// Route is one extra route of a surface, under /api/agents/:id/<surface>/<Path>. The server
// enforces Level on the surface before the handler runs (403 otherwise; 404 for an agent the
// caller cannot see; an agent token reaches its own agent only). Exactly one of HTTP and
// WebSocket is set.
type Route struct {
	Method string    // http.MethodGet, http.MethodPost, ...; a WebSocket route is a GET
	Path   string    // relative, e.g. "screenshot" or "cdp"; may hold Echo :params
	Level  api.Level // least level on the surface: api.LevelWatch or api.LevelDrive
	// HTTP serves a plain request (the server's middleware has checked Host, Origin,
	// JSON-only writes and the body size).
	HTTP func(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer)
	// WebSocket serves an upgraded WebSocket like Gateway.Serve: tracked, audited, closed
	// on shutdown and when the caller's access changes.
	WebSocket func(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error
}

// Env is what the gateway gives a surface's gateway half.
type Env struct {
	// Open opens a stream of kind to the agent's helper, starting the helper if needed.
	Open func(ctx context.Context, agent api.Agent, kind string) (net.Conn, error)
	// Audit records an event of this surface in the audit log: action is prefixed with
	// the surface's name ("open" → "terminal.open"); the actor is v. It returns once the
	// event is written.
	Audit func(agent api.Agent, v Viewer, action, detail string)
	// Caps are the operator's caps on the surface's sessions (serve flags; zero = the
	// surface's defaults).
	Caps   Caps
	Logger *slog.Logger
	// Changed tells the dashboard that what the surface's Status (StatusReporter) returns for
	// the agent may have changed: a session opened or ended, output, a new frame. It never
	// blocks and costs next to nothing while no dashboard is open; call it on every change,
	// the gateway coalesces (at most one thumbnail a second per agent). nil = no dashboard.
	Changed func(agentID string)
	// Handoff is the gateway's one control handoff: the surfaces that show an agent's screens
	// (desktop, browser) share it, so the agent has one driver at a time. nil = the surface
	// keeps its own.
	Handoff *Handoff
}

// Caps bound how many sessions (terminals, ...) a surface keeps open. Zero fields take the
// surface's defaults.
type Caps struct {
	MaxTotal    int // per gateway
	MaxPerAgent int
	MaxPerUser  int // per user account over all agents; admins are exempt
	// AdminReserve of MaxTotal only admins may use (0 = the surface's default, negative = none).
	AdminReserve int
}

// Viewer is who is on the other end of a surface's WebSocket or route, with the level the
// gateway granted.
type Viewer struct {
	ID   string    // user id, or "token:<id>" for an agent token
	Name string    // shown to other viewers
	Mode api.Level // watch or drive on this surface; watchers' input is dropped by the surface
	// User is the account what this viewer opens counts against: the user id, the agent's
	// owner for a token ("" = ID).
	User string
	// Admin viewers may use Caps.AdminReserve and are not held to MaxPerUser (never for a token).
	Admin bool
	// Token is the agent token's id when the viewer is an agent ("" for a person).
	Token string
	// Conn identifies this connection (WebSocket or request) among all of the gateway's:
	// one person in two tabs is two viewers with the same ID and different Conn.
	Conn uint64
}

// Handler serves one stream of its kind inside the helper; it owns the stream and closes
// it. ctx ends when the helper's session ends; LifetimeOf(ctx) holds the resources shared
// by the streams of that session.
type Handler func(ctx context.Context, stream net.Conn)
