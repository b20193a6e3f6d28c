//go:build !linux && !js

package browser

import (
	"context"
	"net"
	"time"
)

// ServeHelperStream is Linux-only: elsewhere the stream gets the helper's exit notice and closes.
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	defer stream.Close()
	stream.SetWriteDeadline(time.Now().Add(2 * time.Second))
	stream.Write([]byte(`{"method":"` + ExitMethod + `","params":{"message":"the browser surface's helper runs on Linux only"}}` + "\x00"))
}
