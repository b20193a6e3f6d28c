package bridges

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"golang.org/x/net/bpf"
)

// TestSeccompFilterVerdicts runs the generated filter (both architectures) in a BPF VM over
// synthetic seccomp_data and checks each verdict, and that the set of calls it acts on is the
// reviewed one (a change to the list must change this test).
func TestSeccompFilterVerdicts(t *testing.T) {
	const (
		allow  = secRetAllow
		eperm  = secRetErrno | ePERM
		enosys = secRetErrno | eNOSYS
		kill   = secRetKillProcess
	)
	want := "acct add_key bpf chmod clone clone3 creat delete_module fchmod fchmodat fchmodat2 finit_module fsconfig fsmount fsopen fspick " +
		"init_module ioctl kexec_file_load kexec_load keyctl mknod mknodat mount mount_setattr move_mount open open_by_handle_at open_tree " +
		"open_tree_attr openat openat2 perf_event_open personality pidfd_getfd pivot_root process_vm_readv process_vm_writev ptrace reboot " +
		"request_key setns swapoff swapon umount2 unshare userfaultfd"
	if got := strings.Join(seccompSyscalls(), " "); got != want {
		t.Errorf("filtered syscalls changed:\n got %s\nwant %s", got, want)
	}
	for arch, tab := range seccompArches {
		t.Run(arch, func(t *testing.T) {
			raw, err := seccompFilter(arch)
			if err != nil {
				t.Fatal(err)
			}
			ins, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatal("filter does not disassemble")
			}
			vm, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatal(err)
			}
			// The VM loads big-endian words: lay seccomp_data out so (each arg's low word first).
			run := func(audit uint32, nr uint32, args ...uint32) uint32 {
				d := make([]byte, 64)
				binary.BigEndian.PutUint32(d[secOffNr:], nr)
				binary.BigEndian.PutUint32(d[secOffArch:], audit)
				for i, a := range args {
					binary.BigEndian.PutUint32(d[secOffArgs+8*i:], a)
				}
				v, err := vm.Run(d)
				if err != nil {
					t.Fatal(err)
				}
				return uint32(v)
			}
			nr := func(name string) uint32 {
				n, ok := tab.nr[name]
				if !ok {
					t.Fatalf("no %s on %s", name, arch)
				}
				return n
			}
			cases := []struct {
				name string
				got  uint32
				want uint32
			}{
				{"other arch is killed", run(0x40000003, 0), kill},
				{"read allowed", run(tab.audit, 63), allow},
				{"ptrace", run(tab.audit, nr("ptrace")), eperm},
				{"process_vm_readv", run(tab.audit, nr("process_vm_readv")), eperm},
				{"bpf", run(tab.audit, nr("bpf")), eperm},
				{"mount", run(tab.audit, nr("mount")), eperm},
				{"unshare", run(tab.audit, nr("unshare")), eperm},
				{"keyctl", run(tab.audit, nr("keyctl")), eperm},
				{"clone3 ENOSYS", run(tab.audit, nr("clone3")), enosys},
				{"clone of a thread", run(tab.audit, nr("clone"), 0x3d0f00), allow},
				{"clone CLONE_NEWUSER", run(tab.audit, nr("clone"), 0x10000000|0x11), eperm},
				{"clone CLONE_NEWNS", run(tab.audit, nr("clone"), 0x20000|0x11), eperm},
				{"fchmodat 0755", run(tab.audit, nr("fchmodat"), 0, 0, 0o755), allow},
				{"fchmodat 04755", run(tab.audit, nr("fchmodat"), 0, 0, 0o4755), eperm},
				{"fchmodat 02755", run(tab.audit, nr("fchmodat"), 0, 0, 0o2755), eperm},
				{"fchmod 04700", run(tab.audit, nr("fchmod"), 3, 0o4700), eperm},
				{"openat O_CREAT 0644", run(tab.audit, nr("openat"), 0, 0, 0x41, 0o644), allow},
				{"openat O_CREAT 06755", run(tab.audit, nr("openat"), 0, 0, 0x41, 0o6755), eperm},
				{"mknodat fifo", run(tab.audit, nr("mknodat"), 0, 0, 0o010644), allow},
				{"mknodat char device", run(tab.audit, nr("mknodat"), 0, 0, 0o020644), eperm},
				{"mknodat block device", run(tab.audit, nr("mknodat"), 0, 0, 0o060644), eperm},
				{"mknodat setuid file", run(tab.audit, nr("mknodat"), 0, 0, 0o104755), eperm},
				{"ioctl TCGETS", run(tab.audit, nr("ioctl"), 0, 0x5401), allow},
				{"ioctl TIOCSTI", run(tab.audit, nr("ioctl"), 0, tiocSTI), eperm},
				{"ioctl TIOCLINUX", run(tab.audit, nr("ioctl"), 0, tiocLINUX), eperm},
				{"personality query", run(tab.audit, nr("personality"), 0xffffffff), allow},
				{"personality PER_LINUX", run(tab.audit, nr("personality"), 0), allow},
				{"personality ADDR_NO_RANDOMIZE", run(tab.audit, nr("personality"), 0x0040000), eperm},
			}
			if tab.x32 {
				cases = append(cases,
					struct {
						name      string
						got, want uint32
					}{"x32 is killed", run(tab.audit, x32SyscallBit|nr("ptrace")), kill},
					struct {
						name      string
						got, want uint32
					}{"chmod 4755", run(tab.audit, nr("chmod"), 0, 0o4755), eperm},
					struct {
						name      string
						got, want uint32
					}{"creat 02644", run(tab.audit, nr("creat"), 0, 0o2644), eperm},
				)
			}
			for _, c := range cases {
				if c.got != c.want {
					t.Errorf("%s: verdict %#x, want %#x", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestJailHardening attacks the helper and the host from inside a real bwrap jail and a real
// container: both run under the seccomp filter (bwrap installs it; a container's helper installs
// it on itself), the helper cannot be ptraced or read through /proc, setuid bits
// and new namespaces are refused, every started process is first in line for the OOM killer,
// and a command's setsid escape dies with its exec.
func TestJailHardening(t *testing.T) {
	for _, backend := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(backend, func(t *testing.T) { testJailHardening(t, backend) })
	}
}

func testJailHardening(t *testing.T, backend string) {
	requireBackend(t, backend)
	m, _ := newTestManager(t, nil)
	a := agent("hard1", backend, api.NetworkNone, api.Limits{})
	helperPid := func() string {
		t.Helper()
		// The serving helper, not a container's init (`helper init`).
		res := sh(t, m, a, "pgrep -o -f '^/opt/porthole/porthole helper( -|$)'")
		pid := strings.TrimSpace(res.Stdout)
		if res.ExitCode != 0 || pid == "" {
			t.Fatalf("helper pid not found in the jail: %+v", res)
		}
		return pid
	}
	hp := helperPid()

	t.Run("seccomp_in_force", func(t *testing.T) {
		res := sh(t, m, a, "grep '^Seccomp:' /proc/self/status; grep '^Seccomp:' /proc/"+hp+"/status")
		if got := strings.Fields(res.Stdout); len(got) != 4 || got[1] != "2" || got[3] != "2" {
			t.Errorf("Seccomp of a command and of the helper = %q, want mode 2 (filter) for both", res.Stdout)
		}
	})
	t.Run("helper_cannot_be_ptraced", func(t *testing.T) {
		res := sh(t, m, a, HelperPathInJail+" ptrace "+hp)
		if !strings.Contains(res.Stdout, "ptrace: operation not permitted") {
			t.Errorf("PTRACE_ATTACH on the helper: %q %q, want operation not permitted", res.Stdout, res.Stderr)
		}
	})
	t.Run("ptrace_refused_even_on_own_child", func(t *testing.T) {
		res := sh(t, m, a, "sleep 30 & "+HelperPathInJail+" ptrace $!; kill $!")
		if !strings.Contains(res.Stdout, "ptrace: operation not permitted") {
			t.Errorf("PTRACE_ATTACH on its own child: %q %q, want operation not permitted", res.Stdout, res.Stderr)
		}
	})
	t.Run("helper_proc_files_unreadable", func(t *testing.T) {
		res := sh(t, m, a, "cat /proc/"+hp+"/environ; readlink -v /proc/"+hp+"/fd/0; cat /proc/"+hp+"/mem")
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "PATH=") || strings.Count(res.Stderr, "Permission denied") < 3 {
			t.Errorf("reading the helper's environ, fds and mem: %+v, want Permission denied thrice", res)
		}
	})
	t.Run("setuid_bits_refused", func(t *testing.T) {
		res := sh(t, m, a, "touch x y; chmod 4755 x; echo rc=$?; chmod g+s y; echo rc=$?; stat -c %a x y")
		if res.Stdout != "rc=1\nrc=1\n644\n644\n" || strings.Count(res.Stderr, "Operation not permitted") != 2 {
			t.Errorf("chmod 4755 / g+s in the jail: %+v, want both refused with Operation not permitted", res)
		}
		// And nothing setuid appeared in the home on the host.
		home := AgentHome(m.cfg.DataDir, a.ID)
		for _, f := range []string{"x", "y"} {
			fi, err := os.Stat(filepath.Join(home, f))
			if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("host %s: %v %v", f, fi.Mode(), err)
			}
		}
	})
	t.Run("no_new_namespaces", func(t *testing.T) {
		res := sh(t, m, a, "unshare -U true; echo rc=$?; unshare -m true; echo rc=$?")
		if res.Stdout != "rc=1\nrc=1\n" {
			t.Errorf("unshare in the jail: %+v, want both refused", res)
		}
	})
	t.Run("commands_first_for_the_oom_killer", func(t *testing.T) {
		res := sh(t, m, a, "cat /proc/self/oom_score_adj /proc/"+hp+"/oom_score_adj")
		if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != "1000" || got[1] != "0" {
			t.Errorf("oom_score_adj of a command and of the helper = %q, want 1000 and 0", res.Stdout)
		}
	})
	t.Run("setsid_escape_dies_with_its_exec", func(t *testing.T) {
		res := sh(t, m, a, "setsid -f sleep 321; (setsid sleep 322 &); echo started")
		if res.Stdout != "started\n" {
			t.Fatalf("got %+v", res)
		}
		res = sh(t, m, a, "ps -eo args= | grep -c '^sleep 32[12]' || true")
		if strings.TrimSpace(res.Stdout) != "0" {
			t.Errorf("setsid'd sleeps survived their exec: %q", res.Stdout)
		}
	})
	t.Run("timeout_kills_setsid_escape", func(t *testing.T) {
		res, err := m.Exec(context.Background(), a, api.ExecRequest{Command: []string{"sh", "-c", "setsid -f sleep 323; sleep 300"}, TimeoutS: 1})
		if err != nil || !res.TimedOut {
			t.Fatalf("exec = %+v, %v; want a timeout", res, err)
		}
		res = sh(t, m, a, "ps -eo args= | grep -c '^sleep 323' || true")
		if strings.TrimSpace(res.Stdout) != "0" {
			t.Errorf("setsid'd sleep survived the timeout: %q", res.Stdout)
		}
	})
}

// TestNothingInherited: a real gateway process (bridges/internal/testgateway, whose startup is
// cmd/porthole's) started with a 0600 host file open on fd 200, as a careless parent would
// leave it, starts a bwrap agent: the jail has no fd 200 and cannot read the file.
func TestNothingInherited(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	dir := t.TempDir()
	gw := filepath.Join(dir, "testgateway")
	build := exec.Command("go", "build", "-o", gw, "./bridges/internal/testgateway")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testgateway: %v\n%s", err, out)
	}
	secret := filepath.Join(dir, "host-secret")
	const content = "host-secret-content-4711"
	if err := os.WriteFile(secret, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := filepath.Join(dir, "data")
	cmd := exec.Command(gw, "-data", data, "-helper", helperBin, "-backends", "bwrap",
		"-exec", "ls /proc/self/fd | tr '\\n' ' '; echo; cat /proc/self/fd/200")
	cmd.ExtraFiles = make([]*os.File, 198) // fd 3+197 = 200; nil entries are not passed
	cmd.ExtraFiles[197] = f
	out, err := cmd.CombinedOutput()
	text := string(out)
	t.Logf("testgateway:\n%s", text)
	if err != nil {
		t.Fatalf("testgateway: %v", err)
	}
	var fds string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "EXEC bwrap "); ok && fds == "" {
			fds = rest
		}
	}
	if fds == "" {
		t.Fatal("no output from the jail")
	}
	if strings.Contains(text, content) {
		t.Errorf("the jail read the gateway's inherited fd 200")
	}
	if strings.Contains(" "+fds+" ", " 200 ") || !strings.Contains(text, "No such file or directory") {
		t.Errorf("fds in the jail: %q, want no fd 200 (and cat to fail)", fds)
	}
}

