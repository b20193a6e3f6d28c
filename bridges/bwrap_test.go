package bridges

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestBwrapArgsGolden pins the exact jail argv: any change to what a jail can see shows up in review.
func TestBwrapArgsGolden(t *testing.T) {
	merged := map[string]bool{"/bin": true, "/sbin": true, "/lib": true, "/lib64": true}
	split := map[string]bool{"/bin": false, "/sbin": false, "/lib": false}
	base := bwrapSpec{
		Helper: "/usr/local/bin/porthole", Home: "/var/lib/porthole/agents/a1/home",
		Network: api.NetworkNone, UsrLinks: merged,
		PasswdFD: 3, GroupFD: 4, HostsFD: 5, NsswitchFD: 6,
	}
	tests := []struct {
		name string
		mod  func(*bwrapSpec)
	}{
		{"network_none", func(*bwrapSpec) {}},
		{"network_full", func(s *bwrapSpec) { s.Network, s.ResolvFD, s.InfoFD, s.BlockFD = api.NetworkFull, 7, 8, 9 }},
		{"rlimits", func(s *bwrapSpec) { s.HelperArgs = []string{"--rlimit-nproc", "512", "--rlimit-data", "2147483648"} }},
		{"split_usr", func(s *bwrapSpec) { s.UsrLinks = split }},
		{"browser_profile", func(s *bwrapSpec) { s.BrowserProfile = "/var/lib/porthole/profiles/p1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.mod(&s)
			got := strings.Join(bwrapArgs(s), "\n") + "\n"
			path := filepath.Join("testdata", "bwrap_"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestBwrapArgsGolden ./bridges -update)", err)
			}
			if got != string(want) {
				t.Errorf("bwrapArgs(%s) differs from %s:\ngot:\n%s\nwant:\n%s", tt.name, path, got, want)
			}
		})
	}
}

// TestBwrapArgsInvariants states the security rules the golden files must keep.
func TestBwrapArgsInvariants(t *testing.T) {
	for _, network := range []string{api.NetworkNone, api.NetworkFull} {
		args := bwrapArgs(bwrapSpec{Helper: "/h", Home: "/data/agents/x/home", Network: network, UsrLinks: hostUsrLinks()})
		joined := " " + strings.Join(args, " ") + " "
		for _, must := range []string{" --unshare-all ", " --unshare-user ", " --die-with-parent ", " --new-session ", " --cap-drop ALL ", " --clearenv ", " --bind /data/agents/x/home /home/agent ", " --ro-bind /h " + HelperPathInJail + " "} {
			if !strings.Contains(joined, must) {
				t.Errorf("network %s: argv lacks %q", network, must)
			}
		}
		// Never the host's network namespace: "full" waits (--block-fd) for its own network stack.
		if strings.Contains(joined, " --share-net ") {
			t.Errorf("network %s: --share-net in the argv: the jail would share the host's network namespace", network)
		}
		if got, want := strings.Contains(joined, " --block-fd ") && strings.Contains(joined, " --info-fd "), network == api.NetworkFull; got != want {
			t.Errorf("network %s: --info-fd and --block-fd present = %v, want %v", network, got, want)
		}
		if got, want := strings.Contains(joined, "/etc/resolv.conf"), network == api.NetworkFull; got != want {
			t.Errorf("network %s: /etc/resolv.conf bound = %v, want %v", network, got, want)
		}
		// Nothing of the host is writable but the agent's own home.
		for i, a := range args {
			if (a == "--bind" || a == "--dev-bind") && args[i+1] != "/data/agents/x/home" {
				t.Errorf("network %s: writable bind of %q", network, args[i+1])
			}
		}
		for _, bad := range []string{"/var/run", "/run/user", ".X11-unix", "docker.sock", "podman", "dbus", "/data "} {
			if strings.Contains(joined, bad) {
				t.Errorf("network %s: argv mentions %q", network, bad)
			}
		}
	}
}
