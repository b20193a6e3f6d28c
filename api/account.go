package api

import "time"

// Session is one login session of the caller (GET /api/sessions). ID is derived from the
// session; it is not the cookie and cannot be used to log in.
type Session struct {
	ID        string    `json:"id"`
	Current   bool      `json:"current"` // the session of this request
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	UserAgent string    `json:"user_agent,omitempty"` // the browser that logged in (as it said)
	Remote    string    `json:"remote,omitempty"`     // the client address it logged in from
}

// CreateTokenRequest is the (optional) body of POST /api/agents/:id/tokens.
type CreateTokenRequest struct {
	Name string `json:"name,omitempty"` // a label for people ("claude on the laptop"); at most 64 characters
}
