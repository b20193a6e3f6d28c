//go:build !js

package terminal

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/gorilla/websocket"
	"github.com/porthole/porthole/api"
)

// Config configures the gateway side of the terminal surface. TODO(terminal helper): implement.
type Config struct {
	Scrollback  int           // bytes of scrollback per terminal (default 1 MiB)
	IdleTimeout time.Duration // a terminal with no attached client ends after this long (0 = never)
	MaxPerAgent int           // open terminals per agent (default 8)
	MaxTotal    int           // open terminals per server (default 64)
	Logger      *slog.Logger
}

// OpenFunc opens a terminal stream to the agent's helper (bridges.Manager.Conn + Open(StreamTerminal)).
type OpenFunc func(ctx context.Context, agent api.Agent) (net.Conn, error)

// Viewer is who is on the other end of a WebSocket, with the level the gateway granted.
type Viewer struct {
	ID   string    // user id or "token:<id>"
	Name string    // shown to the other viewers
	Mode api.Level // watch or drive; watchers' input is dropped here
}

// Service is the gateway side: terminals of all agents, their scrollback and their viewers.
type Service struct{}

func NewService(cfg Config, open OpenFunc) *Service { panic("TODO") }

// Serve runs one client's WebSocket until it closes or ctx ends; the server has already
// authenticated, authorized and upgraded it. It is the only writer of ws.
func (s *Service) Serve(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	panic("TODO")
}

// CloseAgent ends every terminal of an agent (agent deleted or helper stopped).
func (s *Service) CloseAgent(agentID string) { panic("TODO") }

// Close ends every terminal.
func (s *Service) Close() { panic("TODO") }

// ServeHelperStream is the helper's (in-sandbox) handler of one terminal stream.
func ServeHelperStream(ctx context.Context, stream net.Conn) { panic("TODO") }
