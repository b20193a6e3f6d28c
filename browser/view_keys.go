//go:build !js

package browser

import "unicode/utf8"

// keyDef is how a DOM KeyboardEvent.code becomes a CDP key event (US layout).
type keyDef struct {
	key, shifted string // KeyboardEvent.key without and with Shift
	vk           int    // windowsVirtualKeyCode
	text         string // text a key down types ("" = none besides a printable key)
}

var keyDefs = func() map[string]keyDef {
	m := map[string]keyDef{
		"Enter": {key: "Enter", vk: 13, text: "\r"}, "NumpadEnter": {key: "Enter", vk: 13, text: "\r"},
		"Tab": {key: "Tab", vk: 9}, "Backspace": {key: "Backspace", vk: 8}, "Escape": {key: "Escape", vk: 27},
		"Space": {key: " ", vk: 32}, "Delete": {key: "Delete", vk: 46}, "Insert": {key: "Insert", vk: 45},
		"Home": {key: "Home", vk: 36}, "End": {key: "End", vk: 35}, "PageUp": {key: "PageUp", vk: 33},
		"PageDown": {key: "PageDown", vk: 34}, "ArrowLeft": {key: "ArrowLeft", vk: 37},
		"ArrowUp": {key: "ArrowUp", vk: 38}, "ArrowRight": {key: "ArrowRight", vk: 39},
		"ArrowDown": {key: "ArrowDown", vk: 40}, "ShiftLeft": {key: "Shift", vk: 16},
		"ShiftRight": {key: "Shift", vk: 16}, "ControlLeft": {key: "Control", vk: 17},
		"ControlRight": {key: "Control", vk: 17}, "AltLeft": {key: "Alt", vk: 18}, "AltRight": {key: "Alt", vk: 18},
		"MetaLeft": {key: "Meta", vk: 91}, "MetaRight": {key: "Meta", vk: 92}, "CapsLock": {key: "CapsLock", vk: 20},
		"ContextMenu": {key: "ContextMenu", vk: 93},
		"Minus":       {"-", "_", 189, ""}, "Equal": {"=", "+", 187, ""}, "BracketLeft": {"[", "{", 219, ""},
		"BracketRight": {"]", "}", 221, ""}, "Backslash": {`\`, "|", 220, ""}, "Semicolon": {";", ":", 186, ""},
		"Quote": {"'", `"`, 222, ""}, "Backquote": {"`", "~", 192, ""}, "Comma": {",", "<", 188, ""},
		"Period": {".", ">", 190, ""}, "Slash": {"/", "?", 191, ""},
	}
	for c := 'A'; c <= 'Z'; c++ {
		m["Key"+string(c)] = keyDef{key: string(c + 'a' - 'A'), shifted: string(c), vk: int(c)}
	}
	shiftedDigits := ")!@#$%^&*("
	for d := '0'; d <= '9'; d++ {
		m["Digit"+string(d)] = keyDef{key: string(d), shifted: string(shiftedDigits[d-'0']), vk: int(d)}
		m["Numpad"+string(d)] = keyDef{key: string(d), vk: 96 + int(d-'0')}
	}
	for i := 1; i <= 12; i++ {
		name := "F" + itoa(i)
		m[name] = keyDef{key: name, vk: 111 + i}
	}
	return m
}()

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// keyParams is the CDP Input.dispatchKeyEvent params of a viewer's Key.
func keyParams(k Key) map[string]any {
	def, known := keyDefs[k.Code]
	key := k.Key
	if key == "" {
		key = def.key
		if k.Modifiers&ModShift != 0 && def.shifted != "" {
			key = def.shifted
		}
	}
	if !known && utf8.RuneCountInString(key) == 1 {
		// An unknown code with a printable key (another layout): its upper case letter's vk.
		r, _ := utf8.DecodeRuneInString(key)
		if r >= 'a' && r <= 'z' {
			def.vk = int(r - 'a' + 'A')
		} else if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			def.vk = int(r)
		}
	}
	p := map[string]any{"code": k.Code, "key": key, "modifiers": int(k.Modifiers),
		"windowsVirtualKeyCode": def.vk, "nativeVirtualKeyCode": def.vk}
	if !k.Down {
		p["type"] = "keyUp"
		return p
	}
	text := def.text
	if text == "" && utf8.RuneCountInString(key) == 1 && k.Modifiers&(ModCtrl|ModAlt|ModMeta) == 0 {
		text = key
	}
	if text == "" {
		p["type"] = "rawKeyDown"
	} else {
		p["type"] = "keyDown"
		p["text"] = text
		p["unmodifiedText"] = text
	}
	return p
}
