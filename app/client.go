package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/porthole/porthole/api"
)

// Sentinel errors of the API client; match them with errors.Is.
var (
	// ErrUnauthorized means the session is missing or expired (HTTP 401).
	ErrUnauthorized = errors.New("not logged in")
	// ErrForbidden means the caller may not do this (HTTP 403).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound means the object does not exist or is not visible (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrRateLimited means too many attempts (HTTP 429).
	ErrRateLimited = errors.New("too many attempts")
)

// APIError is a non-2xx answer of the gateway, carrying its {"error": ...} message.
type APIError struct {
	Status     int
	Message    string
	RetryAfter string // Retry-After header of a 429, if any
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("the server answered %d", e.Status)
	}
	if e.RetryAfter != "" {
		return fmt.Sprintf("%s (retry in %s s)", msg, e.RetryAfter)
	}
	return msg
}

// HTTP statuses and methods the client uses (net/http stays out of app.wasm: it links crypto/tls).
const (
	statusUnauthorized    = 401
	statusForbidden       = 403
	statusNotFound        = 404
	statusTooManyRequests = 429

	methodGet    = "GET"
	methodPost   = "POST"
	methodPatch  = "PATCH"
	methodDelete = "DELETE"
)

// Unwrap maps the status to the package's sentinel errors.
func (e *APIError) Unwrap() error {
	switch e.Status {
	case statusUnauthorized:
		return ErrUnauthorized
	case statusForbidden:
		return ErrForbidden
	case statusNotFound:
		return ErrNotFound
	case statusTooManyRequests:
		return ErrRateLimited
	}
	return nil
}

// RoundTripFunc sends one request with the browser's session and returns the answer's status,
// its Retry-After header and its body. The WASM build uses the Fetch API (fetch_wasm.go); net/http's
// client would add megabytes of TLS code to app.wasm.
type RoundTripFunc func(ctx context.Context, method, url string, body []byte) (status int, retryAfter string, data []byte, err error)

// Client calls the gateway's JSON API with the browser's session cookie.
type Client struct {
	// Base is prefixed to API paths: "" in the browser (same origin), a URL in tests.
	Base string
	// RoundTrip sends the requests; nil means the platform's default (Fetch in WASM).
	RoundTrip RoundTripFunc
	// Timeout bounds each call; 0 means 30 s.
	Timeout time.Duration
}

// maxResponse bounds what the client reads from one answer.
const maxResponse = 8 << 20

