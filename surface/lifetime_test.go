package surface

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

type key string

// TestSharedCreatesOnceClosesInReverse: concurrent users of one key share one creation; a
// failed creation is retried by the next user; Close runs the close funcs newest first, once,
// and later users get ErrLifetimeEnded.
func TestSharedCreatesOnceClosesInReverse(t *testing.T) {
	l := NewLifetime()
	ctx := WithLifetime(context.Background(), l)
	var closed []string
	var mu sync.Mutex
	closer := func(name string) func() {
		return func() { mu.Lock(); closed = append(closed, name); mu.Unlock() }
	}
	var creations atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]*int, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := Shared(ctx, key("x"), func() (*int, func(), error) {
				creations.Add(1)
				n := 42
				return &n, closer("x"), nil
			})
			if err != nil {
				t.Errorf("Shared: %v", err)
			}
			got[i] = v
		}()
	}
	close(start)
	wg.Wait()
	if n := creations.Load(); n != 1 {
		t.Errorf("%d creations for 20 concurrent users, want 1", n)
	}
	for i, v := range got {
		if v != got[0] {
			t.Fatalf("user %d got %p, user 0 %p: want one shared value", i, v, got[0])
		}
	}

	boom := errors.New("boom")
	if _, err := Shared(ctx, key("y"), func() (int, func(), error) { return 0, nil, boom }); !errors.Is(err, boom) {
		t.Errorf("failed creation = %v, want boom", err)
	}
	if v, err := Shared(ctx, key("y"), func() (int, func(), error) { return 7, closer("y"), nil }); v != 7 || err != nil {
		t.Errorf("after a failed creation = %d, %v; want a new creation (7)", v, err)
	}

	l.Close()
	l.Close()
	if want := []string{"y", "x"}; !slices.Equal(closed, want) {
		t.Errorf("closed %v, want %v (newest first, once)", closed, want)
	}
	if _, err := Shared(ctx, key("z"), func() (int, func(), error) { t.Error("created after Close"); return 0, nil, nil }); !errors.Is(err, ErrLifetimeEnded) {
		t.Errorf("Shared after Close = %v, want ErrLifetimeEnded", err)
	}
	if _, err := Shared(context.Background(), key("x"), func() (int, func(), error) { return 0, nil, nil }); err == nil {
		t.Errorf("Shared without a Lifetime in ctx: want an error")
	}
}

// TestSharedClosedWhileCreating: a resource whose creation finishes after the Lifetime closed
// is closed at once and not handed out.
func TestSharedClosedWhileCreating(t *testing.T) {
	l := NewLifetime()
	ctx := WithLifetime(context.Background(), l)
	inCreate, release := make(chan struct{}), make(chan struct{})
	var closedLate atomic.Bool
	errc := make(chan error, 1)
	go func() {
		_, err := Shared(ctx, key("x"), func() (int, func(), error) {
			close(inCreate)
			<-release
			return 1, func() { closedLate.Store(true) }, nil
		})
		errc <- err
	}()
	<-inCreate
	l.Close()
	close(release)
	if err := <-errc; !errors.Is(err, ErrLifetimeEnded) {
		t.Errorf("Shared finishing after Close = %v, want ErrLifetimeEnded", err)
	}
	if !closedLate.Load() {
		t.Errorf("a resource created after Close was not closed")
	}
}