// TestHelperSurvivesForkBomb: a fork bomb in an agent fills its pid limit; the helper keeps
// answering (a command that cannot start gets a clear error, never a dead helper), and once the
// bomb's exec is over, exec works again in the same helper.
func TestHelperSurvivesForkBomb(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, _ := newTestManager(t, nil)
	a := agent("bomb1", api.BackendBwrap, api.NetworkNone, apiLimits(200, 512))
	ctx := context.Background()
	hp := strings.TrimSpace(sh(t, m, a, "pgrep -o -f '^/opt/porthole/porthole helper'").Stdout)
	if hp == "" {
		t.Fatal("helper pid not found")
	}
	bombDone := make(chan api.ExecResult, 1)
	go func() { // owner: this test, which waits for it
		res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"bash", "-c", "b(){ b|b& }; b; sleep 60"}, TimeoutS: 8})
		if err != nil {
			res.Stderr = "transport error: " + err.Error()
		}
		bombDone <- res
	}()
	time.Sleep(2 * time.Second) // the bomb is at the limit by now
	var wg sync.WaitGroup
	// More at once than the gateway's per-agent cap (16), each holding a helper thread in its wait.
	errs := make(chan string, 40)
	for range 40 {
		wg.Add(1)
		go func() { // owner: this test (wg)
			defer wg.Done()
			res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sleep", "1"}, TimeoutS: 20})
			switch {
			case err != nil:
				errs <- "transport error: " + err.Error()
			case res.ExitCode != 0 && !strings.Contains(res.Stderr, "process limit"):
				errs <- fmt.Sprintf("exit %d without a clear error: %q", res.ExitCode, res.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("exec during the fork bomb: %s", e)
	}
	bomb := <-bombDone
	t.Logf("bomb exec: exit %d timed_out %v stderr %.200q", bomb.ExitCode, bomb.TimedOut, bomb.Stderr)
	if strings.HasPrefix(bomb.Stderr, "transport error") {
		t.Fatalf("the helper died under the fork bomb: %s", bomb.Stderr)
	}
	res := sh(t, m, a, "echo ok; pgrep -o -f '^/opt/porthole/porthole helper'; pgrep -c bash || true")
	lines := strings.Fields(res.Stdout)
	if len(lines) < 3 || lines[0] != "ok" || lines[1] != hp || lines[2] != "0" {
		t.Errorf("after the bomb: %+v; want ok, the same helper pid %s, and no bomb process left", res, hp)
	}
}
