//go:build !linux && !js

package desktop

import (
	"context"
	"log/slog"
	"net"
)

// ServeHelperStream: the desktop's helper half runs only on Linux (Xvfb inside the sandbox).
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	slog.Warn("desktop stream refused: the desktop helper runs on Linux only")
	stream.Close()
}
