//go:build !js

package desktop

// The desktop on the dashboard (surface.StatusReporter): one session while the agent's
// desktop hub runs, a small thumbnail of the screen the gateway's model holds, and when the
// newest frame came. Status reads only what the gateway half holds: it never asks the helper
// for anything and never starts a capture (an agent nobody watches has no thumbnail).

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"slices"
	"sync"
	"time"

	"golang.org/x/image/draw"

	"github.com/porthole/porthole/desktop/internal/palette"
	"github.com/porthole/porthole/surface"
)

const (
	thumbMaxW    = 320 // a thumbnail fits in thumbMaxW × thumbMaxH, keeping the screen's aspect
	thumbMaxH    = 320
	thumbQuality = 60
	// thumbMaxScreenW and thumbMaxScreenH bound the screen a thumbnail is composed on (the helper is
	// untrusted and may claim any size the wire allows, up to 7680×4320): the largest display
	// the helper makes (display_linux.go: 2560×1600), a 16 MiB canvas at most. A larger screen
	// gets no thumbnail.
	thumbMaxScreenW = 2560
	thumbMaxScreenH = 1600
)

// statusState is the dashboard's part of Service, guarded by mu.
type statusState struct {
	mu     sync.Mutex
	agents map[string]*agentStatus
}

// agentStatus is what the dashboard shows of one agent besides what the hub holds.
type agentStatus struct {
	active time.Time // the newest committed frame
	key    thumbKey  // the model the thumbnail was made from
	thumb  []byte    // nil: none (no screen, or it could not be composed)
}

// thumbKey names one state of a hub's model: entries only join it with a new seq, and a new
// Screen changes its size or leaves it empty.
type thumbKey struct {
	h      *hub
	seq    uint64
	frames uint64
	w, ht  uint16
}

// changed tells the dashboard the agent's Status may have changed (Config.OnChange:
// surface.Env.Changed, which coalesces and never blocks).
func (s *Service) changed(agentID string) {
	if f := s.cfg.OnChange; f != nil {
		f(agentID)
	}
}

// statusFrame is called by the hub (without its lock held) after it committed a frame.
func (s *Service) statusFrame(agentID string) {
	now := time.Now()
	s.status.mu.Lock()
	if s.status.agents == nil {
		s.status.agents = map[string]*agentStatus{}
	}
	st := s.status.agents[agentID]
	if st == nil {
		st = &agentStatus{}
		s.status.agents[agentID] = st
	}
	st.active = now
	s.status.mu.Unlock()
	s.changed(agentID)
}

// drawOp is one entry of the model to draw: its image data (shared, never written), its
// encoding, where the image lies and the pixels it draws.
type drawOp struct {
	data               []byte
	enc, flags         uint8
	ix0, iy0, ix1, iy1 int
	x0, y0, x1, y1     int
}

// Status is the agent's desktop for the dashboard: Sessions 1 while its hub runs, a JPEG
// thumbnail of the screen the gateway's model holds, and the time of the newest frame. It
// never blocks on the helper; a thumbnail is composed once per model state, repeated calls
// reuse it.
func (s *Service) Status(agentID string) surface.Status {
	h, _ := s.hubs.Get(agentID)
	var st surface.Status
	var key thumbKey
	var ops []drawOp
	have := false
	if h != nil {
		h.mu.Lock()
		if !h.ended {
			st.Sessions = 1
			md := &h.model
			if md.tiles != nil {
				have = true
				key = thumbKey{h: h, seq: md.nextSeq, frames: md.frames, w: md.screen.W, ht: md.screen.H}
				ops = modelOps(md)
			}
		}
		h.mu.Unlock()
	}
	s.status.mu.Lock()
	as := s.status.agents[agentID]
	if as != nil {
		st.Active = as.active
		if !have {
			as.key, as.thumb = thumbKey{}, nil
		} else if as.key == key {
			st.Image, have = as.thumb, false
		}
	}
	s.status.mu.Unlock()
	if have {
		thumb, err := composeThumb(int(key.w), int(key.ht), ops)
		if err != nil {
			s.log.Debug("desktop: dashboard thumbnail", "agent", agentID, "err", err)
		}
		s.status.mu.Lock()
		if s.status.agents == nil {
			s.status.agents = map[string]*agentStatus{}
		}
		as = s.status.agents[agentID]
		if as == nil {
			as = &agentStatus{}
			s.status.agents[agentID] = as
		}
		as.key, as.thumb = key, thumb
		s.status.mu.Unlock()
		st.Image = thumb
	}
	if st.Image != nil {
		st.ImageType = "image/jpeg"
	}
	return st
}

var _ surface.StatusReporter = (*Service)(nil)

// modelOps lists the model's entries in arrival order, each once (h.mu held).
func modelOps(md *model) []drawOp {
	md.mark++
	var es []*entry
	for _, list := range md.tiles {
		for _, e := range list {
			if e.mark != md.mark {
				e.mark = md.mark
				es = append(es, e)
			}
		}
	}
	slices.SortFunc(es, bySeq)
	ops := make([]drawOp, len(es))
	for i, e := range es {
		ops[i] = drawOp{data: e.data.b, enc: e.enc, flags: e.flags,
			ix0: e.ix0, iy0: e.iy0, ix1: e.ix1, iy1: e.iy1, x0: e.x0, y0: e.y0, x1: e.x1, y1: e.y1}
	}
	return ops
}

var errThumb = errors.New("bad rect for the thumbnail")

