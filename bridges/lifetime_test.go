package bridges

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/porthole/porthole/internal/sandboxproc"
	"github.com/porthole/porthole/surface"
)

// TestServeHelperLifetime: the streams of one helper session share one resource through the
// session's surface.Lifetime (here a real process, as the desktop's X server will be); when
// the gateway ends the session, every handler returns first, then the resource is closed
// (the process is gone), once. A new session gets a new Lifetime.
func TestServeHelperLifetime(t *testing.T) {
	type sharedKey struct{}
	var mu sync.Mutex
	var events []string
	note := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	shared := func(ctx context.Context, st net.Conn) {
		defer st.Close()
		p, err := surface.Shared(ctx, sharedKey{}, func() (*sandboxproc.Process, func(), error) {
			p, err := sandboxproc.Start(sandboxproc.Spec{Path: "/bin/sleep", Args: []string{"sleep", "1000"}, Env: sandboxproc.Env()})
			if err != nil {
				return nil, nil, err
			}
			return p, func() { p.Kill(); p.Wait(); note("closed") }, nil
		})
		if err != nil {
			fmt.Fprintf(st, "error %v\n", err)
			return
		}
		fmt.Fprintf(st, "%d\n", p.Pid)
		<-ctx.Done() // a stream ends with its session
		time.Sleep(50 * time.Millisecond)
		note("handler")
	}
	session := func() (pids []int, stop func() error) {
		gw, hp := pipePair()
		errc := make(chan error, 1)
		go func() {
			errc <- ServeHelper(context.Background(), hp, map[string]Handler{"shared": shared}, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		sess, err := yamux.Client(gw, yamuxConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := handshake(context.Background(), sess); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			st, err := sess.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			WriteFrame(st, StreamHeader{Kind: "shared"})
			st.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, 64)
			n, err := st.Read(b)
			line := strings.TrimSpace(string(b[:n]))
			pid, perr := strconv.Atoi(line)
			if err != nil || perr != nil {
				t.Fatalf("shared stream said %q (%v)", line, err)
			}
			pids = append(pids, pid)
		}
		return pids, func() error {
			sess.Close()
			gw.Close()
			select {
			case err := <-errc:
				return err
			case <-time.After(10 * time.Second):
				return errors.New("ServeHelper did not return after the session closed")
			}
		}
	}

	pids, stop := session()
	if pids[0] != pids[1] {
		t.Errorf("two streams of one session got processes %v, want one shared", pids)
	}
	if err := syscall.Kill(pids[0], 0); err != nil {
		t.Fatalf("shared process %d not running while the session is open: %v", pids[0], err)
	}
	if err := stop(); err != nil {
		t.Fatalf("ServeHelper: %v", err)
	}
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	if want := []string{"handler", "handler", "closed"}; !slices.Equal(got, want) {
		t.Errorf("after the session ended: %v, want %v (handlers first, then the resource, once)", got, want)
	}
	if err := syscall.Kill(pids[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("shared process %d after the session ended: kill(0) = %v, want ESRCH", pids[0], err)
	}

	pids2, stop2 := session()
	if pids2[0] == pids[0] {
		t.Errorf("a new session reused the old session's process %d", pids[0])
	}
	if err := stop2(); err != nil {
		t.Fatalf("ServeHelper (second session): %v", err)
	}
}
