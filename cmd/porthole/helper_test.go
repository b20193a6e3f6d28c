package main

import (
	"slices"
	"testing"

	"github.com/porthole/porthole/bridges"
)

// TestHelperHandlersFromSurfaces: the helper serves exec and every listed surface's streams,
// from the one list the gateway uses too.
func TestHelperHandlersFromSurfaces(t *testing.T) {
	h, err := helperHandlers()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{bridges.StreamExec}
	for _, d := range surfaces {
		if d.Gateway == nil && len(d.Streams) == 0 {
			t.Errorf("surface %s has neither a gateway half nor helper streams", d.Name)
		}
		for kind := range d.Streams {
			want = append(want, kind)
		}
	}
	var got []string
	for kind, fn := range h {
		if fn == nil {
			t.Errorf("stream kind %q has a nil handler", kind)
		}
		got = append(got, kind)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Contains(got, bridges.StreamTerminal) {
		t.Errorf("helper stream kinds = %v, want %v (terminal included)", got, want)
	}
}
