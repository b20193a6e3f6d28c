package surface

import "time"

// Status is what a surface shows of one agent on the dashboard (GET /api/dashboard): how
// many sessions it holds and a thumbnail. The gateway asks for it only while a dashboard is
// open, after the surface called Env.Changed, at most once a second per agent.
type Status struct {
	// Sessions is how many sessions the surface holds for the agent (open terminals; a
	// desktop or a browser: 1 while it runs).
	Sessions int
	// Lines is a text thumbnail (the terminal: the last lines of its most recently active
	// terminal, escape sequences removed), nil when there is none. It is agent output: the
	// app shows it as text.
	Lines []string
	// Image is an image thumbnail (a small JPEG or PNG of the display or the page), nil when
	// there is none; ImageType is its media type ("image/jpeg"). Keep it small (a few KB):
	// every dashboard that may watch the surface gets it.
	Image     []byte
	ImageType string
	// Active is when the surface last showed activity (output, a frame); zero if never.
	Active time.Time
}

// StatusReporter is an optional interface of a Gateway: a surface that implements it has its
// sessions and thumbnail shown on the dashboard. Status must be cheap and must not block on
// the agent (no helper I/O): it reads what the gateway half already holds.
type StatusReporter interface {
	Status(agentID string) Status
}
