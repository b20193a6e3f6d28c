//go:build linux && !js

package desktop

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/image/draw"
)

// screenshotBand is how many rows one GetImage request reads (a reply stays a few MB).
const screenshotBand = 128

// screenshot captures the whole screen of display through its own X connection and encodes
// it as format (EncPNG or EncJPEG) at scale percent (1–100; 0 = 100). It always returns a
// Screenshot of the asked format: on error (or an image over MaxScreenshot) its Data is
// empty, so the gateway's waiter gets its answer.
func screenshot(display string, format, scale uint8) (Screenshot, error) {
	if format != EncJPEG {
		format = EncPNG
	}
	shot := Screenshot{Format: format}
	img, err := captureRGBA(display)
	if err != nil {
		return shot, err
	}
	if scale > 0 && scale < 100 {
		b := img.Bounds()
		w, h := max(b.Dx()*int(scale)/100, 1), max(b.Dy()*int(scale)/100, 1)
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
		img = dst
	}
	var buf bytes.Buffer
	if format == EncJPEG {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	} else {
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img)
	}
	if err != nil {
		return shot, fmt.Errorf("encode screenshot: %w", err)
	}
	if buf.Len() > MaxScreenshot {
		return shot, fmt.Errorf("screenshot of %d bytes is over the %d-byte limit: ask for a smaller scale", buf.Len(), MaxScreenshot)
	}
	shot.W, shot.H = uint16(img.Bounds().Dx()), uint16(img.Bounds().Dy())
	shot.Data = buf.Bytes()
	return shot, nil
}

// captureRGBA reads the root window (24-bit TrueColor, 32 bpp, LSB first) into an RGBA image.
func captureRGBA(display string) (*image.RGBA, error) {
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("screenshot: connect to %s: %w", display, err)
	}
	defer conn.Close()
	scr := xproto.Setup(conn).DefaultScreen(conn)
	geo, err := xproto.GetGeometry(conn, xproto.Drawable(scr.Root)).Reply()
	if err != nil {
		return nil, fmt.Errorf("screenshot: root geometry: %w", err)
	}
	w, h := int(geo.Width), int(geo.Height)
	if w < 1 || h < 1 || w > MaxDisplayW || h > MaxDisplayH {
		return nil, fmt.Errorf("screenshot: unsupported screen size %dx%d", w, h)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y += screenshotBand {
		bh := min(screenshotBand, h-y)
		r, err := xproto.GetImage(conn, xproto.ImageFormatZPixmap, xproto.Drawable(scr.Root),
			0, int16(y), uint16(w), uint16(bh), 0xffffffff).Reply()
		if err != nil {
			return nil, fmt.Errorf("screenshot: get image: %w", err)
		}
		if len(r.Data) < w*bh*4 {
			return nil, fmt.Errorf("screenshot: %d bytes for %dx%d: not a 32-bpp screen", len(r.Data), w, bh)
		}
		dst := img.Pix[y*img.Stride:]
		for i := 0; i < w*bh; i++ { // BGRX → RGBA
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = r.Data[4*i+2], r.Data[4*i+1], r.Data[4*i], 0xff
		}
	}
	return img, nil
}
