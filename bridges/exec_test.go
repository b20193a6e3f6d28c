package bridges

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// TestExec runs commands in a real bwrap jail: exit codes, stdin, output caps, timeouts.
func TestExec(t *testing.T) {
	requireBackend(t, api.BackendBwrap)
	m, _ := newTestManager(t, nil)
	a := agent("exec1", api.BackendBwrap, api.NetworkNone, api.Limits{})
	ctx := context.Background()
	tests := []struct {
		name string
		req  api.ExecRequest
		want func(api.ExecResult) bool
	}{
		{"exit_code", api.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			func(r api.ExecResult) bool { return r.ExitCode == 3 && r.Stdout == "out\n" && r.Stderr == "err\n" }},
		{"stdin", api.ExecRequest{Command: []string{"tr", "a-z", "A-Z"}, Stdin: "hello jail\n"},
			func(r api.ExecResult) bool { return r.ExitCode == 0 && r.Stdout == "HELLO JAIL\n" }},
		{"command_not_found", api.ExecRequest{Command: []string{"no-such-command-xyz"}},
			func(r api.ExecResult) bool { return r.ExitCode == 127 && strings.Contains(r.Stderr, "not found") }},
		{"killed_by_signal", api.ExecRequest{Command: []string{"sh", "-c", "kill -9 $$"}},
			func(r api.ExecResult) bool { return r.ExitCode == 137 }},
		{"stdout_capped_and_marked", api.ExecRequest{Command: []string{"sh", "-c", "head -c 3000000 /dev/zero; echo done >&2"}},
			func(r api.ExecResult) bool {
				return len(r.Stdout) == MaxExecOutput && r.StdoutTruncated && !r.StderrTruncated && r.Stderr == "done\n"
			}},
		{"stderr_capped_and_marked", api.ExecRequest{Command: []string{"sh", "-c", "head -c 1048577 /dev/zero >&2"}},
			func(r api.ExecResult) bool {
				return len(r.Stderr) == MaxExecOutput && r.StderrTruncated && !r.StdoutTruncated
			}},
		{"exactly_the_cap_is_not_truncated", api.ExecRequest{Command: []string{"head", "-c", "1048576", "/dev/zero"}},
			func(r api.ExecResult) bool { return len(r.Stdout) == MaxExecOutput && !r.StdoutTruncated }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := m.Exec(ctx, a, tt.req)
			if err != nil {
				t.Fatalf("Exec(%q) error %v", tt.req.Command, err)
			}
			if !tt.want(res) {
				r := res
				if len(r.Stdout) > 200 {
					r.Stdout = r.Stdout[:200] + "..."
				}
				t.Errorf("Exec(%q) = %+v (stdout %d bytes)", tt.req.Command, r, len(res.Stdout))
			}
		})
	}

	t.Run("timeout_kills_the_process_group", func(t *testing.T) {
		start := time.Now()
		res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", "sleep 300 & sleep 301; echo never"}, TimeoutS: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != 137 || strings.Contains(res.Stdout, "never") {
			t.Errorf("Exec with timeout 1s = %+v, want timed_out and exit 137", res)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("timed-out exec returned after %v", d)
		}
		res = sh(t, m, a, "ps -eo args= | grep -c '^sleep 30' || true")
		if strings.TrimSpace(res.Stdout) != "0" {
			t.Errorf("sleeps left after the timeout: %q", res.Stdout)
		}
	})
	t.Run("leftover_background_processes_are_killed", func(t *testing.T) {
		res := sh(t, m, a, "sleep 400 & echo started")
		if res.Stdout != "started\n" {
			t.Fatalf("got %+v", res)
		}
		res = sh(t, m, a, "ps -eo args= | grep -c '^sleep 400' || true")
		if strings.TrimSpace(res.Stdout) != "0" {
			t.Errorf("background sleep survived its exec: %q", res.Stdout)
		}
	})
	t.Run("cancel_kills_the_command", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := m.Exec(cctx, a, api.ExecRequest{Command: []string{"sleep", "500"}, TimeoutS: 600})
		if err == nil {
			t.Fatal("Exec with a cancelled context succeeded")
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			res := sh(t, m, a, "ps -eo args= | grep -c '^sleep 500' || true")
			if strings.TrimSpace(res.Stdout) == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sleep 500 still runs after the gateway gave up: %q", res.Stdout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("invalid_requests_start_nothing", func(t *testing.T) {
		for _, req := range []api.ExecRequest{
			{},
			{Command: []string{""}},
			{Command: []string{"true"}, TimeoutS: -1},
			{Command: []string{"true"}, Stdin: strings.Repeat("x", MaxExecStdin+1)},
		} {
			if _, err := m.Exec(ctx, agent("never-started", api.BackendBwrap, api.NetworkNone, api.Limits{}), req); !errors.Is(err, ErrInvalidExec) {
				t.Errorf("Exec(%+.40v) = %v, want ErrInvalidExec", req, err)
			}
		}
	})
}
