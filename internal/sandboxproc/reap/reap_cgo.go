//go:build linux && cgo

package reap

// The reaper of a cgo build is reap_cgo.c: a C constructor that does reapMain's job before the
// Go runtime starts (about half the cost of a reaper whose Go runtime starts, see
// BenchmarkExecRoundTrip), so init never sees ReapArg there (except on a non-glibc libc).

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"

// CReaper reports whether this binary's reaper is the C one (reap_cgo.c).
const CReaper = true
