//go:build !js

package app

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/porthole/porthole/terminal"
)

// internalDetail is what a sentence for people must not carry: socket paths and URLs, file
// paths, Go error chains and the words of the code's own errors.
var internalDetail = regexp.MustCompile(`(?i)\.sock|unix:|/var/|/run/|/tmp/|dial |connect:|exit status|errno|` +
	`backend unavailable|agent helper|helper error|input not delivered|terminal service closed|opcode|%!|: .*: `)

// humanSentence fails unless s is a short sentence (a capital, a final period) with none of
// the internal detail and with want in it (the way on).
func humanSentence(t *testing.T, call, s, want string) {
	t.Helper()
	first, _ := utf8.DecodeRuneInString(s)
	switch {
	case !unicode.IsUpper(first) && !strings.HasPrefix(call, "endedText"): // endedText follows "Ended: "
		t.Errorf("%s = %q, want a sentence starting with a capital", call, s)
	case !strings.HasSuffix(s, "."):
		t.Errorf("%s = %q, want a sentence ending with a period", call, s)
	case len(s) > 160:
		t.Errorf("%s = %q (%d bytes), want at most 160", call, s, len(s))
	case internalDetail.MatchString(s):
		t.Errorf("%s = %q, want no internal detail (matched %q)", call, s, internalDetail.FindString(s))
	case !strings.Contains(s, want):
		t.Errorf("%s = %q, want it to say %q", call, s, want)
	}
}

// TestTermErrorText: the Error messages the server really sends (terminal/session.go,
// terminal/service.go; the helper's errors as bridges wraps them) become sentences for people
// with the next step, never a socket path or an error chain.
func TestTermErrorText(t *testing.T) {
	for _, tt := range []struct {
		code terminal.ErrCode
		msg  string
		want string
	}{
		// The container engine is not running (bridges/container.go, wrapped by the session).
		{terminal.ErrCodeHelper, `agent helper unavailable: agent ag-7f3: container backend: container engine docker is not reachable: ` +
			`Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?: backend unavailable`,
			"the container backend is unavailable. An admin can see why under Users → Backend health."},
		{terminal.ErrCodeHelper, `agent helper unavailable: agent ag-7f3: bwrap backend: cannot create a jail (user namespaces blocked?): ` +
			`exit status 1: bwrap: setting up uid map: Permission denied: backend unavailable`, "the bwrap backend is unavailable"},
		// The helper crashed on start.
		{terminal.ErrCodeHelper, `agent helper unavailable: agent ag-7f3: bwrap helper did not start (signal: killed): backend unavailable`,
			"its backend is unavailable"},
		{terminal.ErrCodeHelper, `agent helper unavailable: agent ag-7f3: host backend not allowed on this server`, "--allow-host-backend"},
		// The helper's socket went away under a running terminal.
		{terminal.ErrCodeHelper, `terminal 3: input not delivered: write unix @->/run/porthole/agents/ag-7f3/helper.sock: broken pipe`,
			"Try again in a moment."},
		{terminal.ErrCodeHelper, `agent helper unavailable: dial unix /run/porthole/agents/ag-7f3/helper.sock: connect: no such file or directory`,
			"Try again in a moment."},
		// Access changed: watch only now; the terminal or the agent is gone.
		{terminal.ErrCodeWatchOnly, "you are watching this agent: only drivers can open terminals", "Its owner can give you drive access."},
		{terminal.ErrCodeNotFound, "terminal 3 does not exist (it ended, or belongs to another agent)", "Open a new terminal"},
		{terminal.ErrCodeNotFound, "terminal 3 has ended", "Open a new terminal"},
		{terminal.ErrCodeNotFound, "terminal 3: attach before resizing", "Open a new terminal"},
		{terminal.ErrCodeLimit, "terminal limit reached: this agent already has 8 open terminals (max 8 per agent); close one first",
			"Terminal limit reached: this agent already has 8 open terminals (max 8 per agent); close one first."},
		{terminal.ErrCodeLimit, "terminal limit reached: the server has 64 open terminals (max 64 per server)", "try again later"},
		{terminal.ErrCodeSlow, "client too slow", "Reconnect"},
		{terminal.ErrCodeInternal, terminal.ErrClosed.Error(), "Reload the page"},
		{terminal.ErrCodeInternal, "store: database is locked (5) (SQLITE_BUSY)", "Reload the page"},
		{terminal.ErrCodeBadMessage, "text messages are not part of the terminal protocol; send binary frames", "Reload the page"},
	} {
		humanSentence(t, fmt.Sprintf("termErrorText(%d, %q)", tt.code, tt.msg), termErrorText(tt.code, tt.msg), tt.want)
	}
}

// TestEndedText: why a terminal ended, from the Exit reasons the server sends (terminal/term.go,
// terminal/service.go, terminal/session.go, with the client's " (status N)") and the client's
// own; a helper's own error text is summed up, not shown.
func TestEndedText(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"shell exited (status 0)", "the shell exited. Open a new terminal to go on."},
		{"shell exited (status 130)", "status 130"},
		{terminal.ErrHelperExited.Error(), "the agent's sandbox stopped unexpectedly. Open a new terminal to start it again."}, // helper crashed
		{"agent stopped", "stopped or deleted"},                                                                                // agent deleted or stopped (CloseAgent)
		{"idle timeout", "Open a new terminal"},
		{"closed by alice", "closed by alice."},
		{"server shutting down", "Open a new terminal once it is back."},
		{"no longer exists", "Open a new terminal"},
		{"ended", "Open a new terminal"},
		{"exec /bin/bash: no such file or directory (status 127)", "the program in it failed."},
		{"helper error", "Open a new terminal"},
	} {
		humanSentence(t, fmt.Sprintf("endedText(%q)", tt.reason), endedText(tt.reason), tt.want)
	}
	if !knownEnd("agent stopped") || knownEnd("exec /bin/bash: no such file or directory") {
		t.Errorf("knownEnd: a server reason unknown or a helper's words known; want admins shown only the helper's words")
	}
}
