// Package tjpeg encodes BGRX pixels (the X server's 24-bit ZPixmap layout on little-endian machines)
// to JPEG. With cgo it calls libjpeg-turbo's TurboJPEG API (-lturbojpeg, no swizzle, one handle and one
// output buffer reused for every call); built with `!cgo` or the `noturbojpeg` tag it falls back to the
// standard library's image/jpeg (5–8× slower, always 4:2:0).
//
// An Encoder is not safe for concurrent use.
package tjpeg

import (
	"errors"
	"fmt"
)

// Subsampling of the chroma planes.
type Subsampling int

const (
	// S420 halves chroma both ways: the smallest output, for regions that keep changing.
	S420 Subsampling = iota
	// S444 keeps full chroma: for the settle refresh, so coloured text ends sharp.
	S444
)

func (s Subsampling) String() string {
	if s == S444 {
		return "4:4:4"
	}
	return "4:2:0"
}

// MaxDim is the largest width or height a JPEG can have.
const MaxDim = 65535

// ErrBadImage is returned when the geometry does not describe the given buffer.
var ErrBadImage = errors.New("tjpeg: bad image geometry")

// check validates the geometry of a BGRX image of w×h pixels with stride bytes per row in pix.
func check(pix []byte, w, h, stride int) error {
	if w <= 0 || h <= 0 || w > MaxDim || h > MaxDim {
		return fmt.Errorf("%w: %dx%d (1..%d each)", ErrBadImage, w, h, MaxDim)
	}
	if stride < w*4 {
		return fmt.Errorf("%w: stride %d < 4×width %d", ErrBadImage, stride, w)
	}
	if need := (h-1)*stride + w*4; len(pix) < need {
		return fmt.Errorf("%w: %d bytes for %dx%d stride %d, need %d", ErrBadImage, len(pix), w, h, stride, need)
	}
	return nil
}

func clampQuality(q int) int {
	return min(max(q, 1), 100)
}
