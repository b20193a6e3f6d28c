//go:build cgo && !noturbojpeg

package tjpeg

/*
#cgo LDFLAGS: -lturbojpeg
#include <stdlib.h>
#include <turbojpeg.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Turbo reports whether this build encodes with libjpeg-turbo.
const Turbo = true

// Encoder holds one TurboJPEG compressor and its output buffer.
type Encoder struct {
	h   C.tjhandle
	buf *C.uchar
	cap C.ulong
}

// New returns an encoder; Close frees it.
func New() (*Encoder, error) {
	h := C.tjInitCompress()
	if h == nil {
		return nil, fmt.Errorf("tjpeg: tjInitCompress: %s", C.GoString(C.tjGetErrorStr2(nil)))
	}
	return &Encoder{h: h}, nil
}

// EncodeBGRX compresses the w×h BGRX image at pix (stride bytes per row) and returns a new slice.
func (e *Encoder) EncodeBGRX(pix []byte, w, h, stride, quality int, sub Subsampling) ([]byte, error) {
	if e == nil || e.h == nil {
		return nil, errors.New("tjpeg: encoder closed")
	}
	if err := check(pix, w, h, stride); err != nil {
		return nil, err
	}
	samp := C.int(C.TJSAMP_420)
	if sub == S444 {
		samp = C.TJSAMP_444
	}
	need := C.tjBufSize(C.int(w), C.int(h), samp)
	if need == C.ulong(^C.ulong(0)) || need == 0 {
		return nil, fmt.Errorf("%w: tjBufSize(%d, %d)", ErrBadImage, w, h)
	}
	if need > e.cap {
		if e.buf != nil {
			C.tjFree(e.buf)
		}
		e.buf = C.tjAlloc(C.int(need))
		if e.buf == nil {
			e.cap = 0
			return nil, fmt.Errorf("tjpeg: tjAlloc(%d) failed", need)
		}
		e.cap = need
	}
	q := clampQuality(quality)
	flags := C.int(C.TJFLAG_NOREALLOC)
	if q < 90 {
		flags |= C.TJFLAG_FASTDCT
	}
	out := e.buf
	size := e.cap
	rc := C.tjCompress2(e.h, (*C.uchar)(unsafe.Pointer(&pix[0])), C.int(w), C.int(stride), C.int(h), C.TJPF_BGRX,
		&out, &size, samp, C.int(q), flags)
	if rc != 0 {
		return nil, fmt.Errorf("tjpeg: tjCompress2 %dx%d: %s", w, h, C.GoString(C.tjGetErrorStr2(e.h)))
	}
	if out != e.buf || size > e.cap {
		return nil, errors.New("tjpeg: tjCompress2 reallocated a NOREALLOC buffer")
	}
	return C.GoBytes(unsafe.Pointer(out), C.int(size)), nil
}

// Close frees the compressor and its buffer; the encoder is unusable afterwards.
func (e *Encoder) Close() {
	if e == nil {
		return
	}
	if e.buf != nil {
		C.tjFree(e.buf)
		e.buf, e.cap = nil, 0
	}
	if e.h != nil {
		C.tjDestroy(e.h)
		e.h = nil
	}
}
