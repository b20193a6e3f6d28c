//go:build linux && !js

package browser

import (
	"context"
	"net"
)

// TODO(browser-core): start Chromium inside the sandbox and carry its pipe over the stream.

// ServeHelperStream serves one browser stream inside the agent's sandbox.
func ServeHelperStream(ctx context.Context, stream net.Conn) {
	stream.Close()
}
