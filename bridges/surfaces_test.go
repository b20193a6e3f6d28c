package bridges

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// surfaceScript starts what the desktop and browser surfaces need, inside the sandbox: Xvfb on :0
// and headless Chromium with its profile under /home/agent, driven over --remote-debugging-pipe,
// then loads a file:// page written into the home.
const surfaceScript = `set -e
cd /home/agent
printf '<html><body><h1 id="x">porthole-TOKEN</h1><script>document.getElementById("x").textContent += "-js"</script></body></html>' > page.html
Xvfb :0 -noreset -nolisten tcp -screen 0 1280x720x24 >/tmp/xvfb.log 2>&1 &
for i in $(seq 100); do [ -S /tmp/.X11-unix/X0 ] && break; sleep 0.1; done
[ -S /tmp/.X11-unix/X0 ] || { cat /tmp/xvfb.log; exit 10; }
DISPLAY=:0 setxkbmap -print | grep -q xkb_keymap && echo X-OK
CHROME="chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=/home/agent/.config/porthole-test-profile"
# The browser surface's transport: CDP over fds 3/4.
mkfifo /tmp/cdp-in /tmp/cdp-out
$CHROME --remote-debugging-pipe about:blank 3</tmp/cdp-in 4>/tmp/cdp-out 2>/tmp/chromium.log &
exec 5>/tmp/cdp-in 6</tmp/cdp-out
printf '{"id":1,"method":"Browser.getVersion"}\0' >&5
IFS= read -r -d '' resp <&6 || true
case "$resp" in *'"id":1'*product*) echo CDP-OK ;; *) echo "CDP reply: $resp"; cat /tmp/chromium.log; exit 11 ;; esac
printf '{"id":2,"method":"Browser.close"}\0' >&5
wait $! 2>/dev/null || true
exec 5>&- 6<&-
$CHROME --dump-dom file:///home/agent/page.html 2>/tmp/chromium2.log || { cat /tmp/chromium2.log; exit 12; }
ls -d /home/agent/.config/porthole-test-profile/Default >/dev/null && echo PROFILE-IN-HOME
`

// TestSurfacesRunInside: Xvfb and Chromium start inside the bwrap jail and inside the container
// (through Exec, i.e. through the helper), and Chromium loads a page from the agent's home.
func TestSurfacesRunInside(t *testing.T) {
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		t.Run(typ, func(t *testing.T) {
			requireBackend(t, typ)
			m, cfg := newTestManager(t, nil)
			a := agent("surf1", typ, api.NetworkNone, api.Limits{})
			tok := randHex(6)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"bash", "-c", strings.ReplaceAll(surfaceScript, "TOKEN", tok)}, TimeoutS: 150})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"X-OK", "CDP-OK", "porthole-" + tok + "-js", "PROFILE-IN-HOME"} {
				if !strings.Contains(res.Stdout, want) {
					t.Errorf("%s: output lacks %q: exit %d\nstdout: %s\nstderr: %s", typ, want, res.ExitCode, res.Stdout, lastLines(res.Stderr, 20))
				}
			}
			// On the host, Chromium's profile is in the agent's own home.
			if _, err := os.Stat(filepath.Join(AgentHome(cfg.DataDir, a.ID), ".config/porthole-test-profile/Default")); err != nil {
				t.Errorf("profile not in the agent's home on the host: %v", err)
			}
		})
	}
}
