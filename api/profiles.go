package api

import "time"

// BrowserProfile is a person's own browser profile (their logins and cookies), kept in the
// gateway's data and lent to one of their agents at a time (GET/POST /api/profiles).
type BrowserProfile struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	OwnerID   string    `json:"owner_id"`
	Owner     string    `json:"owner"` // the owner's username
	CreatedAt time.Time `json:"created_at"`
	// LentTo is the agent whose browser uses the profile now ("" = not lent), LentToName its
	// name and LentAt since when.
	LentTo     string     `json:"lent_to,omitempty"`
	LentToName string     `json:"lent_to_name,omitempty"`
	LentAt     *time.Time `json:"lent_at,omitempty"`
}

// CreateProfileRequest is the body of POST /api/profiles.
type CreateProfileRequest struct {
	Name string `json:"name"` // 1-64 printable characters, unique among the owner's profiles
}

// LendProfileRequest is the body of POST /api/agents/:id/browser/profile.
type LendProfileRequest struct {
	ProfileID string `json:"profile_id"`
}

// Which profile an agent's browser uses (AgentBrowserProfile.Kind).
const (
	ProfileAgent = "agent" // the agent's own, in its home (/home/agent/.config/porthole-browser)
	ProfileLent  = "lent"  // a person's profile lent to the agent
)

// AgentBrowserProfile is which profile an agent's browser uses (GET, POST and DELETE
// /api/agents/:id/browser/profile).
type AgentBrowserProfile struct {
	Kind string `json:"kind"` // ProfileAgent or ProfileLent
	// Profile is the lent profile (Kind ProfileLent).
	Profile *BrowserProfile `json:"profile,omitempty"`
	// Restarted, in the answer to a lend or a take-back, says for people what restarted
	// (the agent's sandbox gets a profile only when it starts).
	Restarted string `json:"restarted,omitempty"`
}

// ProfileInUse is the body of a 409 answer to a lend of a profile that another agent uses:
// Error says so, LentTo/LentToName name that agent (take it back with DELETE
// /api/agents/<LentTo>/browser/profile).
type ProfileInUse struct {
	Error      string `json:"error"`
	ProfileID  string `json:"profile_id"`
	LentTo     string `json:"lent_to"`
	LentToName string `json:"lent_to_name"`
}
