//go:build linux && !js

package desktop

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/internal/testenv"
)

// cgoHelper is the real porthole binary built with cgo (robotgo, TurboJPEG): the helper the
// bwrap jails run in these tests.
var cgoHelper struct {
	once      sync.Once
	dir, path string
	err       error
}

// desktopHelperEnv names a prebuilt cgo helper (the unprivileged re-run gets root's build).
const desktopHelperEnv = "PORTHOLE_TEST_DESKTOP_HELPER"

func cgoHelperBin(t testing.TB) string {
	if p := os.Getenv(desktopHelperEnv); p != "" {
		return p
	}
	cgoHelper.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		dir, err := os.MkdirTemp("", "porthole-desktop-test-")
		if err != nil {
			cgoHelper.err = err
			return
		}
		os.Chmod(dir, 0o755)
		cgoHelper.dir, cgoHelper.path = dir, filepath.Join(dir, "porthole")
		cmd := exec.Command("go", "build", "-o", cgoHelper.path, "./cmd/porthole")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			cgoHelper.err = fmt.Errorf("build porthole with cgo: %v\n%s", err, out)
		}
	})
	if cgoHelper.err != nil {
		t.Fatal(cgoHelper.err)
	}
	return cgoHelper.path
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newDesktopJail(t *testing.T) *bridges.Manager {
	bwrap := testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	m, err := bridges.NewManager(bridges.Config{
		DataDir:     t.TempDir(),
		HelperPath:  cgoHelperBin(t),
		BwrapPath:   bwrap,
		IdleTimeout: time.Minute,
		Logger:      slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("bridges.NewManager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func jailAgent(id, network string) api.Agent {
	return api.Agent{ID: id, Name: id, Backend: api.Backend{Type: api.BackendBwrap, Network: network}}
}

func jailSh(t *testing.T, m *bridges.Manager, a api.Agent, script string) api.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", script}, TimeoutS: 45})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", script, a.ID, err)
	}
	return res
}

// desktopClient reads one desktop stream and keeps what arrived.
type desktopClient struct {
	conn   net.Conn
	mu     sync.Mutex
	screen Screen
	rects  []Rect
	ends   int
	shots  chan Screenshot
	clips  chan string
	err    error
	done   chan struct{}
}

func openDesktop(t *testing.T, m *bridges.Manager, a api.Agent) *desktopClient {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := m.Conn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(ctx, StreamKind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helper %s stderr:\n%s", a.ID, c.Process().Stderr())
		}
	})
	d := &desktopClient{conn: s, shots: make(chan Screenshot, 4), clips: make(chan string, 16), done: make(chan struct{})}
	go func() { // owner: the test; ends when the stream closes (cleanup)
		defer close(d.done)
		var buf []byte
		for {
			f, err := ReadStreamFrame(s, buf, MaxStreamFrame)
			if err != nil {
				d.mu.Lock()
				d.err = err
				d.mu.Unlock()
				return
			}
			msg, err := Decode(f)
			if err != nil {
				d.mu.Lock()
				d.err = err
				d.mu.Unlock()
				return
			}
			msg = cloneMsg(msg)
			d.mu.Lock()
			switch msg := msg.(type) {
			case Screen:
				if len(d.rects) > 0 && d.ends == 0 {
					d.err = fmt.Errorf("Rects before the first FrameEnd then a Screen")
				}
				d.screen = msg
			case Rect:
				if d.screen.W == 0 {
					d.err = fmt.Errorf("a Rect before any Screen")
				}
				d.rects = append(d.rects, msg)
			case FrameEnd:
				d.ends++
			case Screenshot:
				select {
				case d.shots <- msg:
				default:
				}
			case Clipboard:
				select {
				case d.clips <- msg.Text:
				default:
				}
			}
			d.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.Close(); <-d.done })
	return d
}

func (d *desktopClient) send(t *testing.T, m Message) {
	t.Helper()
	if err := WriteStreamFrame(d.conn, m); err != nil {
		t.Fatalf("send %T: %v", m, err)
	}
}

