//go:build linux && !js

package browser

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// TestAttackAgentWritesToThePipe: from a shell in its bwrap jail, the agent opens its
// Chromium's end of the debugging pipe (/proc/<chromium>/fd/4: same uid, Chromium is
// dumpable) and writes its own messages to the gateway: a forged reply, an event of a session
// nobody has, 100 MB without a NUL. The gateway skips them without holding them, and the live
// view's client goes on.
func TestAttackAgentWritesToThePipe(t *testing.T) {
	m := newBrowserManager(t, "")
	a := jailAgentB("brpipe", "alice", api.NetworkNone)
	s := browserService(t, m)
	v := dialCDP(t, s, a, "view")
	sv := v.openPage(t, "data:text/html,<title>watched</title>")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	out := sandboxSh(t, m, a, `
p=$(for d in /proc/[0-9]*; do c=$(tr '\0' ' ' < $d/cmdline 2>/dev/null); case "$c" in *--type=*) ;; *remote-debugging-[p]ipe*) case $(readlink $d/fd/4) in pipe:*) echo ${d#/proc/};; esac;; esac; done | head -n 1)
echo "chromium pid $p: $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-60)"
ls -l /proc/$p/fd/4
{ printf '{"id":1,"result":{"forged":true}}\0{"method":"Target.attachedToTarget","sessionId":"nobody","params":{"sessionId":"X"}}\0'
  head -c 100000000 /dev/zero | tr '\0' 'A'; printf '\0{"method":"Agent.forged","params":{}}\0'; } > /proc/$p/fd/4 && echo INJECTED`)
	t.Logf("in the jail: %s", strings.TrimSpace(out))
	if !strings.Contains(out, "INJECTED") {
		t.Fatalf("the agent could not write to its Chromium's pipe (%s); this test expects it can (the threat docs/browser-cdp.md describes)", out)
	}
	// The forged root-level event reaches the view (it is the agent's browser: its root events
	// go to every client); the 100 MB message was skipped.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v.mu.Lock()
		seen := false
		for _, e := range v.events {
			seen = seen || e.Method == "Agent.forged"
		}
		v.mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event written after the 100 MB message never reached the view: the gateway did not resynchronise")
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapInuse) - int64(before)
	t.Logf("gateway heap after 100 MB from the agent: %+d MiB", grown>>20)
	if grown > 80<<20 {
		t.Errorf("the gateway holds %d MiB more after 100 MB from the agent, want it skipped", grown>>20)
	}
	if got := v.eval(t, sv, "document.title"); got != "watched" {
		t.Errorf("the view after the agent's writes: title %q", got)
	}
	v.mu.Lock()
	if len(v.foreign) > 0 {
		t.Errorf("the forged reply reached the view: %.200q", v.foreign)
	}
	v.mu.Unlock()
}

// TestAttackAgentHoldsThePipe: the agent keeps its Chromium's end of the pipe open in a
// process of its own and kills Chromium, to stand in for the browser on a pipe that never
// ends: the helper reports the exit anyway (exitDrain after it) and the next client gets a
// new Chromium, while the agent's process still holds the old pipe.
func TestAttackAgentHoldsThePipe(t *testing.T) {
	m := newBrowserManager(t, "")
	a := jailAgentB("brhold", "alice", api.NetworkNone)
	s := browserService(t, m)
	c := dialCDP(t, s, a, "view")
	if got := c.eval(t, c.openPage(t, ""), "1+1"); got != "2" {
		t.Fatalf("1+1 = %q", got)
	}
	held := make(chan string, 1)
	go func() { // owner: the test; the exec ends after its sleep (or with the manager)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := m.Exec(ctx, a, api.ExecRequest{TimeoutS: 45, Command: []string{"sh", "-c", `
p=$(for d in /proc/[0-9]*; do c=$(tr '\0' ' ' < $d/cmdline 2>/dev/null); case "$c" in *--type=*) ;; *remote-debugging-[p]ipe*) case $(readlink $d/fd/4) in pipe:*) echo ${d#/proc/};; esac;; esac; done | head -n 1)
exec 9>/proc/$p/fd/4 && echo HOLDING
kill -9 $p
sleep 12
echo DONE`}})
		if err != nil {
			held <- err.Error()
			return
		}
		held <- res.Stdout + res.Stderr
	}()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Chromium was killed while the agent holds its pipe, and the view's client goes on with a dead browser")
	}
	if c.err == nil || !strings.Contains(c.err.Error(), "Chromium exited") {
		t.Errorf("client error = %v, want the helper's 'Chromium exited …'", c.err)
	}
	c2 := dialCDP(t, s, a, "view")
	if got := c2.eval(t, c2.openPage(t, ""), "2+2"); got != "4" {
		t.Errorf("after the restart 2+2 = %q", got)
	}
	out := <-held
	if !strings.Contains(out, "HOLDING") {
		t.Errorf("the agent could not open its Chromium's pipe: %s", out)
	}
}
