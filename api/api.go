// Package api holds the JSON types of Porthole's public HTTP API, shared by the gateway and the WASM app.
package api

import (
	"fmt"
	"time"
)

// Level is a permission level on one surface: none < watch < drive.
type Level string

// Permission levels, in increasing order.
const (
	LevelNone  Level = "none"
	LevelWatch Level = "watch"
	LevelDrive Level = "drive"
)

func (l Level) rank() int {
	switch l {
	case LevelWatch:
		return 1
	case LevelDrive:
		return 2
	}
	return 0
}

// Valid reports whether l is one of the three levels.
func (l Level) Valid() bool { return l == LevelNone || l == LevelWatch || l == LevelDrive }

// AtLeast reports whether l grants at least min.
func (l Level) AtLeast(min Level) bool { return l.rank() >= min.rank() }

// Min returns the lower of two levels.
func Min(a, b Level) Level {
	if a.rank() < b.rank() {
		return a
	}
	return b
}

// Surface names an agent's work surface.
type Surface string

// The surfaces of an agent.
const (
	SurfaceTerminal Surface = "terminal"
	SurfaceDesktop  Surface = "desktop"
	SurfaceBrowser  Surface = "browser"
)

// Surfaces lists every surface, in display order.
var Surfaces = []Surface{SurfaceTerminal, SurfaceDesktop, SurfaceBrowser}

// Permissions are a user's levels per surface.
type Permissions struct {
	Terminal Level `json:"terminal"`
	Desktop  Level `json:"desktop"`
	Browser  Level `json:"browser"`
}

// Get returns the level for surface s.
func (p Permissions) Get(s Surface) Level {
	switch s {
	case SurfaceTerminal:
		return p.Terminal
	case SurfaceDesktop:
		return p.Desktop
	case SurfaceBrowser:
		return p.Browser
	}
	return LevelNone
}

// Validate checks that every level is known.
func (p Permissions) Validate() error {
	for _, s := range Surfaces {
		if !p.Get(s).Valid() {
			return fmt.Errorf("permissions.%s: %q is not one of none, watch, drive", s, p.Get(s))
		}
	}
	return nil
}

// DefaultPermissions is what a new non-admin user gets when none are given.
var DefaultPermissions = Permissions{Terminal: LevelDrive, Desktop: LevelDrive, Browser: LevelDrive}

// User is an account as the API shows it (never its password hash).
type User struct {
	ID          string      `json:"id"`
	Username    string      `json:"username"`
	Admin       bool        `json:"admin"`
	Permissions Permissions `json:"permissions"`
	CreatedAt   time.Time   `json:"created_at"`
}

// Backend types.
const (
	BackendBwrap     = "bwrap"
	BackendContainer = "container"
	BackendHost      = "host"
)

// Network modes of a backend.
const (
	NetworkNone = "none"
	NetworkFull = "full"
)

// Limits bound an agent's resources; zero means the server default.
type Limits struct {
	Pids      int   `json:"pids,omitempty"`
	MemoryMiB int64 `json:"memory_mib,omitempty"`
	CPUPct    int   `json:"cpu_pct,omitempty"`  // 100 = one core
	DiskMiB   int64 `json:"disk_mib,omitempty"` // size limit of the agent's home
}

// Backend is an agent's isolation backend.
type Backend struct {
	Type    string `json:"type"`            // bwrap | container | host
	Network string `json:"network"`         // none | full
	Image   string `json:"image,omitempty"` // container only
	Limits  Limits `json:"limits,omitempty"`
}

// Isolated reports whether the backend sandboxes the agent (everything but host).
func (b Backend) Isolated() bool { return b.Type != BackendHost }

// Agent is an agent as the API shows it.
type Agent struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	OwnerID   string    `json:"owner_id"`
	Owner     string    `json:"owner"` // owner's username
	Backend   Backend   `json:"backend"`
	Share     Level     `json:"share"`
	CreatedAt time.Time `json:"created_at"`
	// Access is the caller's effective level per surface (filled per request).
	Access Permissions `json:"access"`
}

// Me is the body of GET /api/me.
type Me struct {
	ID          string      `json:"id"`
	Username    string      `json:"username"`
	Admin       bool        `json:"admin"`
	Permissions Permissions `json:"permissions"`
}

// LoginRequest is the body of POST /api/session.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// CreateUserRequest is the body of POST /api/users.
type CreateUserRequest struct {
	Username    string       `json:"username"`
	Password    string       `json:"password"`
	Admin       bool         `json:"admin"`
	Permissions *Permissions `json:"permissions,omitempty"`
}

// UpdateUserRequest is the body of PATCH /api/users/:id; nil fields are unchanged.
// CurrentPassword is required when a user changes their own password (admins resetting
// another user's password leave it out).
type UpdateUserRequest struct {
	Password        *string      `json:"password,omitempty"`
	CurrentPassword *string      `json:"current_password,omitempty"`
	Admin           *bool        `json:"admin,omitempty"`
	Permissions     *Permissions `json:"permissions,omitempty"`
}

// CreateAgentRequest is the body of POST /api/agents.
type CreateAgentRequest struct {
	Name    string  `json:"name"`
	Backend Backend `json:"backend"`
	Share   Level   `json:"share"`
}

// UpdateAgentRequest is the body of PATCH /api/agents/:id; nil fields are unchanged.
type UpdateAgentRequest struct {
	Name    *string  `json:"name,omitempty"`
	Backend *Backend `json:"backend,omitempty"`
	Share   *Level   `json:"share,omitempty"`
}

// Token is an agent token; Secret is present only in the create response.
type Token struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agent_id"`
	Name      string    `json:"name,omitempty"`
	Secret    string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ExecRequest is the body of POST /api/agents/:id/exec.
type ExecRequest struct {
	Command  []string `json:"command"`
	Stdin    string   `json:"stdin,omitempty"`
	TimeoutS int      `json:"timeout_s,omitempty"`
}

// ExecResult is the response of POST /api/agents/:id/exec.
type ExecResult struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	TimedOut        bool   `json:"timed_out,omitempty"`
}

// AuditEvent is one audit log row.
type AuditEvent struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`  // username, "token:<id>" or "" for anonymous
	Action  string    `json:"action"` // e.g. login.ok, login.fail, user.create, agent.update, surface.attach, surface.detach
	AgentID string    `json:"agent_id,omitempty"`
	Surface Surface   `json:"surface,omitempty"`
	Mode    Level     `json:"mode,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Remote  string    `json:"remote,omitempty"`
}

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
}
