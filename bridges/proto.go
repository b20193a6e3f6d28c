package bridges

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/yamux"
)

// ProtoVersion is the gateway↔helper protocol version; both ends must speak the same one.
const ProtoVersion = 1

// streamHello is the kind of the first stream of a session: the version handshake.
const streamHello = "hello"

// maxFrame bounds one length-prefixed JSON frame (an exec result carries up to 2×1 MiB of output).
const maxFrame = 16 << 20

// ErrFrameTooLarge is returned when a peer sends a frame above the protocol's bound.
var ErrFrameTooLarge = errors.New("frame too large")

// StreamHeader opens every stream: which handler the helper dispatches it to.
type StreamHeader struct {
	Kind string `json:"kind"`
}

// Hello is exchanged on the first stream: the gateway sends its version, the helper answers with its own.
type Hello struct {
	Proto int    `json:"proto"`
	Error string `json:"error,omitempty"` // set by a helper that refuses the gateway's version
	PID   int    `json:"pid,omitempty"`   // the helper's pid as seen inside the sandbox
	UID   int    `json:"uid,omitempty"`
	// Limits says which resource limits the helper applied itself (rlimits), "" if none.
	Limits string `json:"limits,omitempty"`
}

// WriteFrame writes v as one frame: a 4-byte big-endian length, then JSON.
func WriteFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(b) > maxFrame {
		return fmt.Errorf("encode frame: %d bytes: %w", len(b), ErrFrameTooLarge)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame written by WriteFrame into v.
func ReadFrame(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return fmt.Errorf("read frame: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return fmt.Errorf("read frame: %d bytes: %w", size, ErrFrameTooLarge)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("read frame: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode frame: %w", err)
	}
	return nil
}

// yamuxConfig is the session configuration of both ends.
func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	c.MaxStreamWindowSize = 1 << 20
	c.EnableKeepAlive = true
	c.KeepAliveInterval = 15 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	c.StreamOpenTimeout = 30 * time.Second
	return c
}
