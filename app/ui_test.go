package app

import "testing"

func TestAgentIDFromPath(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/agents/abc", "abc"},
		{"/agents/abc/edit", "abc"},
		{"/agents/a%2Fb", "a/b"},
		{"/agents/", ""},
		{"/agents", ""},
		{"/users/abc", ""},
		{"/agents/%zz", ""},
	}
	for _, tt := range tests {
		if got := agentIDFromPath(tt.path); got != tt.want {
			t.Errorf("agentIDFromPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	tests := []struct {
		next string
		want bool
	}{
		{"/agents/abc", true},
		{"/admin/users?x=1", true},
		{"/", true},
		{"", false},
		{"//evil.example/x", false},
		{"/\\evil.example", false},
		{"https://evil.example", false},
		{"javascript:alert(1)", false},
		{"/login?next=/x", false},
		{"/a\r\nb", false},
	}
	for _, tt := range tests {
		if got := safeNext(tt.next); got != tt.want {
			t.Errorf("safeNext(%q) = %v, want %v", tt.next, got, tt.want)
		}
	}
}
