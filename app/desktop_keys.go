package app

import (
	"unicode/utf8"

	"github.com/porthole/porthole/desktop"
)

// The desktop viewer shares the terminal's phone keys bar (termKeys, specialKeysBar): the
// same buttons and sticky Ctrl/Alt. On a desktop a button is a physical key (by its DOM
// KeyboardEvent.code) or text.

// deskKeyCodes maps a keys-bar name to the key it presses on the desktop; names missing
// here type their label as text.
var deskKeyCodes = map[string]string{
	"esc":   "Escape",
	"tab":   "Tab",
	"left":  "ArrowLeft",
	"up":    "ArrowUp",
	"down":  "ArrowDown",
	"right": "ArrowRight",
	"slash": "Slash",
}

// deskModCodes are the keys the sticky modifiers hold.
func deskModCodes(m termMods) []string {
	var c []string
	if m.Ctrl {
		c = append(c, "ControlLeft")
	}
	if m.Alt {
		c = append(c, "AltLeft")
	}
	return c
}

// deskChord presses code with the modifiers m held: modifiers down, the key down and up,
// modifiers up (in reverse).
func deskChord(code string, m termMods) []desktop.Message {
	mods := deskModCodes(m)
	out := make([]desktop.Message, 0, 2+2*len(mods))
	for _, c := range mods {
		out = append(out, desktop.Key{Down: true, Code: c})
	}
	out = append(out, desktop.Key{Down: true, Code: code}, desktop.Key{Code: code})
	for i := len(mods) - 1; i >= 0; i-- {
		out = append(out, desktop.Key{Code: mods[i]})
	}
	return out
}

// deskBarKey returns the frames for a tap on keys-bar button name with m armed, and whether
// name sends anything (Ctrl and Alt only arm).
func deskBarKey(name string, m termMods) ([]desktop.Message, bool) {
	if code, ok := deskKeyCodes[name]; ok {
		if name == "slash" && !m.any() {
			return []desktop.Message{desktop.Text{Text: "/"}}, true // layout independent
		}
		return deskChord(code, m), true
	}
	for _, k := range termKeys {
		if k.Name == name && k.Seq != "" {
			if m.any() {
				if code := deskCharCode(k.Label); code != "" {
					return deskChord(code, m), true
				}
			}
			return []desktop.Message{desktop.Text{Text: k.Label}}, true
		}
	}
	return nil, false
}

// deskCharCode is the US-layout physical key of a letter, digit or some punctuation ("" if none).
func deskCharCode(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n != len(s) || n == 0 {
		return ""
	}
	switch {
	case r >= 'a' && r <= 'z':
		return "Key" + string(r-'a'+'A')
	case r >= 'A' && r <= 'Z':
		return "Key" + string(r)
	case r >= '0' && r <= '9':
		return "Digit" + string(r)
	}
	switch r {
	case ' ':
		return "Space"
	case '/':
		return "Slash"
	case '|', '\\':
		return "Backslash"
	case '~', '`':
		return "Backquote"
	case '-':
		return "Minus"
	case '.':
		return "Period"
	case ',':
		return "Comma"
	case '\n':
		return "Enter"
	}
	return ""
}

// deskTextFrames turns typed text (IME, soft keyboard, paste-as-typing) into frames: with a
// sticky modifier armed, the first character is a chord (Ctrl+C) when it has a key; text is
// cut into Text frames within the wire's limit, never splitting a character.
func deskTextFrames(text string, m termMods) []desktop.Message {
	var out []desktop.Message
	if m.any() && text != "" {
		r, n := utf8.DecodeRuneInString(text)
		if code := deskCharCode(string(r)); code != "" {
			out = append(out, deskChord(code, m)...)
			text = text[n:]
		}
	}
	for text != "" {
		n := len(text)
		if n > desktop.MaxText {
			n = desktop.MaxText
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
		}
		out = append(out, desktop.Text{Text: text[:n]})
		text = text[n:]
	}
	return out
}
