//go:build linux && !js

package desktop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/desktop/internal/x11cap"
	"github.com/porthole/porthole/internal/sandboxproc"
	"github.com/porthole/porthole/surface"
)

// The agent's display, inside its sandbox. It is started on the first desktop stream of a
// helper session (surface.Shared) and stopped when the session ends (the gateway closed it
// or the helper's idle timeout stopped the helper; an open desktop stream counts as activity).
const (
	// DisplayName is the agent's display (DefaultWidth × DefaultHeight when it starts): every process the helper starts sees DISPLAY=:0
	// (sandboxproc.Env), whether or not the display runs yet.
	DisplayName = sandboxproc.AgentDisplay
	// MaxWidth × MaxHeight is the largest size a viewer can ask for: Xvfb's framebuffer is
	// allocated at this size (16 MB at 24 bits) and RandR can only shrink within it.
	MaxWidth, MaxHeight = 2560, 1600
	// displayStartTimeout bounds the wait for Xvfb to accept connections.
	displayStartTimeout = 15 * time.Second
	// wmReadyTimeout bounds the wait for the window manager to manage a first window.
	wmReadyTimeout = 20 * time.Second
	// x11Dir holds the X server's path socket: the jail's private /tmp, never the host's.
	x11Dir = "/tmp/.X11-unix"
)

// ErrDisplay is wrapped by errors starting the agent's display.
var ErrDisplay = errors.New("the desktop's display could not start")

// display is one agent's X server and window manager.
type display struct {
	name     string
	xvfb, wm *sandboxproc.Process // nil when the display was already running (not ours)
	log      *slog.Logger
	stopOnce sync.Once
}

type displayKey struct{}

// sessionDisplay is the helper session's display slot: the display runs from its first use
// to the session's end, and is started again by the next stream if it died (Xvfb crashed or
// was killed): a display crash ends the streams on it, not the helper.
type sessionDisplay struct {
	log    *slog.Logger
	mu     sync.Mutex
	cur    *display
	closed bool
}

// sharedDisplay returns the helper session's display, starting it on first use and again
// after it died.
func sharedDisplay(ctx context.Context, log *slog.Logger) (*display, error) {
	s, err := surface.Shared(ctx, displayKey{}, func() (*sessionDisplay, func(), error) {
		s := &sessionDisplay{log: log}
		return s, s.close, nil
	})
	if err != nil {
		return nil, err
	}
	return s.get(ctx)
}

func (s *sessionDisplay) get(ctx context.Context) (*display, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, surface.ErrLifetimeEnded
	}
	if s.cur != nil {
		if s.cur.alive() {
			return s.cur, nil
		}
		s.log.Warn("desktop: the display died; starting it again", "display", s.cur.name)
		s.cur.stop()
		s.cur = nil
	}
	d, err := startDisplay(ctx, DisplayName, s.log)
	if err != nil {
		return nil, err
	}
	s.cur = d
	return d, nil
}

func (s *sessionDisplay) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cur != nil {
		s.cur.stop()
		s.cur = nil
	}
}

// alive reports whether the display still runs: it accepts connections (a killed Xvfb may
// not be reaped yet) and our Xvfb has not exited.
func (d *display) alive() bool {
	if dialDisplay(d.name) != nil {
		return false
	}
	if d.xvfb == nil {
		return true
	}
	select {
	case <-d.xvfb.Done():
		return false
	default:
		return true
	}
}

// displaySocket is the path socket of display name (":0" → /tmp/.X11-unix/X0).
func displaySocket(name string) string {
	return filepath.Join(x11Dir, "X"+strings.TrimPrefix(name, ":"))
}

