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
