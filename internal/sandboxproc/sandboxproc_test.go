//go:build linux

package sandboxproc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/porthole/porthole/internal/sandboxproc"
	"github.com/porthole/porthole/internal/testenv"
)

// The reaper has two implementations: C (reap_cgo.c, in cgo builds such as the real binary)
// and Go (reap.go, CGO_ENABLED=0). Every test here runs on both, through reapdriver
// (internal/reapdriver) built each way: the same behaviour, the same protocol.
var reapers = []struct {
	name string
	cgo  string
}{{"C", "1"}, {"Go", "0"}}

var drivers sync.Map // cgo → *driverBuild

type driverBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reapdriver-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// driver builds reapdriver with CGO_ENABLED=cgo (once) and returns its path.
func driver(t *testing.T, cgo string) string {
	t.Helper()
	if cgo == "1" {
		cc, _ := exec.Command("go", "env", "CC").Output()
		if f := strings.Fields(string(cc)); len(f) == 0 {
			testenv.Missing(t, "no C compiler (go env CC) for the C reaper")
		} else {
			testenv.LookPath(t, f[0])
		}
	}
	v, _ := drivers.LoadOrStore(cgo, &driverBuild{})
	b := v.(*driverBuild)
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, "reapdriver-cgo"+cgo)
		cmd := exec.Command("go", "build", "-o", b.path, "./internal/reapdriver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build reapdriver (CGO_ENABLED=%s): %v\n%s", cgo, b.err, b.out)
	}
	return b.path
}

type result struct {
	out  string // the command's stdout and stderr (or the PTY's output)
	pid  int
	code int
	err  string // Start's or Wait's error
}

// run runs `reapdriver run ARGS...` (or, when drv is not the driver, drv ARGS... that runs it)
// and parses its result line.
func run(t *testing.T, drv string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if strings.Contains(filepath.Base(drv), "reapdriver") {
		args = append([]string{"run"}, args...)
	}
	cmd := exec.CommandContext(ctx, drv, args...)
	cmd.Env = append(os.Environ(), "TZ=porthole-reap-test")
	cmd.WaitDelay = 2 * time.Second // a reaper left behind holds stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) { // a left-behind process: the test says which
		t.Fatalf("reapdriver %q: %v\n%s%s", args, err, out, stderr.String())
	}
	var r result
	r.out = string(out)
	line := strings.TrimSpace(stderr.String())
	rest, errPart, ok := strings.Cut(line, " err=")
	f := strings.Fields(rest)
	if !ok || len(f) != 2 {
		t.Fatalf("reapdriver %q: bad result line %q", args, line)
	}
	r.pid, _ = strconv.Atoi(strings.TrimPrefix(f[0], "pid="))
	r.code, _ = strconv.Atoi(strings.TrimPrefix(f[1], "code="))
	if errPart != "<nil>" {
		r.err = errPart
	}
	return r
}

// gone reports whether pid no longer exists (reaped), waiting up to a second for it.
func gone(pid int) bool {
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", file, b)
	}
	return pid
}

func forEachReaper(t *testing.T, f func(t *testing.T, drv string, c bool)) {
	for _, r := range reapers {
		t.Run(r.name, func(t *testing.T) { f(t, driver(t, r.cgo), r.cgo == "1") })
	}
}

// TestReaperImplementation: a cgo build's reaper is the C one (one thread, no Go runtime);
// a CGO_ENABLED=0 build's is the Go one.
func TestReaperImplementation(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, c bool) {
		r := run(t, drv, "/bin/sh", "sh", "-c", `grep '^Threads:' /proc/$PPID/status`)
		threads, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.out, "Threads:")))
		if c && threads != 1 {
			t.Fatalf("cgo build: reaper has %q, want 1 thread (the C reaper, no Go runtime)", r.out)
		}
		if !c && threads < 2 {
			t.Fatalf("CGO_ENABLED=0 build: reaper has %q, want the Go runtime's threads", r.out)
		}
	})
}

