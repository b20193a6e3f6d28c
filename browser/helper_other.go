//go:build !linux && !js

package browser

import (
	"context"
	"net"
)

// ServeHelperStream is Linux-only: elsewhere the stream closes at once.
func ServeHelperStream(ctx context.Context, stream net.Conn) { stream.Close() }
