package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// AgentImageLock serialises building the agent image across test processes (go test runs
// packages in parallel; two builds of one tag would race).
const AgentImageLock = "/tmp/porthole-agent-image.lock"

// AgentImage returns the container agents' image tag (PORTHOLE_TEST_IMAGE, default
// porthole-agent:latest) on the engine at engineURL (unix:///path.sock), building it with
// build/agent-image/build.sh when the engine lacks it or has one built by another recipe (the
// image carries the recipe's hash as the label porthole.recipe). A missing podman or a failed
// build is Missing (fails under CI=true).
func AgentImage(t testing.TB, engineURL, repoRoot string) string {
	t.Helper()
	tag := os.Getenv("PORTHOLE_TEST_IMAGE")
	chosen := tag != ""
	if !chosen {
		tag = "porthole-agent:latest"
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		Missing(t, "podman, to inspect or build the agent image: %v", err)
	}
	recipePath := filepath.Join(repoRoot, "build/agent-image/build.sh")
	recipe, err := os.ReadFile(recipePath)
	if err != nil {
		t.Fatalf("agent image recipe: %v", err)
	}
	sum := sha256.Sum256(recipe)
	want := hex.EncodeToString(sum[:])[:16]
	current := func() (label string, ok bool) {
		out, err := exec.Command(podman, "--url", engineURL, "image", "inspect",
			"--format", `{{index .Config.Labels "porthole.recipe"}}`, tag).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	if label, ok := current(); ok && (label == want || chosen) {
		return tag
	}
	lock, err := os.OpenFile(AgentImageLock, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("agent image lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("agent image lock: %v", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if label, ok := current(); ok && (label == want || chosen) {
		return tag // another test process built it meanwhile
	}
	t.Logf("building %s with build/agent-image/build.sh (once; cached by tag and recipe hash)", tag)
	cmd := exec.Command("sh", recipePath, tag)
	cmd.Env = append(os.Environ(), "PODMAN="+podman, "PODMAN_FLAGS=--url "+engineURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		Missing(t, "agent image %s: %v", tag, fmt.Errorf("build.sh: %v\n%s", err, out))
	}
	return tag
}
