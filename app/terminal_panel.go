package app

import (
	"github.com/maxence-charriere/go-app/v10/pkg/app"
	"github.com/porthole/porthole/api"
)

// TerminalPanel shows an agent's terminals: one WebSocket to /api/agents/:id/terminal
// carrying a tab per terminal, rendered by xterm.js through assets/static/terminal.js.
type TerminalPanel struct {
	app.Compo

	// AgentID is the agent whose terminals are shown.
	AgentID string
	// Mode is the caller's level on the terminal surface (watch or drive).
	Mode api.Level
}

// Render draws the panel.
func (p *TerminalPanel) Render() app.UI {
	return app.Div().Class("terminal-panel").Body(
		app.Div().Class("terminal-status").Text("terminal"),
	)
}
