package app

import "testing"

func TestTermApplyMods(t *testing.T) {
	ctrl := termMods{Ctrl: true}
	alt := termMods{Alt: true}
	both := termMods{Ctrl: true, Alt: true}
	tests := []struct {
		data string
		m    termMods
		want string
	}{
		{"c", termMods{}, "c"},
		{"c", ctrl, "\x03"},
		{"C", ctrl, "\x03"},
		{"d", ctrl, "\x04"},
		{"[", ctrl, "\x1b"},
		{" ", ctrl, "\x00"},
		{"?", ctrl, "\x7f"},
		{"/", ctrl, "\x1f"},
		{"cat", ctrl, "\x03at"}, // only the first key gets the modifier
		{"b", alt, "\x1bb"},
		{"x", both, "\x1b\x18"},
		{"é", ctrl, "é"}, // no control code: sent as is
		{"é", alt, "\x1bé"},
		{"\x1b[A", ctrl, "\x1b[1;5A"},
		{"\x1bOD", alt, "\x1b[1;3D"},
		{"\x1b[C", both, "\x1b[1;7C"},
		{"", ctrl, ""},
	}
	for _, tt := range tests {
		if got := termApplyMods(tt.data, tt.m); got != tt.want {
			t.Errorf("termApplyMods(%q, %+v) = %q, want %q", tt.data, tt.m, got, tt.want)
		}
	}
}

func TestTermKeySeq(t *testing.T) {
	tests := []struct {
		name   string
		m      termMods
		want   string
		wantOK bool
	}{
		{"esc", termMods{}, "\x1b", true},
		{"tab", termMods{}, "\t", true},
		{"tab", termMods{Ctrl: true}, "\t", true},
		{"tab", termMods{Alt: true}, "\x1b\t", true},
		{"up", termMods{}, "\x1b[A", true},
		{"left", termMods{Ctrl: true}, "\x1b[1;5D", true},
		{"pipe", termMods{}, "|", true},
		{"tilde", termMods{}, "~", true},
		{"slash", termMods{Ctrl: true}, "\x1f", true},
		{termKeyCtrl, termMods{}, "", false},
		{termKeyAlt, termMods{}, "", false},
		{"nope", termMods{}, "", false},
	}
	for _, tt := range tests {
		got, ok := termKeySeq(tt.name, tt.m)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("termKeySeq(%q, %+v) = %q, %v, want %q, %v", tt.name, tt.m, got, ok, tt.want, tt.wantOK)
		}
	}
}
