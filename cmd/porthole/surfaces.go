package main

import (
	"github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/surface"
	"github.com/porthole/porthole/terminal"
)

// surfaces lists every surface, once: the helper serves their Streams, the gateway their
// gateway halves (docs/surfaces.md). A new surface is one line here.
var surfaces = []surface.Description{
	terminal.Surface,
	desktop.Surface,
	browser.Surface,
}
