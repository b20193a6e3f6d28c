package terminal

import "testing"

// backendOpen returns the OpenFunc the integration tests run against.
func backendOpen(t *testing.T) OpenFunc {
	// The in-process helper's shells run as this process: give them an empty home so
	// that they neither read the developer's profile nor write its history.
	t.Setenv("HOME", t.TempDir())
	return newInProcessHelper(t).Open
}
