//go:build !js

package browser

import (
	"context"
	"errors"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// TODO(browser-view): the live view.

// viewState is the live view's part of Service.
type viewState struct{}

func (s *Service) initView() {}

func (s *Service) serveView(ctx context.Context, ws *websocket.Conn, agent api.Agent, v Viewer) error {
	return errors.New("browser: the live view is not implemented yet")
}

func (s *Service) viewRoutes() []surface.Route   { return nil }
func (s *Service) closeViewAgent(agentID string) {}
func (s *Service) closeView()                    {}
