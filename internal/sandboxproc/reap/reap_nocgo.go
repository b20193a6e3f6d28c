//go:build linux && !cgo

package reap

// CReaper reports whether this binary's reaper is the C one (reap_cgo.c).
const CReaper = false