func TestReaperExitCodes(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		for _, tc := range []struct {
			script string
			code   int
		}{
			{"exit 0", 0},
			{"exit 3", 3},
			{"exit 255", 255},
			{"kill -KILL $$", 128 + 9},
			{"kill -TERM $$", 128 + 15},
			{"kill -SEGV $$", 128 + 11},
		} {
			r := run(t, drv, "/bin/sh", "sh", "-c", tc.script)
			if r.err != "" || r.code != tc.code {
				t.Errorf("sh -c %q: code %d err %q, want %d", tc.script, r.code, r.err, tc.code)
			}
		}
	})
}

// TestReaperStartErrors: the status line and exit code of the reaper itself (the protocol
// sandboxproc.Start reads), and the errors Start makes of them.
func TestReaperStartErrors(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		for _, tc := range []struct {
			args []string
			line string
			code int
		}{
			{[]string{"-", "/nonexistent/prog", "prog"}, "err 127 no such file or directory", 127},
			{[]string{"-", "/etc/passwd", "passwd"}, "err 126 permission denied", 126},
			{[]string{"-", "/etc", "etc"}, "err 126 permission denied", 126},
			{[]string{"-"}, "err 126 reaper: bad arguments", 126},
		} {
			line, code := reapDirect(t, drv, tc.args...)
			if line != tc.line || code != tc.code {
				t.Errorf("reaper %q: status %q exit %d, want %q exit %d", tc.args, line, code, tc.line, tc.code)
			}
		}
		r := run(t, drv, "/nonexistent/prog", "prog")
		if !strings.Contains(r.err, sandboxproc.ErrStart.Error()) || !strings.Contains(r.err, "no such file or directory") {
			t.Errorf("Start of a missing program: %q, want ErrStart and the reason", r.err)
		}
		// A good start: the status line is the command's pid.
		line, code := reapDirect(t, drv, "-", "/bin/true", "true")
		if !strings.HasPrefix(line, "pid ") || code != 0 {
			t.Errorf("reaper /bin/true: status %q exit %d, want pid N, exit 0", line, code)
		}
	})
}

// reapDirect runs the binary as the reaper (argv[1] = ReapArg) with a status pipe on fd 3 and
// returns the status line and the reaper's exit code.
func reapDirect(t *testing.T, drv string, args ...string) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(drv, append([]string{sandboxproc.ReapArg}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	err = cmd.Wait()
	return strings.TrimSuffix(line, "\n"), sandboxproc.ExitCode(cmd.ProcessState, err)
}

// TestReaperKillsEscapesAtExit: when the command exits, processes it left behind go too, even
// one in its own session (setsid) and one whose parent exited (reparented to the reaper).
func TestReaperKillsEscapesAtExit(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		script := `setsid sh -c 'echo $$ > ` + a + `; exec sleep 1000' &
(setsid sleep 1000 & echo $! > ` + b + `)
while [ ! -s ` + a + ` ] || [ ! -s ` + b + ` ]; do sleep 0.01; done
exit 7`
		start := time.Now()
		r := run(t, drv, "/bin/sh", "sh", "-c", script)
		if r.code != 7 || r.err != "" {
			t.Fatalf("code %d err %q, want 7", r.code, r.err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v", d)
		}
		for _, f := range []string{a, b} {
			if pid := readPid(t, f); !gone(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("escaped process %d (%s) survived the command's exit", pid, filepath.Base(f))
			}
		}
	})
}

// TestReaperKillsTreeOnSIGTERM: Kill (SIGTERM to the reaper) ends a running command and its
// setsid escape, well before Kill's own fallback (which cannot reach the escape).
func TestReaperKillsTreeOnSIGTERM(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		a := filepath.Join(t.TempDir(), "a")
		script := `setsid sh -c 'echo $$ > ` + a + `; exec sleep 1000' & exec sleep 1000`
		start := time.Now()
		r := run(t, drv, "-killfile", a, "/bin/sh", "sh", "-c", script)
		if r.code != 128+9 || r.err != "" {
			t.Fatalf("code %d err %q, want 137", r.code, r.err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v", d)
		}
		if pid := readPid(t, a); !gone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("setsid escape %d survived Kill", pid)
		}
	})
}

