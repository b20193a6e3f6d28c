//go:build !cgo || noturbojpeg

package tjpeg

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
)

// Turbo reports whether this build encodes with libjpeg-turbo.
const Turbo = false

// Encoder is the image/jpeg fallback: it swizzles BGRX into a reused RGBA image.
type Encoder struct {
	img    *image.RGBA
	out    bytes.Buffer
	closed bool
}

// New returns an encoder; Close frees it.
func New() (*Encoder, error) { return &Encoder{}, nil }

// EncodeBGRX compresses the w×h BGRX image at pix (stride bytes per row) and returns a new slice.
// The fallback always subsamples 4:2:0 (image/jpeg has no other mode for RGBA input).
func (e *Encoder) EncodeBGRX(pix []byte, w, h, stride, quality int, sub Subsampling) ([]byte, error) {
	if e == nil || e.closed {
		return nil, errors.New("tjpeg: encoder closed")
	}
	if err := check(pix, w, h, stride); err != nil {
		return nil, err
	}
	if e.img == nil || cap(e.img.Pix) < w*h*4 {
		e.img = &image.RGBA{Pix: make([]byte, w*h*4)}
	}
	e.img.Pix, e.img.Stride, e.img.Rect = e.img.Pix[:w*h*4], w*4, image.Rect(0, 0, w, h)
	for y := range h {
		src := pix[y*stride : y*stride+w*4]
		dst := e.img.Pix[y*w*4 : (y+1)*w*4]
		for i := 0; i < len(src); i += 4 {
			dst[i], dst[i+1], dst[i+2], dst[i+3] = src[i+2], src[i+1], src[i], 0xff
		}
	}
	e.out.Reset()
	if err := jpeg.Encode(&e.out, e.img, &jpeg.Options{Quality: clampQuality(quality)}); err != nil {
		return nil, err
	}
	return bytes.Clone(e.out.Bytes()), nil
}

// Close releases the buffers.
func (e *Encoder) Close() {
	if e != nil {
		e.closed, e.img = true, nil
	}
}