// Do sends one request: in (if not nil) as JSON, the answer decoded into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = b
	}
	rt := c.RoundTrip
	if rt == nil {
		rt = defaultRoundTrip
	}
	status, retryAfter, data, err := rt(ctx, method, c.Base+path, body)
	if err != nil {
		return fmt.Errorf("cannot reach the server: %w", err)
	}
	if status < 200 || status > 299 {
		e := &APIError{Status: status, RetryAfter: retryAfter}
		var body api.Error
		if json.Unmarshal(data, &body) == nil {
			e.Message = body.Error
		}
		return e
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// Login opens a session (POST /api/session).
func (c *Client) Login(ctx context.Context, username, password string) error {
	return c.Do(ctx, methodPost, "/api/session", api.LoginRequest{Username: username, Password: password}, nil)
}

// Logout closes the session (DELETE /api/session).
func (c *Client) Logout(ctx context.Context) error {
	return c.Do(ctx, methodDelete, "/api/session", nil, nil)
}

// Me returns the logged-in user (GET /api/me).
func (c *Client) Me(ctx context.Context) (api.Me, error) {
	var me api.Me
	err := c.Do(ctx, methodGet, "/api/me", nil, &me)
	return me, err
}

// Agents lists the agents the caller can see (GET /api/agents).
func (c *Client) Agents(ctx context.Context) ([]api.Agent, error) {
	var list []api.Agent
	err := c.Do(ctx, methodGet, "/api/agents", nil, &list)
	return list, err
}

// Agent returns one agent (GET /api/agents/:id).
func (c *Client) Agent(ctx context.Context, id string) (api.Agent, error) {
	var a api.Agent
	err := c.Do(ctx, methodGet, "/api/agents/"+pathEscape(id), nil, &a)
	return a, err
}

// CreateAgent creates an agent (POST /api/agents).
func (c *Client) CreateAgent(ctx context.Context, req api.CreateAgentRequest) (api.Agent, error) {
	var a api.Agent
	err := c.Do(ctx, methodPost, "/api/agents", req, &a)
	return a, err
}

// UpdateAgent changes an agent (PATCH /api/agents/:id).
func (c *Client) UpdateAgent(ctx context.Context, id string, req api.UpdateAgentRequest) (api.Agent, error) {
	var a api.Agent
	err := c.Do(ctx, methodPatch, "/api/agents/"+pathEscape(id), req, &a)
	return a, err
}

// DeleteAgent deletes an agent (DELETE /api/agents/:id).
func (c *Client) DeleteAgent(ctx context.Context, id string) error {
	return c.Do(ctx, methodDelete, "/api/agents/"+pathEscape(id), nil, nil)
}

// Users lists the accounts (GET /api/users, admin).
func (c *Client) Users(ctx context.Context) ([]api.User, error) {
	var list []api.User
	err := c.Do(ctx, methodGet, "/api/users", nil, &list)
	return list, err
}

// CreateUser creates an account (POST /api/users, admin).
func (c *Client) CreateUser(ctx context.Context, req api.CreateUserRequest) (api.User, error) {
	var u api.User
	err := c.Do(ctx, methodPost, "/api/users", req, &u)
	return u, err
}

// UpdateUser changes an account (PATCH /api/users/:id).
func (c *Client) UpdateUser(ctx context.Context, id string, req api.UpdateUserRequest) error {
	return c.Do(ctx, methodPatch, "/api/users/"+pathEscape(id), req, nil)
}

// DeleteUser deletes an account (DELETE /api/users/:id, admin).
func (c *Client) DeleteUser(ctx context.Context, id string) error {
	return c.Do(ctx, methodDelete, "/api/users/"+pathEscape(id), nil, nil)
}

func isUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// Sessions lists the caller's login sessions (GET /api/sessions).
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var list []api.Session
	err := c.Do(ctx, methodGet, "/api/sessions", nil, &list)
	return list, err
}

// DeleteSession logs out another of the caller's sessions (DELETE /api/sessions/:id).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.Do(ctx, methodDelete, "/api/sessions/"+pathEscape(id), nil, nil)
}

// LogoutOthers logs out every session of the caller but this one (DELETE /api/sessions).
func (c *Client) LogoutOthers(ctx context.Context) error {
	return c.Do(ctx, methodDelete, "/api/sessions", nil, nil)
}

// Tokens lists an agent's tokens, without their secrets (GET /api/agents/:id/tokens).
func (c *Client) Tokens(ctx context.Context, agentID string) ([]api.Token, error) {
	var list []api.Token
	err := c.Do(ctx, methodGet, "/api/agents/"+pathEscape(agentID)+"/tokens", nil, &list)
	return list, err
}

// CreateToken mints an agent token; its Secret is in this answer only (POST /api/agents/:id/tokens).
func (c *Client) CreateToken(ctx context.Context, agentID, name string) (api.Token, error) {
	var t api.Token
	err := c.Do(ctx, methodPost, "/api/agents/"+pathEscape(agentID)+"/tokens", api.CreateTokenRequest{Name: name}, &t)
	return t, err
}

// RevokeToken revokes an agent token (DELETE /api/agents/:id/tokens/:tid).
func (c *Client) RevokeToken(ctx context.Context, agentID, tokenID string) error {
	return c.Do(ctx, methodDelete, "/api/agents/"+pathEscape(agentID)+"/tokens/"+pathEscape(tokenID), nil, nil)
}

// Audit reads the audit log (GET /api/audit?...); query is already encoded.
func (c *Client) Audit(ctx context.Context, query string) ([]api.AuditEvent, error) {
	var list []api.AuditEvent
	path := "/api/audit"
	if query != "" {
		path += "?" + query
	}
	err := c.Do(ctx, methodGet, path, nil, &list)
	return list, err
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	Store struct {
		OK    bool   `json:"ok"`
		Kind  string `json:"kind"`
		Error string `json:"error"`
	} `json:"store"`
	Backends []api.BackendHealth `json:"backends"`
}

// Ready reads the gateway's readiness: the store and each backend (GET /readyz). A 503 (the
// store is down) still carries the body.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var r Readiness
	err := c.Do(ctx, methodGet, "/readyz", nil, &r)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 503 {
		err = nil
		r.Ready = false
	}
	return r, err
}
