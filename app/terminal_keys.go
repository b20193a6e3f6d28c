package app

import (
	"strings"
	"unicode/utf8"

	"github.com/maxence-charriere/go-app/v10/pkg/app"
)

// termKey is one button of the phone keys bar.
type termKey struct {
	Name  string // stable name, also the button's data-key
	Label string // what the button shows
	Seq   string // bytes sent without termMods ("" for the sticky termMods)
}

// Sticky modifier names in the keys bar.
const (
	termKeyCtrl = "ctrl"
	termKeyAlt  = "alt"
)

// termKeys is the phone keys bar, left to right.
var termKeys = []termKey{
	{Name: "esc", Label: "Esc", Seq: "\x1b"},
	{Name: "tab", Label: "Tab", Seq: "\t"},
	{Name: termKeyCtrl, Label: "Ctrl"},
	{Name: termKeyAlt, Label: "Alt"},
	{Name: "left", Label: "←", Seq: "\x1b[D"},
	{Name: "up", Label: "↑", Seq: "\x1b[A"},
	{Name: "down", Label: "↓", Seq: "\x1b[B"},
	{Name: "right", Label: "→", Seq: "\x1b[C"},
	{Name: "pipe", Label: "|", Seq: "|"},
	{Name: "tilde", Label: "~", Seq: "~"},
	{Name: "slash", Label: "/", Seq: "/"},
}

// termMods are the sticky Ctrl and Alt of the keys bar: armed by a tap, they
// apply to the next key (from the bar or the keyboard) and are then released.
type termMods struct {
	Ctrl bool
	Alt  bool
}

func (m termMods) any() bool { return m.Ctrl || m.Alt }

// termApplyMods returns data as the terminal must receive it when the first
// key in it is pressed with m held: Ctrl maps a character to its control code,
// Alt prefixes ESC, and cursor keys get xterm's modifier parameter
// (ESC [ 1 ; m X). The rest of data (a paste, an IME burst) is unchanged.
func termApplyMods(data string, m termMods) string {
	if data == "" || !m.any() {
		return data
	}
	// Cursor keys: CSI A..D or SS3 A..D (application mode) → CSI 1;mod X.
	if len(data) >= 3 && data[0] == 0x1b && (data[1] == '[' || data[1] == 'O') && strings.IndexByte("ABCDHF", data[2]) >= 0 {
		mod := 1
		if m.Alt {
			mod += 2
		}
		if m.Ctrl {
			mod += 4
		}
		return "\x1b[1;" + string(rune('0'+mod)) + string(data[2]) + data[3:]
	}
	r, size := utf8.DecodeRuneInString(data)
	first, rest := data[:size], data[size:]
	if m.Ctrl {
		if c, ok := termCtrlCode(r); ok {
			first = string(rune(c))
		}
	}
	if m.Alt {
		first = "\x1b" + first
	}
	return first + rest
}

// termCtrlCode maps r to the byte a terminal sends for Ctrl+r.
func termCtrlCode(r rune) (byte, bool) {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r-'a') + 1, true
	case r >= '@' && r <= '_': // @ A-Z [ \ ] ^ _
		return byte(r - '@'), true
	case r == ' ' || r == '2':
		return 0, true
	case r == '?' || r == '8':
		return 0x7f, true
	case r >= '3' && r <= '7': // xterm: Ctrl+3..7 = ESC, FS, GS, RS, US
		return byte(r-'3') + 0x1b, true
	case r == '/':
		return 0x1f, true
	}
	return 0, false
}

// termKeySeq returns the bytes for the keys-bar key name with m held, and whether
// name is a key that sends something (the termMods themselves do not).
func termKeySeq(name string, m termMods) (string, bool) {
	for _, k := range termKeys {
		if k.Name == name && k.Seq != "" {
			if name == "tab" && m.Ctrl {
				m.Ctrl = false // Ctrl+Tab has no code of its own in a terminal
			}
			return termApplyMods(k.Seq, m), true
		}
	}
	return "", false
}

// specialKeysBar is the phone keys bar, shared by the terminal and the desktop viewer:
// termKeys left to right, Ctrl and Alt shown armed per mods; onKey gets the tapped key's name.
// Its buttons must not take the focus from the terminal or the desktop's keyboard input
// (terminal.js noBlur), so the soft keyboard stays up.
func specialKeysBar(mods termMods, onKey func(name string)) app.UI {
	return app.Div().Class("terminal-keys").Role("toolbar").Aria("label", "Special keys").Body(
		app.Range(termKeys).Slice(func(i int) app.UI {
			k := termKeys[i]
			name := k.Name
			cls := "terminal-key"
			pressed := (name == termKeyCtrl && mods.Ctrl) || (name == termKeyAlt && mods.Alt)
			if pressed {
				cls += " armed"
			}
			b := app.Button().Class(cls).DataSet("key", name).Text(k.Label).
				OnClick(func(ctx app.Context, e app.Event) { onKey(name) })
			if k.Seq == "" {
				b = b.Aria("pressed", pressed)
			}
			return b
		}),
	)
}
