//go:build linux && cgo && !js

package desktop

/*
#cgo LDFLAGS: -lX11
#include <X11/Xlib.h>

// robotgo's one Xlib connection (base/xdisplay_c.h). Weak: resolved against robotgo's C code
// in the final link; NULL if robotgo ever stops exporting them.
extern Display *XGetMainDisplay(void) __attribute__((weak));
extern void XCloseMainDisplay(void) __attribute__((weak));

static volatile int porthole_x_failed;
static Display *porthole_x_hooked;

// Xlib's default handlers exit the process: on a protocol error, and when the connection is
// lost (the X server died). Ours record the loss and return; the exit handler (libX11 ≥ 1.7)
// keeps Xlib from calling exit after the I/O error handler returns.
static int porthole_x_io_error(Display *d) { porthole_x_failed = 1; return 0; }
static void porthole_x_io_exit(Display *d, void *data) { porthole_x_failed = 1; }
static int porthole_x_error(Display *d, XErrorEvent *e) { return 0; }

static void porthole_x_init(void) {
	XSetIOErrorHandler(porthole_x_io_error);
	XSetErrorHandler(porthole_x_error);
}

// porthole_x_display makes sure robotgo's connection is open and alive: after a lost
// connection it is closed and opened again. It returns 0 when no connection can be had (the
// X server is gone): robotgo must not be called then (it would use a NULL display).
static int porthole_x_display(void) {
	if (!XGetMainDisplay || !XCloseMainDisplay) return 0;
	if (porthole_x_failed) {
		XCloseMainDisplay();
		porthole_x_hooked = NULL;
		porthole_x_failed = 0;
	}
	Display *d = XGetMainDisplay();
	if (!d) return 0;
	if (d != porthole_x_hooked) {
		XSetIOErrorExitHandler(d, porthole_x_io_exit, NULL);
		porthole_x_hooked = d;
	}
	return 1;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"

	"github.com/go-vgo/robotgo"
)

// errNoDisplay: the X server cannot be reached (it died): input is dropped until it is back.
var errNoDisplay = errors.New("desktop input: the display is not reachable")

// robotInjector replays input with robotgo (XTest through libX11/libXtst) on the display
// named by DISPLAY (startDisplay sets it in the helper's environment).
type robotInjector struct {
	buttons uint8
	keys    map[string]bool // robotgo names held down
}

var robotOnce sync.Once

func newInjector(display string) (injector, error) {
	robotOnce.Do(func() {
		robotgo.MouseSleep = 0
		robotgo.KeySleep = 0
		C.porthole_x_init()
	})
	if err := robotgo.SetXDisplayName(display); err != nil {
		return nil, fmt.Errorf("desktop input: display %s: %w", display, err)
	}
	if C.porthole_x_display() == 0 {
		return nil, fmt.Errorf("%w: %s", errNoDisplay, display)
	}
	return &robotInjector{keys: map[string]bool{}}, nil
}

// alive checks robotgo's X connection before a call (reconnecting after the X server restarted).
func alive() error {
	if C.porthole_x_display() == 0 {
		return errNoDisplay
	}
	return nil
}

var robotButtons = [...]struct {
	bit  uint8
	name string
}{{ButtonLeft, "left"}, {ButtonMiddle, "center"}, {ButtonRight, "right"}}

func (r *robotInjector) pointer(x, y int, buttons uint8) error {
	if err := alive(); err != nil {
		return err
	}
	robotgo.Move(x, y)
	for _, b := range robotButtons {
		if (r.buttons^buttons)&b.bit == 0 {
			continue
		}
		dir := "up"
		if buttons&b.bit != 0 {
			dir = "down"
		}
		if err := robotgo.Toggle(b.name, dir); err != nil {
			return fmt.Errorf("desktop input: %s button %s: %w", b.name, dir, err)
		}
	}
	r.buttons = buttons
	return nil
}

func (r *robotInjector) wheel(x, y, dx, dy int) error {
	if err := alive(); err != nil {
		return err
	}
	robotgo.Move(x, y)
	// robotgo: y > 0 scrolls up (button 4), x > 0 scrolls left (button 6); the wire's
	// positive steps are down and right.
	robotgo.Scroll(-dx, -dy, 0)
	return nil
}

func (r *robotInjector) key(code string, down bool) error {
	if err := alive(); err != nil {
		return err
	}
	name := robotKey(code)
	if name == "" {
		return fmt.Errorf("desktop input: key %q is not supported", code)
	}
	dir := "up"
	if down {
		dir = "down"
	}
	if err := robotgo.KeyToggle(name, dir); err != nil {
		return fmt.Errorf("desktop input: key %s %s: %w", code, dir, err)
	}
	if down {
		r.keys[name] = true
	} else {
		delete(r.keys, name)
	}
	return nil
}

func (r *robotInjector) text(s string) error {
	if err := alive(); err != nil {
		return err
	}
	robotgo.Type(s)
	return nil
}

func (r *robotInjector) releaseAll() {
	if alive() != nil {
		clear(r.keys)
		r.buttons = 0
		return
	}
	for name := range r.keys {
		robotgo.KeyToggle(name, "up")
	}
	clear(r.keys)
	if r.buttons != 0 {
		for _, b := range robotButtons {
			if r.buttons&b.bit != 0 {
				robotgo.Toggle(b.name, "up")
			}
		}
		r.buttons = 0
	}
}