// TestReaperForwardsSignals: SIGHUP, SIGINT and SIGQUIT sent to the reaper reach the
// command's process group.
func TestReaperForwardsSignals(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		for i, sig := range []string{"HUP", "INT", "QUIT"} {
			script := `trap 'echo got ` + sig + `; exit ` + strconv.Itoa(10+i) + `' ` + sig + `
kill -` + sig + ` $PPID
sleep 10 & wait
echo not signalled`
			r := run(t, drv, "/bin/sh", "sh", "-c", script)
			if r.code != 10+i || strings.TrimSpace(r.out) != "got "+sig {
				t.Errorf("SIG%s to the reaper: code %d output %q, want %d, %q", sig, r.code, r.out, 10+i, "got "+sig)
			}
		}
	})
}

// TestReaperOOMScoreAndEnv: the command runs with oom_score_adj OOMScoreAdj while the reaper
// is back at 0, in the environment it was given, with no fd >= 3 inherited (the helper's
// stray non-close-on-exec fd and the status pipe stay out).
func TestReaperOOMScoreAndEnv(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		// stdin gets "go" once Start has returned, so the reaper has set its own score back.
		r := run(t, drv, "/bin/sh", "sh", "-c", `read x; cat /proc/$PPID/oom_score_adj /proc/self/oom_score_adj; echo "TZ=$TZ"`)
		want := "0\n" + strconv.Itoa(sandboxproc.OOMScoreAdj) + "\nTZ=porthole-reap-test\n"
		if r.out != want || r.code != 0 {
			t.Errorf("got %q code %d, want %q", r.out, r.code, want)
		}
		r = run(t, drv, drv, "reapdriver", "fds")
		if r.out != "" || r.code != 0 {
			t.Errorf("the command inherited fds >= 3:\n%s", r.out)
		}
	})
}

// TestReaperCttyForeground: with Ctty the reaper leads a new session on the PTY and the
// command is in its own process group, the terminal's foreground one.
func TestReaperCttyForeground(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		r := run(t, drv, "-ctty", "/bin/cat", "cat", "/proc/self/stat")
		if r.code != 0 {
			t.Fatalf("code %d err %q output %q", r.code, r.err, r.out)
		}
		_, stat, ok := strings.Cut(r.out, ") ")
		f := strings.Fields(stat)
		if !ok || len(f) < 6 {
			t.Fatalf("bad stat %q", r.out)
		}
		// state ppid pgrp session tty_nr tpgid
		ppid, pgrp, session, ttyNr, tpgid := f[1], f[2], f[3], f[4], f[5]
		pid := strconv.Itoa(r.pid)
		if pgrp != pid || tpgid != pid || session != ppid || ttyNr == "0" {
			t.Errorf("pid %s: ppid %s pgrp %s session %s tty %s tpgid %s; want own group, foreground, reaper's session, a tty",
				pid, ppid, pgrp, session, ttyNr, tpgid)
		}
	})
}

// TestReaperCommandSignalsDefault: the command starts with no signal ignored or blocked, even
// when the helper was started with SIGHUP and SIGINT ignored (as under nohup).
func TestReaperCommandSignalsDefault(t *testing.T) {
	forEachReaper(t, func(t *testing.T, drv string, _ bool) {
		r := run(t, "/bin/sh", "-c", `trap '' HUP INT PIPE; exec "$0" run "$@"`, drv,
			"/bin/grep", "grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status")
		// HUP, INT and PIPE were ignored by the helper's parent: the command gets them back at
		// their defaults, and nothing blocked. (Signals 32 and 33 are glibc's own and may come
		// ignored from the environment; no libc lets a program reset them, so they are not checked.)
		var blk, ign uint64
		if _, err := fmt.Sscanf(r.out, "SigBlk:\t%x\nSigIgn:\t%x\n", &blk, &ign); err != nil || r.code != 0 {
			t.Fatalf("command's signals: %q (code %d): %v", r.out, r.code, err)
		}
		const hupIntPipe = 1<<(1-1) | 1<<(2-1) | 1<<(13-1)
		if blk != 0 || ign&hupIntPipe != 0 || ign&^(1<<31|1<<32) != 0 {
			t.Errorf("command's signals:\n%s want nothing blocked and nothing ignored (but glibc's 32, 33)", r.out)
		}
	})
}
