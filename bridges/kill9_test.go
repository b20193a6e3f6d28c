package bridges

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/porthole/porthole/api"
)

// processesWith lists host processes whose command line contains s.
func processesWith(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestKill9LeavesNothing: a gateway killed with SIGKILL leaves no process of any agent: the bwrap
// jail dies with it (--die-with-parent, then its pid namespace), and the next gateway start
// removes the container it left and that container's own network (its agent is "full").
func TestKill9LeavesNothing(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	requireBackend(t, api.BackendContainer)
	eng, image := engine(t), testImage(t)
	gw := filepath.Join(t.TempDir(), "testgateway")
	build := exec.Command("go", "build", "-o", gw, "./bridges/internal/testgateway")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testgateway: %v\n%s", err, out)
	}
	data := t.TempDir()
	t.Cleanup(func() { unmountHomes(data) }) // home images of a gateway that died before its reconcile
	marker := "porthole-k9-" + randHex(6)
	cmd := exec.Command(gw, "-data", data, "-helper", helperBin, "-engine", eng, "-image", image, "-marker", marker, "-container-network", api.NetworkFull)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var helperPids []int
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			t.Log("testgateway: " + line)
			if strings.HasPrefix(line, "HELPER bwrap") {
				f := strings.Fields(line)
				p, _ := strconv.Atoi(f[len(f)-1])
				helperPids = append(helperPids, p)
			}
			if line == "READY" {
				ready <- nil
				return
			}
		}
		ready <- sc.Err()
	}()
	select {
	case <-ready:
	case <-time.After(3 * time.Minute):
		t.Fatal("testgateway not ready")
	}
	for _, typ := range []string{"bwrap", "container"} {
		if ps := processesWith(marker + "-" + typ); len(ps) == 0 {
			t.Fatalf("marked %s sleep not visible on the host before the kill", typ)
		}
	}
	jail := descendants(helperPids[0])
	// The instance is the data dir's: the same for the next start below.
	instance := InstanceFor(data)
	if len(agentNetworks(t, instance)) != 1 {
		t.Fatalf("the full container agent of the gateway has networks %v, want its own one", agentNetworks(t, instance))
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(processesWith(marker+"-bwrap")) > 0 || len(alive(jail)) > 0) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := processesWith(marker + "-bwrap"); len(left) > 0 {
		t.Errorf("bwrap agent's sleep survived kill -9 of the gateway: %q", left)
	}
	if left := alive(jail); len(left) > 0 {
		t.Errorf("bwrap jail processes survived kill -9 of the gateway: %q", left)
	}

	// The next gateway start (same data dir → same instance) reconciles the container.
	m, err := NewManager(Config{DataDir: data, HelperPath: helperBin, ContainerEngine: eng, DefaultImage: image})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(processesWith(marker)) > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Errorf("agent processes left after kill -9 and a new gateway start: %q", left)
	}
	cli, err := client.New(client.WithHost(eng))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelGateway+"="+m.Instance()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 0 {
		t.Errorf("%d container(s) of the killed gateway remain after the new start", len(list.Items))
	}
	if left := agentNetworks(t, m.Instance()); len(left) > 0 {
		t.Errorf("network(s) of the killed gateway remain after the new start: %v", left)
	}
	if os.Getuid() == 0 {
		left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*/porthole", m.Instance()+"-*"))
		if len(left) > 0 {
			t.Errorf("cgroups of the killed gateway remain after the new start: %q", left)
		}
	}
}
