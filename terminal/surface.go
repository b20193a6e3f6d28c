//go:build !js

package terminal

import (
	"context"
	"fmt"
	"net"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// StreamKind is the helper stream that runs one terminal (hproto.go).
const StreamKind = string(api.SurfaceTerminal)

// Surface is the terminal surface as cmd/porthole lists it: ServeHelperStream in the
// helper, a Service in the gateway.
var Surface = surface.Description{
	Name:    api.SurfaceTerminal,
	Streams: map[string]surface.Handler{StreamKind: ServeHelperStream},
	Gateway: newGateway,
}

var _ surface.Gateway = (*Service)(nil)

func newGateway(env surface.Env) (surface.Gateway, error) {
	cfg := Config{MaxTotal: env.Caps.MaxTotal, MaxPerAgent: env.Caps.MaxPerAgent,
		MaxPerUser: env.Caps.MaxPerUser, AdminReserve: env.Caps.AdminReserve, Logger: env.Logger,
		OnChange: env.Changed}
	if env.Audit != nil {
		// Every attach to one terminal (the opener's included), beside the surface.attach of
		// the WebSocket that carries it.
		cfg.OnAttach = func(agent api.Agent, v Viewer, id uint32, opened bool) {
			action := "attach"
			if opened {
				action = "open"
			}
			env.Audit(agent, v, action, fmt.Sprintf("terminal %d", id))
		}
	}
	return NewService(cfg, func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		return env.Open(ctx, agent, StreamKind)
	}), nil
}
