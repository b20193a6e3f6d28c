package bridges

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"go.uber.org/goleak"
)

// pipePair is an in-memory stdio pair between a gateway and a helper.
func pipePair() (gw, helper io.ReadWriteCloser) {
	a, b := net.Pipe()
	return a, b
}

// TestHandshakeRefusesOtherVersion: a helper that speaks another protocol is refused with
// ErrHelperVersion and a message naming both versions, in both directions.
func TestHandshakeRefusesOtherVersion(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("helper_speaks_another_version", func(t *testing.T) {
		gw, hp := pipePair()
		defer gw.Close()
		defer hp.Close()
		go func() { // a fake helper from a future release
			sess, _ := yamux.Server(hp, yamuxConfig())
			defer sess.Close()
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			var h StreamHeader
			var hello Hello
			ReadFrame(st, &h)
			ReadFrame(st, &hello)
			WriteFrame(st, Hello{Proto: ProtoVersion + 1})
			st.Close()
			time.Sleep(100 * time.Millisecond)
		}()
		sess, err := yamux.Client(gw, yamuxConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		_, err = handshake(context.Background(), sess)
		if !errors.Is(err, ErrHelperVersion) {
			t.Fatalf("handshake with a proto %d helper = %v, want ErrHelperVersion", ProtoVersion+1, err)
		}
		if !strings.Contains(err.Error(), "protocol 2") || !strings.Contains(err.Error(), "gateway 1") {
			t.Errorf("error %q does not name both versions", err)
		}
	})
	t.Run("gateway_speaks_another_version", func(t *testing.T) {
		gw, hp := pipePair()
		defer gw.Close()
		errc := make(chan error, 1)
		go func() {
			errc <- ServeHelper(context.Background(), hp, nil, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		sess, err := yamux.Client(gw, yamuxConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		st, _ := sess.OpenStream()
		WriteFrame(st, StreamHeader{Kind: streamHello})
		WriteFrame(st, Hello{Proto: 99})
		var reply Hello
		if err := ReadFrame(st, &reply); err != nil {
			t.Fatal(err)
		}
		if reply.Error == "" || reply.Proto != ProtoVersion {
			t.Errorf("helper reply to proto 99 = %+v, want its own version and an error", reply)
		}
		if err := <-errc; !errors.Is(err, ErrHelperVersion) {
			t.Errorf("ServeHelper = %v, want ErrHelperVersion", err)
		}
	})
}

// TestServeHelperDispatchesAndEnds: streams reach the handler of their kind, unknown kinds are
// closed, and the helper returns when the gateway closes the session.
func TestServeHelperDispatchesAndEnds(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	gw, hp := pipePair()
	errc := make(chan error, 1)
	echo := func(ctx context.Context, st net.Conn) {
		defer st.Close()
		io.Copy(st, st)
	}
	go func() {
		errc <- ServeHelper(context.Background(), hp, map[string]Handler{"echo": echo}, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	sess, err := yamux.Client(gw, yamuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	st, _ := sess.OpenStream()
	WriteFrame(st, StreamHeader{Kind: "echo"})
	st.Write([]byte("ping"))
	st.Close() // half-close: the echo sees EOF after "ping"
	got, _ := io.ReadAll(st)
	if string(got) != "ping" {
		t.Errorf("echo stream = %q, want %q", got, "ping")
	}
	un, _ := sess.OpenStream()
	WriteFrame(un, StreamHeader{Kind: "no-such-kind"})
	un.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := un.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, yamux.ErrTimeout) {
		t.Errorf("unknown kind: read = %d, %v; want the helper to close it", n, err)
	}
	sess.Close()
	gw.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("ServeHelper after the gateway left = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeHelper did not return after the session closed")
	}
}

func TestFrameBounds(t *testing.T) {
	var buf bytes.Buffer
	buf.Write([]byte{0x7f, 0xff, 0xff, 0xff})
	var v map[string]any
	if err := ReadFrame(&buf, &v); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("ReadFrame(2 GiB length) = %v, want ErrFrameTooLarge", err)
	}
	if err := ReadFrame(strings.NewReader("\x00\x00\x00\x05{\"a\""), &v); err == nil {
		t.Errorf("ReadFrame(truncated) = nil, want an error")
	}
}
