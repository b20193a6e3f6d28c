package api

import "time"

// Agent helper states, as the dashboard shows them.
const (
	// StateStopped: no helper runs for the agent (never started, stopped when idle, crashed).
	StateStopped = "stopped"
	// StateStarting: the agent's backend is starting its helper.
	StateStarting = "starting"
	// StateRunning: the helper runs with open sessions (terminals, a desktop, an exec).
	StateRunning = "running"
	// StateIdle: the helper runs with nothing open; it stops after the server's idle timeout.
	StateIdle = "idle"
)

// Dashboard message types (GET /api/dashboard, a WebSocket of JSON text messages).
const (
	DashSnapshot = "snapshot" // every agent the user may see, once at connect
	DashAgent    = "agent"    // one agent changed (or became visible)
	DashRemoved  = "removed"  // an agent was deleted or is no longer visible
	DashBackends = "backends" // the backends' health (after the snapshot, and when it changes)
)

// DashboardMessage is one message of the dashboard WebSocket, server to client.
type DashboardMessage struct {
	Type     string           `json:"type"`
	Agents   []DashboardAgent `json:"agents,omitempty"`   // snapshot
	Agent    *DashboardAgent  `json:"agent,omitempty"`    // agent
	ID       string           `json:"id,omitempty"`       // removed
	Backends []BackendHealth  `json:"backends,omitempty"` // backends
}

// DashboardAgent is one agent's live card: the agent (with the caller's Access), its helper's
// state, who is attached and what its surfaces hold. Only what the caller's level allows is
// filled: a surface they may not watch shows neither its viewers nor its thumbnail.
type DashboardAgent struct {
	Agent
	State string `json:"state"` // StateStopped, StateStarting, StateRunning, StateIdle
	// Problem says, as a sentence for people, why the helper last failed to start or stopped
	// on its own (a crash, an unavailable backend); "" when nothing went wrong.
	Problem  string             `json:"problem,omitempty"`
	Viewers  []DashboardViewer  `json:"viewers"`
	Surfaces []DashboardSurface `json:"surfaces"`
}

// DashboardViewer is one person (or agent token) attached to a surface, with their level.
type DashboardViewer struct {
	Name    string  `json:"name"`
	Surface Surface `json:"surface"`
	Mode    Level   `json:"mode"`
	Count   int     `json:"count"`         // connections (tabs) of this person on this surface
	You     bool    `json:"you,omitempty"` // the caller
}

// DashboardSurface is what one surface holds for the agent.
type DashboardSurface struct {
	Surface  Surface `json:"surface"`
	Sessions int     `json:"sessions"` // open terminals (a desktop, a browser: 1 while it runs)
	// Lines is a text thumbnail: the terminal's last lines, escape sequences removed (agent
	// output: show it as text).
	Lines []string `json:"lines,omitempty"`
	// Image is an image thumbnail as a data: URL (desktop and browser surfaces, at most one a second).
	Image  string    `json:"image,omitempty"`
	Active time.Time `json:"active,omitzero"` // last output or frame
}

// BackendHealth is one backend's readiness, as /readyz reports it.
type BackendHealth struct {
	Backend string `json:"backend"`
	OK      bool   `json:"ok"`
	Detail  string `json:"detail"`
}
