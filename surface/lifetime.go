package surface

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrLifetimeEnded is returned by Shared once the helper session has ended.
var ErrLifetimeEnded = errors.New("helper session ended")

// Lifetime holds the resources shared by the streams of one helper session (one X server
// for every desktop stream of an agent, ...). The helper creates one per session, gives it
// to every handler through the handler's ctx, and closes it when the session has ended and
// every handler has returned.
type Lifetime struct {
	mu     sync.Mutex
	res    map[any]*resource
	order  []*resource // creation order; closed in reverse
	closed bool
}

type resource struct {
	ready chan struct{} // closed when create returned
	value any
	close func()
	err   error
}

// NewLifetime returns an empty Lifetime; its owner calls Close.
func NewLifetime() *Lifetime { return &Lifetime{res: map[any]*resource{}} }

type lifetimeKey struct{}

// WithLifetime returns ctx carrying l, for handlers.
func WithLifetime(ctx context.Context, l *Lifetime) context.Context {
	return context.WithValue(ctx, lifetimeKey{}, l)
}

// LifetimeOf is the Lifetime ctx carries, or nil.
func LifetimeOf(ctx context.Context) *Lifetime {
	l, _ := ctx.Value(lifetimeKey{}).(*Lifetime)
	return l
}

// Shared returns the resource of key in the Lifetime of ctx, creating it with create on
// first use: concurrent callers wait for the one creation, and all get the same value. The
// close func create returns (nil = nothing to close) runs when the Lifetime closes. A failed
// creation is not kept: the next caller tries again. Key by an unexported type of the
// surface's own, as with context values.
func Shared[T any](ctx context.Context, key any, create func() (T, func(), error)) (T, error) {
	var zero T
	l := LifetimeOf(ctx)
	if l == nil {
		return zero, errors.New("surface.Shared: ctx carries no helper Lifetime")
	}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return zero, ErrLifetimeEnded
		}
		r, found := l.res[key]
		if !found {
			r = &resource{ready: make(chan struct{})}
			l.res[key] = r
		}
		l.mu.Unlock()
		if found {
			select {
			case <-r.ready:
			case <-ctx.Done():
				return zero, context.Cause(ctx)
			}
			if r.err != nil {
				continue // its creator has removed it: try again
			}
			v, _ := r.value.(T)
			return v, nil
		}
		v, closeFn, err := create()
		l.mu.Lock()
		r.value, r.close, r.err = v, closeFn, err
		if err != nil {
			delete(l.res, key)
		} else if l.closed {
			// Closed while creating: nobody else will close it.
			r.err = ErrLifetimeEnded
			l.mu.Unlock()
			close(r.ready)
			if closeFn != nil {
				closeFn()
			}
			return zero, ErrLifetimeEnded
		} else {
			l.order = append(l.order, r)
		}
		l.mu.Unlock()
		close(r.ready)
		if err != nil {
			return zero, err
		}
		return v, nil
	}
}

// Close runs every resource's close func, the newest first, once; later Shared calls fail
// with ErrLifetimeEnded.
func (l *Lifetime) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	order := l.order
	l.order, l.res = nil, nil
	l.mu.Unlock()
	for _, r := range slices.Backward(order) {
		if r.close != nil {
			r.close()
		}
	}
}
