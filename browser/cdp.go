//go:build !js

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/browser/internal/cdpmux"
)

// The CDP side of the gateway: per agent in use, one helper stream (the pipe of the agent's
// Chromium, helper_linux.go) and one cdpmux.Mux over it; every client (the live view of the
// agent, each automation WebSocket of cdproute.go) is a cdpmux.Client with its own id space
// and browser session (docs/browser-cdp.md). When the last client closes, the stream stays
// open for cdpGrace (a reload or the next automation step finds the browser warm), then it is
// closed (the helper keeps Chromium until its session ends). A browser that exits or crashes
// ends the stream: every client's Recv fails with the helper's reason, and the next newClient
// opens a new stream, which starts Chromium again.

// ExitMethod is the helper's last message on a browser stream when the browser exited or
// could not start; params.message says why (the gateway's clients get it as their error).
const ExitMethod = "Porthole.browserExited"

// defaultCDPGrace keeps an agent's browser stream open after its last client left.
const defaultCDPGrace = 30 * time.Second

// cdpState is the CDP side's part of Service.
type cdpState struct {
	cdpMu     sync.Mutex
	cdpAgents map[string]*agentCDP
	cdpClosed bool
	cdpWG     sync.WaitGroup // the grace timers' callbacks and the closers of muxes
	// cdpGrace is how long an agent's stream stays open without clients (tests shorten it).
	cdpGrace time.Duration

	// cdpInputAllowed, set by the live view (view.go) before any client connects, says whether
	// automation may send input to agentID's browser now; when it may not (a person holds
	// control), Input.* calls from automation clients get a CDP error naming holder. nil =
	// always allowed.
	cdpInputAllowed func(agentID string) (ok bool, holder string)

	// cdpAutomationChanged, if set by the live view before any client connects, is called
	// (without locks held) after an automation connection of agentID opened or closed: the
	// view then reads automating(agentID) for its "agent automating" indicator.
	cdpAutomationChanged func(agentID string)

	// autoMu guards automation: the open automation connections (cdproute.go) by agent and
	// connection id, for automating.
	autoMu     sync.Mutex
	automation map[string]map[uint64]Viewer
	autoSlots  map[string]int // automation connections open or opening, by agent (maxAutomation)

	// cdpReadTimeout, if set (nanoseconds), replaces the constant for new automation
	// connections (tests).
	cdpReadTimeout atomic.Int64
}

// agentCDP is one agent's browser connection.
type agentCDP struct {
	ready chan struct{} // closed once mux or err is set
	mux   *cdpmux.Mux
	err   error
	grace *time.Timer // running while the mux has no clients
}

func (s *Service) initCDP() {
	s.cdpAgents = map[string]*agentCDP{}
	s.automation = map[string]map[uint64]Viewer{}
	if s.cdpGrace <= 0 {
		s.cdpGrace = defaultCDPGrace
	}
}

// errCDPClosed: the gateway is shutting down.
var errCDPClosed = errors.New("browser: the gateway is closing")

// newClient returns a new CDP client of agent's browser, starting the helper and Chromium
// if needed; name says who it is in logs and audit ("view", "automation:<token>"). A client
// named "automation:…" is an automation client: its Input.* calls are refused while
// cdpInputAllowed says a person holds control. Download behaviour is not filtered: Playwright
// sets its own downloadPath (/tmp/playwright-artifacts-…) as it connects, and any path is in
// the agent's sandbox (docs/browser-cdp.md, "What a client may call").
func (s *Service) newClient(ctx context.Context, agent api.Agent, name string) (cdpClient, error) {
	automation := strings.HasPrefix(name, "automation:")
	filter := func(method string, _ json.RawMessage) error {
		if !automation || !strings.HasPrefix(method, "Input.") || s.cdpInputAllowed == nil {
			return nil
		}
		if ok, holder := s.cdpInputAllowed(agent.ID); !ok {
			return fmt.Errorf("porthole: %s has taken control of this browser; automation input (%s) is refused until they release it", holder, method)
		}
		return nil
	}
	for attempt := 0; ; attempt++ {
		m, err := s.agentMux(ctx, agent)
		if err != nil {
			return nil, err
		}
		c, err := m.NewClient(ctx, name, filter)
		if err == nil {
			return c, nil
		}
		select {
		case <-m.Done():
			// The stream ended meanwhile (the browser exited): one more try on a new one.
			s.dropMux(agent.ID, m)
			if attempt == 0 && ctx.Err() == nil {
				continue
			}
		default:
		}
		return nil, fmt.Errorf("browser: %w", err)
	}
}

var _ cdpClient = (*cdpmux.Client)(nil)

