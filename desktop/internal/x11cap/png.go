package x11cap

import (
	"bytes"
	"image"
	"image/png"
)

// pngEncoder encodes small BGRX rects losslessly, reusing its buffers.
type pngEncoder struct {
	img  image.NRGBA
	out  bytes.Buffer
	enc  png.Encoder
	pool pngPool
}

type pngPool struct{ b *png.EncoderBuffer }

func (p *pngPool) Get() *png.EncoderBuffer  { return p.b }
func (p *pngPool) Put(b *png.EncoderBuffer) { p.b = b }

func (e *pngEncoder) encode(src []byte, w, h, stride int) ([]byte, error) {
	if cap(e.img.Pix) < w*h*4 {
		e.img.Pix = make([]byte, w*h*4)
	}
	e.img.Pix, e.img.Stride, e.img.Rect = e.img.Pix[:w*h*4], w*4, image.Rect(0, 0, w, h)
	for y := range h {
		s := src[y*stride : y*stride+w*4]
		d := e.img.Pix[y*w*4 : (y+1)*w*4]
		for i := 0; i < len(s); i += 4 {
			d[i], d[i+1], d[i+2], d[i+3] = s[i+2], s[i+1], s[i], 0xff
		}
	}
	e.enc.CompressionLevel = png.BestCompression
	e.enc.BufferPool = &e.pool
	e.out.Reset()
	if err := e.enc.Encode(&e.out, &e.img); err != nil {
		return nil, err
	}
	return bytes.Clone(e.out.Bytes()), nil
}
