//go:build linux && !js

package desktop

import (
	"errors"
	"strings"
)

// ErrInputUnavailable: this build of the helper cannot replay input (built without cgo).
var ErrInputUnavailable = errors.New("desktop input needs a cgo build of porthole (robotgo links libX11/libXtst)")

// injector replays viewers' input on the display. Coordinates are clamped to the display by
// the caller. Not safe for concurrent use: the helper serialises input (inputMu).
type injector interface {
	pointer(x, y int, buttons uint8) error
	wheel(x, y, dx, dy int) error
	key(code string, down bool) error
	text(s string) error
	// releaseAll lets go of every key and button this injector holds down (stream end).
	releaseAll()
}

// robotKey maps a DOM KeyboardEvent.code to robotgo's key name ("" = not supported).
func robotKey(code string) string {
	switch {
	case len(code) == 4 && strings.HasPrefix(code, "Key") && code[3] >= 'A' && code[3] <= 'Z':
		return strings.ToLower(code[3:])
	case len(code) == 6 && strings.HasPrefix(code, "Digit") && code[5] >= '0' && code[5] <= '9':
		return code[5:]
	case len(code) == 7 && strings.HasPrefix(code, "Numpad") && code[6] >= '0' && code[6] <= '9':
		return "num" + code[6:]
	case len(code) >= 2 && len(code) <= 3 && code[0] == 'F' && code[1] >= '1' && code[1] <= '9':
		if n := code[1:]; len(n) == 1 || (n[1] >= '0' && n[1] <= '9' && (n[0] == '1' || (n[0] == '2' && n[1] <= '4'))) {
			return "f" + n
		}
		return ""
	}
	return domKeys[code]
}

var domKeys = map[string]string{
	"Enter": "enter", "NumpadEnter": "enter", "Escape": "esc", "Backspace": "backspace", "Tab": "tab",
	"Space": "space", "ArrowUp": "up", "ArrowDown": "down", "ArrowLeft": "left", "ArrowRight": "right",
	"Home": "home", "End": "end", "PageUp": "pageup", "PageDown": "pagedown", "Insert": "insert",
	"Delete": "delete", "ShiftLeft": "shift", "ShiftRight": "shiftr", "ControlLeft": "ctrl",
	"ControlRight": "ctrlr", "AltLeft": "alt", "AltRight": "altr", "MetaLeft": "cmd", "MetaRight": "cmdr",
	"CapsLock": "capslock", "NumLock": "num_lock", "ScrollLock": "scroll_lock", "Pause": "pause_break",
	"PrintScreen": "printscreen", "ContextMenu": "menu",
	"Minus": "-", "Equal": "=", "BracketLeft": "[", "BracketRight": "]", "Backslash": "\\",
	"Semicolon": ";", "Quote": "'", "Backquote": "`", "Comma": ",", "Period": ".", "Slash": "/",
	"NumpadAdd": "+", "NumpadSubtract": "-", "NumpadMultiply": "*", "NumpadDivide": "/",
	"NumpadDecimal": ".", "NumpadEqual": "=",
}
