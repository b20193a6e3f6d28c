//go:build linux && cgo && !js

package desktop

import (
	"fmt"
	"sync"

	"github.com/go-vgo/robotgo"
)

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
	})
	if err := robotgo.SetXDisplayName(display); err != nil {
		return nil, fmt.Errorf("desktop input: display %s: %w", display, err)
	}
	return &robotInjector{keys: map[string]bool{}}, nil
}

var robotButtons = [...]struct {
	bit  uint8
	name string
}{{ButtonLeft, "left"}, {ButtonMiddle, "center"}, {ButtonRight, "right"}}

func (r *robotInjector) pointer(x, y int, buttons uint8) error {
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
	robotgo.Move(x, y)
	// robotgo: y > 0 scrolls up (button 4), x > 0 scrolls left (button 6); the wire's
	// positive steps are down and right.
	robotgo.Scroll(-dx, -dy, 0)
	return nil
}

func (r *robotInjector) key(code string, down bool) error {
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
	robotgo.Type(s)
	return nil
}

func (r *robotInjector) releaseAll() {
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