// agentMux returns the agent's mux, opening its helper stream if needed.
func (s *Service) agentMux(ctx context.Context, agent api.Agent) (*cdpmux.Mux, error) {
	for {
		s.cdpMu.Lock()
		if s.cdpClosed {
			s.cdpMu.Unlock()
			return nil, errCDPClosed
		}
		a := s.cdpAgents[agent.ID]
		if a != nil {
			s.cdpMu.Unlock()
			select {
			case <-a.ready:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if a.err != nil {
				return nil, a.err
			}
			select {
			case <-a.mux.Done():
				s.dropMux(agent.ID, a.mux)
				continue
			default:
			}
			s.cdpMu.Lock()
			s.stopGraceLocked(a)
			s.cdpMu.Unlock()
			return a.mux, nil
		}
		a = &agentCDP{ready: make(chan struct{})}
		s.cdpAgents[agent.ID] = a
		s.cdpMu.Unlock()

		stream, err := s.open(ctx, agent)
		s.cdpMu.Lock()
		if err == nil && s.cdpClosed {
			stream.Close()
			err = errCDPClosed
		}
		if err != nil {
			a.err = fmt.Errorf("browser: open the helper stream: %w", err)
			if s.cdpAgents[agent.ID] == a {
				delete(s.cdpAgents, agent.ID)
			}
		} else {
			id := agent.ID
			var mux *cdpmux.Mux
			mux = cdpmux.New(stream, cdpmux.Config{
				Logger:     s.log.With("agent", id),
				ExitMethod: ExitMethod,
				OnIdle:     func() { s.idle(id, mux) },
			})
			a.mux = mux
		}
		s.cdpMu.Unlock()
		close(a.ready)
		if a.err != nil {
			return nil, a.err
		}
		return a.mux, nil
	}
}

// idle starts the grace period of agentID's mux once its last client left.
func (s *Service) idle(agentID string, m *cdpmux.Mux) {
	s.cdpMu.Lock()
	defer s.cdpMu.Unlock()
	a := s.cdpAgents[agentID]
	if a == nil || a.mux != m || s.cdpClosed {
		return
	}
	s.stopGraceLocked(a)
	var t *time.Timer
	s.cdpWG.Add(1)
	t = time.AfterFunc(s.cdpGrace, func() { // owner: the Service (cdpWG)
		defer s.cdpWG.Done()
		s.cdpMu.Lock()
		cur := s.cdpAgents[agentID]
		if cur != a || a.grace != t || m.Clients() > 0 {
			s.cdpMu.Unlock()
			return
		}
		delete(s.cdpAgents, agentID)
		s.cdpMu.Unlock()
		s.log.Info("browser: no CDP client for the grace period; closing the helper stream", "agent", agentID)
		m.Close()
	})
	a.grace = t
}

// dropMux forgets m as agentID's mux (it ended) and closes it.
func (s *Service) dropMux(agentID string, m *cdpmux.Mux) {
	s.cdpMu.Lock()
	if a := s.cdpAgents[agentID]; a != nil && a.mux == m {
		delete(s.cdpAgents, agentID)
		s.stopGraceLocked(a)
	}
	s.cdpMu.Unlock()
	m.Close()
}

// stopGraceLocked stops a's grace timer (releasing its cdpWG share if it had not fired).
func (s *Service) stopGraceLocked(a *agentCDP) {
	if a.grace != nil && a.grace.Stop() {
		s.cdpWG.Done()
	}
	a.grace = nil
}

// closeCDPAgent ends agentID's browser connection and every CDP client of it.
func (s *Service) closeCDPAgent(agentID string) {
	s.cdpMu.Lock()
	a := s.cdpAgents[agentID]
	delete(s.cdpAgents, agentID)
	if a != nil {
		s.stopGraceLocked(a)
	}
	s.cdpMu.Unlock()
	if a != nil {
		<-a.ready
		if a.mux != nil {
			a.mux.Close()
		}
	}
}

// closeCDP ends every browser connection and waits for the CDP side's goroutines.
func (s *Service) closeCDP() {
	s.cdpMu.Lock()
	s.cdpClosed = true
	agents := s.cdpAgents
	s.cdpAgents = map[string]*agentCDP{}
	for _, a := range agents {
		s.stopGraceLocked(a)
	}
	s.cdpMu.Unlock()
	for _, a := range agents {
		<-a.ready
		if a.mux != nil {
			a.mux.Close()
		}
	}
	s.cdpWG.Wait()
}

// automating returns the automation connections (the agent's own CDP clients of
// cdproute.go) open on agentID's browser now, for the live view's "agent automating"
// indicator; empty when none.
func (s *Service) automating(agentID string) []Viewer {
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	var vs []Viewer
	for _, v := range s.automation[agentID] {
		vs = append(vs, v)
	}
	return vs
}
