package server

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

// LimitPolicy is who may set which agent resource limits. Default applies to every agent that
// sets no limit (it is passed to the backends) and is the most a non-admin may ask for; Max is
// the most an admin may ask for. Zero fields take bridges.DefaultLimits and DefaultMaxLimits.
type LimitPolicy struct {
	Default api.Limits
	Max     api.Limits
}

// DefaultMaxLimits are the ceilings when the server sets none.
var DefaultMaxLimits = api.Limits{Pids: 8192, MemoryMiB: 64 << 10, CPUPct: 100 * runtime.NumCPU(), DiskMiB: 100 << 10}

// absoluteLimits bound every limit anyone may ask for; beyond them a request is malformed (400).
var absoluteLimits = api.Limits{Pids: 1 << 20, MemoryMiB: 1 << 24, CPUPct: 100 * 1024, DiskMiB: 1 << 24}

// Quotas bound what one user may hold at once. Zero fields take the defaults below.
type Quotas struct {
	AgentsPerUser int // agents a non-admin may own (default 32; admins are exempt)
	ExecsPerAgent int // concurrent execs on one agent, whoever runs them (default 16)
	ExecsPerUser  int // concurrent execs of one non-admin user over all agents (default 32)
}

// Quota defaults.
const (
	DefaultAgentsPerUser = 32
	DefaultExecsPerAgent = 16
	DefaultExecsPerUser  = 32
)

// limitFields lists api.Limits' fields, read and written as int64, with their flags.
var limitFields = []struct {
	name, defFlag, maxFlag string
	get                    func(api.Limits) int64
	set                    func(*api.Limits, int64)
}{
	{"pids", "default-pids", "max-pids", func(l api.Limits) int64 { return int64(l.Pids) }, func(l *api.Limits, v int64) { l.Pids = int(v) }},
	{"memory_mib", "default-memory-mib", "max-memory-mib", func(l api.Limits) int64 { return l.MemoryMiB }, func(l *api.Limits, v int64) { l.MemoryMiB = v }},
	{"cpu_pct", "default-cpu-pct", "max-cpu-pct", func(l api.Limits) int64 { return int64(l.CPUPct) }, func(l *api.Limits, v int64) { l.CPUPct = int(v) }},
	{"disk_mib", "default-disk-mib", "max-disk-mib", func(l api.Limits) int64 { return l.DiskMiB }, func(l *api.Limits, v int64) { l.DiskMiB = v }},
}

// resolve fills zero fields and checks Default <= Max <= the absolute bounds.
func (p LimitPolicy) resolve() (LimitPolicy, error) {
	for _, f := range limitFields {
		d, m, abs := f.get(p.Default), f.get(p.Max), f.get(absoluteLimits)
		if d == 0 {
			d = f.get(bridges.DefaultLimits)
		}
		if m == 0 {
			m = max(f.get(DefaultMaxLimits), d)
		}
		switch {
		case d < 0 || d > abs:
			return p, fmt.Errorf("default %s %d: must be 1-%d (--%s)", f.name, d, abs, f.defFlag)
		case m < 0 || m > abs:
			return p, fmt.Errorf("max %s %d: must be 1-%d (--%s)", f.name, m, abs, f.maxFlag)
		case d > m:
			return p, fmt.Errorf("default %s %d is above the max %d (--%s, --%s)", f.name, d, m, f.defFlag, f.maxFlag)
		}
		f.set(&p.Default, d)
		f.set(&p.Max, m)
	}
	return p, nil
}

func (q Quotas) resolve() Quotas {
	if q.AgentsPerUser <= 0 {
		q.AgentsPerUser = DefaultAgentsPerUser
	}
	if q.ExecsPerAgent <= 0 {
		q.ExecsPerAgent = DefaultExecsPerAgent
	}
	if q.ExecsPerUser <= 0 {
		q.ExecsPerUser = DefaultExecsPerUser
	}
	return q
}

// checkLimits enforces the limit policy on a requested l (0 = the server default): outside the
// absolute bounds is 400; a non-admin above the default (or above what the agent already has,
// cur, so that an admin's raise survives the owner's edits) is 403; an admin above Max is 403.
func (s *Server) checkLimits(u api.User, l api.Limits, cur *api.Limits) error {
	for _, f := range limitFields {
		v, abs := f.get(l), f.get(absoluteLimits)
		if v < 0 || v > abs {
			return errorf(http.StatusBadRequest, nil, "backend.limits.%s %d is out of range (0-%d; 0 = the server default)", f.name, v, abs)
		}
		def, ceiling := f.get(s.limits.Default), f.get(s.limits.Max)
		if u.Admin {
			if v > ceiling {
				return errorf(http.StatusForbidden, nil, "backend.limits.%s %d is above the server's maximum %d (--%s)", f.name, v, ceiling, f.maxFlag)
			}
			continue
		}
		allowed := def
		if cur != nil {
			allowed = max(allowed, f.get(*cur))
		}
		if v > allowed {
			return errorf(http.StatusForbidden, nil, "backend.limits.%s %d is above the server default %d: only an admin may raise an agent's limits", f.name, v, def)
		}
	}
	return nil
}

// clampLimits caps an agent's stored limits at the server's maximum before a backend starts it
// (an agent stored by an older version, or before the maximum was lowered).
func (s *Server) clampLimits(a api.Agent) api.Agent {
	for _, f := range limitFields {
		if v, m := f.get(a.Backend.Limits), f.get(s.limits.Max); v > m || v < 0 {
			f.set(&a.Backend.Limits, m)
		}
	}
	return a
}

// ErrExecBusy is the cause of a 429 from exec: too many execs are running.
var ErrExecBusy = errors.New("too many concurrent execs")

// execLimiter counts running execs per agent and per user.
type execLimiter struct {
	q     Quotas
	mu    sync.Mutex
	agent map[string]int
	user  map[string]int
}

func newExecLimiter(q Quotas) *execLimiter {
	return &execLimiter{q: q, agent: map[string]int{}, user: map[string]int{}}
}

// acquire takes a slot for one exec, or says which cap is full. Admins are held to the
// per-agent cap (it protects the agent's helper) but not to the per-user one.
func (l *execLimiter) acquire(agentID, userID string, admin bool) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.agent[agentID]; n >= l.q.ExecsPerAgent {
		return nil, fmt.Errorf("%w: this agent already runs %d execs (max %d per agent); retry when one finishes", ErrExecBusy, n, l.q.ExecsPerAgent)
	}
	if n := l.user[userID]; !admin && n >= l.q.ExecsPerUser {
		return nil, fmt.Errorf("%w: you already run %d execs (max %d per user); retry when one finishes", ErrExecBusy, n, l.q.ExecsPerUser)
	}
	l.agent[agentID]++
	l.user[userID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.agent[agentID]--; l.agent[agentID] <= 0 {
				delete(l.agent, agentID)
			}
			if l.user[userID]--; l.user[userID] <= 0 {
				delete(l.user, userID)
			}
		})
	}, nil
}

// tooBusy answers 429 with Retry-After.
func tooBusy(c echo.Context, retryS int, err error) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(retryS))
	return errorf(http.StatusTooManyRequests, nil, "%v", err)
}