// waitFor polls cond (under d.mu) until it holds or the deadline passes.
func (d *desktopClient) waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		ok, err := cond(), d.err
		d.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %s: stream: %v", what, err)
		}
		if time.Now().After(deadline) {
			d.mu.Lock()
			n, e := len(d.rects), d.ends
			d.mu.Unlock()
			t.Fatalf("timed out waiting for %s (%d rects, %d frames so far)", what, n, e)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rectsIn counts the Rects received since index from that intersect (x, y, w, h).
func (d *desktopClient) rectsIn(from, x, y, w, h int) int {
	n := 0
	for _, r := range d.rects[from:] {
		if int(r.X) < x+w && x < int(r.X)+int(r.W) && int(r.Y) < y+h && y < int(r.Y)+int(r.H) {
			n++
		}
	}
	return n
}

var absRE = regexp.MustCompile(`Absolute upper-left (X|Y):\s+(-?\d+)`)

// windowAt returns the absolute position of the window named name on the agent's display.
func windowAt(t *testing.T, m *bridges.Manager, a api.Agent, name string) (int, int) {
	t.Helper()
	var res api.ExecResult
	for range 100 {
		res = jailSh(t, m, a, "xwininfo -name "+name+" 2>&1")
		if res.ExitCode == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ms := absRE.FindAllStringSubmatch(res.Stdout, -1)
	if len(ms) != 2 {
		t.Fatalf("xwininfo -name %s: exit %d: %s", name, res.ExitCode, res.Stdout)
	}
	x, _ := strconv.Atoi(ms[0][2])
	y, _ := strconv.Atoi(ms[1][2])
	return x, y
}

// TestDesktopHelperInJail: the desktop stream of a real helper in a real bwrap jail starts
// Xvfb and a window manager, sends Screen and a keyframe, then the Rects of a window an exec
// opened (DISPLAY=:0 by default); a click and keys sent on the stream reach that X program
// at the right coordinates; Text, clipboard, resize and screenshots work.
func TestDesktopHelperInJail(t *testing.T) {
	testDesktopHelper(t, newDesktopJail(t), jailAgent("deska", api.NetworkNone))
}

// TestDesktopInContainer: the same display, capture, input, clipboard, screenshot and resize
// in a container agent (the agent image carries Xvfb, openbox, xterm and the helper's libraries).
func TestDesktopInContainer(t *testing.T) {
	engine := testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
	testenv.LookPath(t, "Xvfb")
	_, file, _, _ := runtime.Caller(0)
	image := testenv.AgentImage(t, engine, filepath.Dir(filepath.Dir(file)))
	m, err := bridges.NewManager(bridges.Config{
		DataDir:         t.TempDir(),
		HelperPath:      cgoHelperBin(t),
		ContainerEngine: engine,
		DefaultImage:    image,
		IdleTimeout:     time.Minute,
		Logger:          slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("bridges.NewManager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	a := api.Agent{ID: "deskc", Name: "deskc", Backend: api.Backend{Type: api.BackendContainer, Network: api.NetworkNone}}
	testDesktopHelper(t, m, a)
}

func testDesktopHelper(t *testing.T, m *bridges.Manager, a api.Agent) {
	d := openDesktop(t, m, a)
	t.Cleanup(func() {
		if t.Failed() {
			res := jailSh(t, m, a, "ps -eo pid,stat,wchan:32,args; tail -n 20 /tmp/porthole-desktop/*.log; xwininfo -name porthole-xev | grep -i map; xprop -root | grep -i -E NET_SUPPORTING; cat /tmp/xev.log | head -5")
			t.Logf("in the jail:\n%s", res.Stdout)
		}
	})
	d.waitFor(t, "Screen and a keyframe", 30*time.Second, func() bool {
		return d.screen == (Screen{W: DefaultWidth, H: DefaultHeight}) && d.ends > 0 && len(d.rects) > 0
	})
	d.mu.Lock()
	full := 0
	for _, r := range d.rects {
		full += int(r.W) * int(r.H)
	}
	d.mu.Unlock()
	if full < DefaultWidth*DefaultHeight {
		t.Errorf("the keyframe covers %d pixels, want the whole %dx%d screen", full, DefaultWidth, DefaultHeight)
	}

	// Programs see DISPLAY=:0 without setting it, and reach the display.
	res := jailSh(t, m, a, `echo "DISPLAY=$DISPLAY"; xdpyinfo | grep -E '^name of display|dimensions'; ls /tmp/.X11-unix; grep -c '@/tmp/.X11-unix' /proc/net/unix || true`)
	if !strings.Contains(res.Stdout, "DISPLAY=:0") || !strings.Contains(res.Stdout, "dimensions:    1280x800 pixels") {
		t.Fatalf("xdpyinfo with the default DISPLAY: exit %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "X0\n0\n") {
		t.Errorf("want only the path socket X0 and no abstract X socket in the jail:\n%s", res.Stdout)
	}
	// A window manager runs (window frames).
	if res := jailSh(t, m, a, `ps -eo args | grep -c '^openbox'`); strings.TrimSpace(res.Stdout) != "1" {
		t.Errorf("openbox is not running: %q", res.Stdout)
	}

	// A test program: xev records pointer and key events on its window.
	d.mu.Lock()
	before := len(d.rects)
	d.mu.Unlock()
	go func() { // owner: the test; xev is killed with the jail at cleanup
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c",
			"exec xev -geometry 400x300+100+100 -name porthole-xev -event button -event keyboard >/tmp/xev.log 2>&1"}, TimeoutS: 110})
	}()
	wx, wy := windowAt(t, m, a, "porthole-xev")
	t.Logf("xev window at %d,%d", wx, wy)
	d.waitFor(t, "the window's rects", 10*time.Second, func() bool {
		if d.rectsIn(before, wx, wy, 400, 300) > 0 {
			return true
		}
		return false
	})

	// A click at (wx+37, wy+41).
	px, py := uint16(wx+37), uint16(wy+41)
	d.send(t, Pointer{X: px, Y: py})
	d.send(t, Pointer{X: px, Y: py, Buttons: ButtonLeft})
	d.send(t, Pointer{X: px, Y: py})
	// Keys: shift held + KeyQ gives 'Q'; then Text.
	d.send(t, Key{Down: true, Code: "ShiftLeft"})
	d.send(t, Key{Down: true, Code: "KeyQ"})
	d.send(t, Key{Down: false, Code: "KeyQ"})
	d.send(t, Key{Down: false, Code: "ShiftLeft"})
	d.send(t, Key{Down: true, Code: "Digit7"})
	d.send(t, Key{Down: false, Code: "Digit7"})
	d.send(t, Text{Text: "hi"})
	wantLog := []string{
		fmt.Sprintf("root:(%d,%d),\n    state 0x0, button 1,", px, py),
		"(keysym 0x51, Q)", "(keysym 0x37, 7)", "(keysym 0x68, h)", "(keysym 0x69, i)",
	}
	var log string
	for i := 0; ; i++ {
		log = jailSh(t, m, a, "cat /tmp/xev.log").Stdout
		missing := ""
		for _, w := range wantLog {
			if !strings.Contains(log, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if i == 50 {
			t.Fatalf("xev did not record %q:\n%s", missing, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(log, "ButtonRelease") {
		t.Errorf("no button release recorded:\n%s", log)
	}

	// Clipboard: set from the gateway, read by an X client; an X client's copy comes back.
	d.send(t, SetClipboard{Text: "from-the-viewer ✓"})
	var got string
	for range 50 {
		got = jailSh(t, m, a, `command -v xclip >/dev/null || { echo NOXCLIP; exit 0; }; xclip -o -selection clipboard 2>&1`).Stdout
		if strings.Contains(got, "from-the-viewer") || strings.Contains(got, "NOXCLIP") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(got, "NOXCLIP") {
		testenv.Missing(t, "xclip in the sandbox, to read the display's clipboard back (Debian package xclip)")
	} else if !strings.Contains(got, "from-the-viewer ✓") {
		t.Errorf("clipboard read by an X client: %q", got)
	}
	// The other way: an X client copies, the viewer side gets a Clipboard frame (xclip -quiet
	// stays in the foreground: a backgrounded xclip would die with its exec, by design).
	go func() { // owner: the test; xclip exits after one paste or 20 s
		m.Exec(context.Background(), a, api.ExecRequest{Command: []string{"sh", "-c",
			`printf 'from-an-x-client' | timeout 20 xclip -quiet -selection clipboard -i -loops 1`}, TimeoutS: 25})
	}()
	deadline := time.After(20 * time.Second)
	for got := ""; got != "from-an-x-client"; {
		select {
		case got = <-d.clips:
		case <-deadline:
			t.Fatalf("no Clipboard frame after an X client copied (last %q)", got)
		}
	}

	// Screenshot at 50 %.
	d.send(t, ScreenshotRequest{Format: EncPNG, Scale: 50})
	select {
	case s := <-d.shots:
		if s.Format != EncPNG || s.W != DefaultWidth/2 || s.H != DefaultHeight/2 || len(s.Data) < 100 || string(s.Data[1:4]) != "PNG" {
			t.Errorf("screenshot: format %d %dx%d, %d bytes", s.Format, s.W, s.H, len(s.Data))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no screenshot")
	}

	// Resize through RandR: a new Screen of the asked size (clamped to the maximum).
	d.send(t, ResizeRequest{W: 1024, H: 768})
	d.waitFor(t, "Screen 1024x768", 10*time.Second, func() bool { return d.screen == (Screen{W: 1024, H: 768}) })
	d.send(t, ResizeRequest{W: 7000, H: 4000})
	d.waitFor(t, "Screen clamped to the maximum", 10*time.Second, func() bool { return d.screen == (Screen{W: MaxWidth, H: MaxHeight}) })
}

// TestDesktopDisplayIsolated: another agent (network none and full) and the host cannot
// reach an agent's display: each tries to connect to :0 (path socket, abstract socket).
func TestDesktopDisplayIsolated(t *testing.T) {
	m := newDesktopJail(t)
	others := []api.Agent{jailAgent("deskother"+api.NetworkNone, api.NetworkNone)}
	testenv.LookPath(t, "slirp4netns")
	others = append(others, jailAgent("deskother"+api.NetworkFull, api.NetworkFull))
	testDisplayIsolated(t, m, jailAgent("deskiso", api.NetworkNone), others)
}

// TestDesktopDisplayIsolatedContainers: the same for a container agent's display, probed from
// container agents on both networks and from a bwrap jail.
func TestDesktopDisplayIsolatedContainers(t *testing.T) {
	engine := testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
	bwrap := testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	_, file, _, _ := runtime.Caller(0)
	image := testenv.AgentImage(t, engine, filepath.Dir(filepath.Dir(file)))
	m, err := bridges.NewManager(bridges.Config{
		DataDir: t.TempDir(), HelperPath: cgoHelperBin(t), BwrapPath: bwrap,
		ContainerEngine: engine, DefaultImage: image, IdleTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("bridges.NewManager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	container := func(id, network string) api.Agent {
		return api.Agent{ID: id, Name: id, Backend: api.Backend{Type: api.BackendContainer, Network: network}}
	}
	testDisplayIsolated(t, m, container("deskisoc", api.NetworkNone), []api.Agent{
		container("deskotherc"+api.NetworkNone, api.NetworkNone),
		container("deskotherc"+api.NetworkFull, api.NetworkFull),
		jailAgent("deskotherj", api.NetworkNone),
	})
}

// testDisplayIsolated: agent a's display, marked with a token on its root window, is reached
// from a itself (the probe works) but not from any of others, nor from the host.
func testDisplayIsolated(t *testing.T, m *bridges.Manager, a api.Agent, others []api.Agent) {
	d := openDesktop(t, m, a)
	d.waitFor(t, "Screen", 30*time.Second, func() bool { return d.screen.W != 0 && d.ends > 0 })
	tok := fmt.Sprintf("porthole-display-%d", time.Now().UnixNano())
	if res := jailSh(t, m, a, "xprop -root -f PORTHOLE_TOKEN 8s -set PORTHOLE_TOKEN "+tok+" && xprop -root PORTHOLE_TOKEN"); !strings.Contains(res.Stdout, tok) {
		t.Fatalf("mark the display: exit %d %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	probe := `xdpyinfo -display :0 >/dev/null 2>&1 && echo CONNECTED-PATH; xdpyinfo -display unix:0 >/dev/null 2>&1 && echo CONNECTED-UNIX; xprop -display :0 -root PORTHOLE_TOKEN 2>&1; ls -a /tmp/.X11-unix 2>&1; echo done`
	// The probe does connect from the agent's own sandbox (so its failing elsewhere means something).
	if res := jailSh(t, m, a, probe); !strings.Contains(res.Stdout, "CONNECTED-PATH") || !strings.Contains(res.Stdout, tok) {
		t.Fatalf("the probe does not reach the display from its own agent:\n%s%s", res.Stdout, res.Stderr)
	}
	for _, b := range others {
		res := jailSh(t, m, b, probe)
		if strings.Contains(res.Stdout, "CONNECTED") || strings.Contains(res.Stdout, tok) || !strings.Contains(res.Stdout, "done") {
			t.Errorf("agent %s (%s, network %s) reached agent %s's display:\n%s", b.ID, b.Backend.Type, b.Backend.Network, a.ID, res.Stdout)
		}
	}
	// The host: neither the abstract socket nor a path socket of this display exists here;
	// whatever answers on :0 on the host (another X server) is not the agent's display.
	for _, addr := range []string{"@/tmp/.X11-unix/X0", "/tmp/.X11-unix/X0"} {
		c, err := net.DialTimeout("unix", addr, time.Second)
		if err != nil {
			continue
		}
		c.Close()
		x, err := xgb.NewConnNet(mustDial(t, addr))
		if err != nil {
			continue
		}
		if hasToken(x, tok) {
			t.Errorf("the host reached agent %s's display through %s", a.ID, addr)
		}
		x.Close()
	}
}

func mustDial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hasToken(x *xgb.Conn, tok string) bool {
	root := xproto.Setup(x).DefaultScreen(x).Root
	name := "PORTHOLE_TOKEN"
	a, err := xproto.InternAtom(x, true, uint16(len(name)), name).Reply()
	if err != nil || a.Atom == 0 {
		return false
	}
	p, err := xproto.GetProperty(x, false, root, a.Atom, xproto.GetPropertyTypeAny, 0, 64).Reply()
	return err == nil && string(p.Value) == tok
}

// TestUnprivilegedDesktop re-runs the desktop's jail tests as the unprivileged user the
// gateway runs as in deployments (bwrap jails with rlimits instead of cgroups).
func TestUnprivilegedDesktop(t *testing.T) {
	if os.Getenv(testenv.UnprivilegedChildEnv) != "" {
		return // this is the re-run itself (its pattern does not name this test; a guard against recursion)
	}
	testenv.LookPath(t, "bwrap")
	testenv.LookPath(t, "Xvfb")
	out := testenv.RerunUnprivileged(t, "^(TestDesktopHelperInJail|TestDesktopDisplayIsolated)$",
		map[string]string{desktopHelperEnv: cgoHelperBin(t)})
	for _, want := range []string{"--- PASS: TestDesktopHelperInJail ", "--- PASS: TestDesktopDisplayIsolated "} {
		if !strings.Contains(out, want) {
			t.Errorf("the unprivileged run lacks %q", want)
		}
	}
}

// TestDesktopDisplayCrash: when the agent's X server dies (here: killed from inside the
// sandbox), the desktop stream ends (the gateway tells its viewers) but the helper survives,
// input replay included (Xlib's default handlers would exit the process); the next stream
// starts a new display, and input reaches programs on it.
func TestDesktopDisplayCrash(t *testing.T) {
	m := newDesktopJail(t)
	a := jailAgent("deskcrash", api.NetworkNone)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := m.Conn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	d := openDesktop(t, m, a)
	d.waitFor(t, "Screen", 30*time.Second, func() bool { return d.screen.W != 0 && d.ends > 0 })
	// Input opens the helper's Xlib connection (robotgo).
	d.send(t, Pointer{X: 5, Y: 5})
	d.send(t, Key{Down: true, Code: "KeyA"})
	d.send(t, Key{Down: false, Code: "KeyA"})
	time.Sleep(300 * time.Millisecond)
	if res := jailSh(t, m, a, `kill -9 $(pidof Xvfb)`); res.ExitCode != 0 {
		t.Fatalf("kill Xvfb: %d %s", res.ExitCode, res.Stderr)
	}
	d.waitFor(t, "the stream to end", 15*time.Second, func() bool { return d.err != nil })
	// Input sent to a dead display goes nowhere, and does not take the helper down.
	d2 := openDesktop(t, m, a)
	d2.send(t, Pointer{X: 6, Y: 6, Buttons: ButtonLeft})
	d2.send(t, Pointer{X: 6, Y: 6})
	d2.waitFor(t, "a new display's Screen", 30*time.Second, func() bool { return d2.screen.W != 0 && d2.ends > 0 })
	select {
	case <-conn.Done():
		t.Fatalf("the helper exited with the display: %v\n%s", conn.Err(), conn.Process().Stderr())
	default:
	}
	if c2, err := m.Conn(ctx, a); err != nil || c2 != conn {
		t.Fatalf("the helper was restarted (or is gone): %v", err)
	}
	// Input works on the new display.
	go func() { // owner: the test; xev is killed with the jail at cleanup
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c",
			"exec xev -geometry 300x200+50+50 -name porthole-xev2 -event keyboard >/tmp/xev2.log 2>&1"}, TimeoutS: 55})
	}()
	wx, wy := windowAt(t, m, a, "porthole-xev2")
	d2.send(t, Pointer{X: uint16(wx + 10), Y: uint16(wy + 10), Buttons: ButtonLeft})
	d2.send(t, Pointer{X: uint16(wx + 10), Y: uint16(wy + 10)})
	for i := 0; ; i++ {
		d2.send(t, Text{Text: "z"})
		if strings.Contains(jailSh(t, m, a, "cat /tmp/xev2.log").Stdout, "(keysym 0x7a, z)") {
			break
		}
		if i == 30 {
			t.Fatalf("keys do not reach a program on the new display:\n%s", jailSh(t, m, a, "cat /tmp/xev2.log").Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