// dialDisplay checks that the display's path socket accepts connections.
func dialDisplay(name string) error {
	c, err := net.DialTimeout("unix", displaySocket(name), time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// startDisplay starts Xvfb on name with only its path socket (-nolisten tcp: no TCP;
// -nolisten local: no abstract socket, which would live in the network namespace and be
// reachable from anything sharing it), -noreset (captures and input connect and disconnect),
// then sets the default size through RandR and starts the window manager. A display that
// already runs on name (the agent started its own Xvfb, or a host agent's real screen) is
// used as it is and not stopped.
func startDisplay(ctx context.Context, name string, log *slog.Logger) (*display, error) {
	// The helper's own connections (input replay, clipboard) use DISPLAY too.
	os.Setenv("DISPLAY", name)
	d := &display{name: name, log: log}
	if dialDisplay(name) == nil {
		log.Info("desktop: using the display that already runs", "display", name)
		return d, nil
	}
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		return nil, fmt.Errorf("%w: Xvfb is not installed in the sandbox (Debian package xvfb): %v", ErrDisplay, err)
	}
	if err := os.MkdirAll(x11Dir, 0o777); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDisplay, x11Dir, err)
	}
	os.Chmod(x11Dir, 0o777|os.ModeSticky) // 1777, as X expects; the jail's own /tmp
	// A stale socket of a display that is gone (the helper was killed) would make Xvfb refuse.
	os.Remove(displaySocket(name))
	os.Remove("/tmp/.X" + strings.TrimPrefix(name, ":") + "-lock")
	logf := openLog("xvfb.log")
	defer logf.Close()
	d.xvfb, err = sandboxproc.Start(sandboxproc.Spec{
		Path: xvfb,
		Args: []string{"Xvfb", name, "-screen", "0", fmt.Sprintf("%dx%dx24", MaxWidth, MaxHeight),
			"-noreset", "-nolisten", "tcp", "-nolisten", "local", "+extension", "RANDR",
			// A solid root (-br) instead of X's 1-pixel stipple, which costs JPEG bytes in every
			// region a window uncovers (a dragged window's trail, a typed line's background).
			"-br"},
		Env:    sandboxproc.Env(),
		Stdout: logf, Stderr: logf,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDisplay, err)
	}
	deadline := time.NewTimer(displayStartTimeout)
	defer deadline.Stop()
	for dialDisplay(name) != nil {
		select {
		case <-d.xvfb.Done():
			code, _ := d.xvfb.Wait()
			return nil, fmt.Errorf("%w: Xvfb exited with code %d (see /tmp/porthole-desktop/xvfb.log)", ErrDisplay, code)
		case <-deadline.C:
			d.stop()
			return nil, fmt.Errorf("%w: Xvfb did not accept connections within %s", ErrDisplay, displayStartTimeout)
		case <-ctx.Done():
			d.stop()
			return nil, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := resizeDisplay(name, DefaultWidth, DefaultHeight); err != nil {
		log.Warn("desktop: cannot set the default size", "err", err)
	}
	if err := d.startWM(); err != nil {
		// Windows without frames are still usable: the display stays.
		log.Warn("desktop: window manager", "err", err)
	} else if err := waitWM(ctx, name, d.wm, wmReadyTimeout); err != nil {
		log.Warn("desktop: the window manager is not ready", "err", err)
	}
	log.Info("desktop: display started", "display", name, "pid", d.xvfb.Pid)
	return d, nil
}

// resizeDisplay sets the screen size through RandR (a short-lived connection).
func resizeDisplay(name string, w, h int) error {
	c, err := x11cap.Open(name, x11cap.Options{NoSHM: true, NoDamage: true})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Resize(w, h)
}

// clampSize clamps a requested display size to what Xvfb can take.
func clampSize(w, h int) (int, int) {
	return min(max(w, MinDisplay), MaxWidth), min(max(h, MinDisplay), MaxHeight)
}

// desktopDir holds the helper's files for the display (logs, the window manager's config).
func desktopDir() string { return filepath.Join(os.TempDir(), "porthole-desktop") }

func openLog(name string) *os.File {
	dir := desktopDir()
	os.MkdirAll(dir, 0o700)
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		f, _ = os.Open(os.DevNull)
	}
	return f
}

// openboxRC is openbox's configuration: one desktop, no decorations theme lookups beyond
// the default, the root menu from openboxMenu. An unmodified button bound in the "Frame"
// context (which covers the client window too) would be grabbed by openbox and never reach
// the program; "Client" bindings are replayed to it, so focus-on-click lives there.
const openboxRC = `<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <desktops><number>1</number></desktops>
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <menu><file>MENU</file></menu>
  <mouse>
    <context name="Root">
      <mousebind button="Right" action="Press"><action name="ShowMenu"><menu>root-menu</menu></action></mousebind>
      <mousebind button="Left" action="Press"><action name="ShowMenu"><menu>root-menu</menu></action></mousebind>
    </context>
    <context name="Titlebar">
      <mousebind button="Left" action="Drag"><action name="Move"/></mousebind>
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
      <mousebind button="Left" action="DoubleClick"><action name="ToggleMaximize"/></mousebind>
    </context>
    <context name="Frame">
      <mousebind button="A-Left" action="Drag"><action name="Move"/></mousebind>
    </context>
    <context name="Client">
      <mousebind button="Left" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>
    </context>
    <context name="Close"><mousebind button="Left" action="Click"><action name="Close"/></mousebind></context>
    <context name="Maximize"><mousebind button="Left" action="Click"><action name="ToggleMaximize"/></mousebind></context>
    <context name="Iconify"><mousebind button="Left" action="Click"><action name="Iconify"/></mousebind></context>
    <context name="Top"><mousebind button="Left" action="Drag"><action name="Resize"><edge>top</edge></action></mousebind></context>
    <context name="Bottom"><mousebind button="Left" action="Drag"><action name="Resize"><edge>bottom</edge></action></mousebind></context>
    <context name="Left"><mousebind button="Left" action="Drag"><action name="Resize"><edge>left</edge></action></mousebind></context>
    <context name="Right"><mousebind button="Left" action="Drag"><action name="Resize"><edge>right</edge></action></mousebind></context>
    <context name="BRCorner"><mousebind button="Left" action="Drag"><action name="Resize"/></mousebind></context>
  </mouse>
</openbox_config>
`

