package terminal

import "testing"

// backendOpen returns the OpenFunc the integration tests run against.
func backendOpen(t *testing.T) OpenFunc {
	return newInProcessHelper(t).Open
}
