//go:build !js

package browser

import (
	"context"
	"errors"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// TODO(browser-core): the per-agent CDP multiplexer over one helper stream.

// cdpState is the CDP side's part of Service.
type cdpState struct{}

func (s *Service) initCDP() {}

// newClient returns a new CDP client of agent's browser, starting the helper and Chromium
// if needed; name says who it is in logs and audit ("view", "automation:<token>").
func (s *Service) newClient(ctx context.Context, agent api.Agent, name string) (cdpClient, error) {
	return nil, errors.New("browser: not implemented yet")
}

func (s *Service) cdpRoutes() []surface.Route { return nil }
func (s *Service) closeCDPAgent(agentID string) {}
func (s *Service) closeCDP()                    {}