// composeThumb draws ops (untrusted: the helper's images) on a w×h canvas, scales it to fit
// in thumbMaxW × thumbMaxH and encodes it as a JPEG of quality thumbQuality. A rect that
// cannot be drawn is skipped (the first error is returned with the thumbnail).
func composeThumb(w, h int, ops []drawOp) ([]byte, error) {
	if w <= 0 || h <= 0 || w > thumbMaxScreenW || h > thumbMaxScreenH {
		return nil, fmt.Errorf("screen of %d×%d pixels: too large for a thumbnail", w, h)
	}
	canvas := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(canvas.Pix); i += 4 {
		canvas.Pix[i+3] = 0xff
	}
	var first error
	for _, o := range ops {
		if err := drawOpOn(canvas, o); err != nil && first == nil {
			first = err
		}
	}
	tw, th := thumbSize(w, h)
	dst := image.NewRGBA(image.Rect(0, 0, tw, th))
	boxScale(dst, canvas)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: thumbQuality}); err != nil {
		return nil, fmt.Errorf("encode the thumbnail: %w", err)
	}
	return out.Bytes(), first
}

// drawOpOn decodes one entry's image and draws its pixels [x0,x1)×[y0,y1) on canvas.
func drawOpOn(canvas *image.RGBA, o drawOp) error {
	b := canvas.Bounds()
	pw, ph := o.ix1-o.ix0, o.iy1-o.iy0
	if o.x0 < 0 || o.y0 < 0 || o.x1 > b.Max.X || o.y1 > b.Max.Y || o.x0 >= o.x1 || o.y0 >= o.y1 ||
		pw <= 0 || ph <= 0 || pw > b.Dx() || ph > b.Dy() || // a rect (or a moved one) is never larger than the screen
		o.x0 < o.ix0 || o.y0 < o.iy0 || o.x1 > o.ix1 || o.y1 > o.iy1 {
		return fmt.Errorf("%w: draws %d,%d–%d,%d of an image at %d,%d–%d,%d on a %dx%d screen",
			errThumb, o.x0, o.y0, o.x1, o.y1, o.ix0, o.iy0, o.ix1, o.iy1, b.Dx(), b.Dy())
	}
	iw, ih := pw, ph
	if o.flags&RectScaled != 0 {
		iw, ih = (pw+1)>>1, (ph+1)>>1
	}
	var src image.Image
	switch o.enc {
	case EncJPEG, EncPNG:
		decodeConfig, decode := jpeg.DecodeConfig, jpeg.Decode
		if o.enc == EncPNG {
			decodeConfig, decode = png.DecodeConfig, png.Decode
		}
		cfg, err := decodeConfig(bytes.NewReader(o.data))
		if err != nil {
			return fmt.Errorf("%w: decode its header: %v", errThumb, err)
		}
		if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > iw || cfg.Height > ih {
			return fmt.Errorf("%w: an image of %dx%d for %dx%d", errThumb, cfg.Width, cfg.Height, iw, ih)
		}
		if src, err = decode(bytes.NewReader(o.data)); err != nil {
			return fmt.Errorf("%w: decode it: %v", errThumb, err)
		}
	case EncPalette:
		pix, err := palette.Decode(o.data, iw, ih)
		if err != nil {
			return fmt.Errorf("%w: %v", errThumb, err)
		}
		src = &image.RGBA{Pix: pix, Stride: 4 * iw, Rect: image.Rect(0, 0, iw, ih)}
	default:
		return fmt.Errorf("%w: encoding %d", errThumb, o.enc)
	}
	clip := canvas.SubImage(image.Rect(o.x0, o.y0, o.x1, o.y1)).(*image.RGBA)
	draw.NearestNeighbor.Scale(clip, image.Rect(o.ix0, o.iy0, o.ix1, o.iy1), src, src.Bounds(), draw.Src, nil)
	return nil
}

// boxScale scales src down onto dst (never larger than src): each of dst's pixels is the
// mean of the box of src's pixels it covers.
func boxScale(dst, src *image.RGBA) {
	sb, db := src.Bounds(), dst.Bounds()
	sw, sh, dw, dh := sb.Dx(), sb.Dy(), db.Dx(), db.Dy()
	for dy := range dh {
		y0, y1 := sb.Min.Y+dy*sh/dh, sb.Min.Y+max((dy+1)*sh/dh, dy*sh/dh+1)
		for dx := range dw {
			x0, x1 := sb.Min.X+dx*sw/dw, sb.Min.X+max((dx+1)*sw/dw, dx*sw/dw+1)
			var r, g, b, n uint32
			for y := y0; y < y1; y++ {
				i := src.PixOffset(x0, y)
				for x := x0; x < x1; x++ {
					r, g, b, n = r+uint32(src.Pix[i]), g+uint32(src.Pix[i+1]), b+uint32(src.Pix[i+2]), n+1
					i += 4
				}
			}
			i := dst.PixOffset(db.Min.X+dx, db.Min.Y+dy)
			dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2], dst.Pix[i+3] = uint8(r/n), uint8(g/n), uint8(b/n), 0xff
		}
	}
}

// thumbSize fits w × h in thumbMaxW × thumbMaxH (never enlarging), at least 1×1.
func thumbSize(w, h int) (int, int) {
	if w > thumbMaxW {
		h, w = max(1, h*thumbMaxW/w), thumbMaxW
	}
	if h > thumbMaxH {
		w, h = max(1, w*thumbMaxH/h), thumbMaxH
	}
	return w, h
}