// openboxMenu is the root menu (a click on the background): a terminal.
const openboxMenu = `<?xml version="1.0" encoding="UTF-8"?>
<openbox_menu xmlns="http://openbox.org/3.4/menu">
  <menu id="root-menu" label="Porthole">
    <item label="Terminal"><action name="Execute"><command>xterm</command></action></item>
  </menu>
</openbox_menu>
`

// startWM starts openbox with the helper's configuration (a root menu with a terminal).
// Without openbox the display still works, without window frames.
func (d *display) startWM() error {
	ob, err := exec.LookPath("openbox")
	if err != nil {
		return fmt.Errorf("openbox is not installed in the sandbox (Debian package openbox): %v", err)
	}
	dir := desktopDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	menu := filepath.Join(dir, "menu.xml")
	rc := filepath.Join(dir, "rc.xml")
	if err := os.WriteFile(menu, []byte(openboxMenu), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(rc, []byte(strings.Replace(openboxRC, "MENU", menu, 1)), 0o600); err != nil {
		return err
	}
	logf := openLog("openbox.log")
	defer logf.Close()
	d.wm, err = sandboxproc.Start(sandboxproc.Spec{
		Path:   ob,
		Args:   []string{"openbox", "--config-file", rc},
		Dir:    os.Getenv("HOME"),
		Env:    sandboxproc.Env("DISPLAY=" + d.name),
		Stdout: logf, Stderr: logf,
	})
	return err
}

// stop ends the window manager and the X server (each with its whole process tree) and
// waits for them; a display that was already running is left alone.
func (d *display) stop() {
	d.stopOnce.Do(func() {
		for _, p := range []*sandboxproc.Process{d.wm, d.xvfb} {
			if p == nil {
				continue
			}
			p.Signal(syscall.SIGTERM)
			select {
			case <-p.Done():
			case <-time.After(2 * time.Second):
				p.Kill()
				p.Wait()
			}
		}
		if d.xvfb != nil {
			d.log.Info("desktop: display stopped", "display", d.name)
		}
	})
}

// waitWM waits until the window manager manages windows: it maps a small probe window and
// waits for the window manager to reparent it into a frame, with a new probe every second.
// Openbox takes the root's SubstructureRedirect early in its start, then loads its fonts
// and theme (a second or more on a cold fontconfig cache); a window mapped meanwhile is
// never mapped at all (its MapRequest is lost). So the display is ready, and the desktop's
// first frame sent, only once a probe window got its frame.
func waitWM(ctx context.Context, name string, wm *sandboxproc.Process, timeout time.Duration) error {
	x, err := xgb.NewConnDisplay(name)
	if err != nil {
		return err
	}
	defer x.Close()
	root := xproto.Setup(x).DefaultScreen(x).Root
	events := make(chan xgb.Event, 16)
	go func() { // owner: waitWM; ends when x is closed (deferred)
		defer close(events)
		for {
			ev, err := x.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if ev != nil {
				events <- ev
			}
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		win, err := xproto.NewWindowId(x)
		if err != nil {
			return err
		}
		err = xproto.CreateWindowChecked(x, 0, win, root, 0, 0, 1, 1, 0, xproto.WindowClassInputOutput,
			0, xproto.CwEventMask, []uint32{xproto.EventMaskStructureNotify}).Check()
		if err != nil {
			return fmt.Errorf("probe window: %w", err)
		}
		xproto.MapWindow(x, win)
		retry := time.NewTimer(time.Second)
		reparented := false
	wait:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return errors.New("the X connection closed")
				}
				if r, ok := ev.(xproto.ReparentNotifyEvent); ok && r.Window == win && r.Parent != root {
					reparented = true
					break wait
				}
			case <-retry.C:
				break wait
			case <-wm.Done():
				retry.Stop()
				return errors.New("the window manager exited (see /tmp/porthole-desktop/openbox.log)")
			case <-deadline.C:
				retry.Stop()
				xproto.DestroyWindow(x, win)
				return fmt.Errorf("no window got a frame within %s", timeout)
			case <-ctx.Done():
				retry.Stop()
				return context.Cause(ctx)
			}
		}
		retry.Stop()
		xproto.DestroyWindowChecked(x, win).Check()
		if reparented {
			return nil
		}
	}
}
