// Package testenv lets tests demand real tools: missing ones fail under CI=true and skip elsewhere.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where nothing may skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing handles a missing requirement: under CI=true it fails the test (a skipped
// security test is a hole); elsewhere it skips with the reason.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("required under CI=true: "+format, args...)
	}
	t.Skipf("not available (would fail under CI=true): "+format, args...)
}

// LookPath returns the path of a required executable, or handles it as Missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s: %v", name, err)
	}
	return p
}

// Getenv returns a required environment variable (e.g. PORTHOLE_TEST_PG), or handles it as Missing.
func Getenv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, "environment variable %s is not set", name)
	}
	return v
}
