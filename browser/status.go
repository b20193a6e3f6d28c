//go:build !js

package browser

// The browser on the dashboard (surface.StatusReporter): one session while the agent's
// browser is connected (a live view or an automation client holds it), a small thumbnail of
// the live view's newest frame, and when it last showed activity. Status reads only what the
// gateway half holds: it never asks the agent's browser for anything, and an agent nobody
// watches has no thumbnail (the dashboard does not start a screencast).

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"sync"
	"time"

	"golang.org/x/image/draw"

	"github.com/porthole/porthole/surface"
)

const (
	thumbMaxW    = 320 // a thumbnail fits in thumbMaxW × thumbMaxH, keeping the frame's aspect
	thumbMaxH    = 320
	thumbQuality = 60
	// thumbMaxPixels bounds the frames a thumbnail is decoded from: the JPEG comes from the
	// agent's sandbox, and its header may claim any size (the screencast is at most
	// 1280×1280, a screenshot of a tab its viewport).
	thumbMaxPixels = 4096 * 4096
)

// statusState is the dashboard's part of Service, guarded by stMu.
type statusState struct {
	stMu     sync.Mutex
	stAgents map[string]*agentStatus
}

// agentStatus is what the dashboard shows of one agent besides what the view holds.
type agentStatus struct {
	active time.Time // the newest frame or automation connection change
	src    *shot     // the frame thumb was made from (nil: none yet)
	thumb  []byte    // nil: src is not a decodable JPEG
}

func (s *Service) initStatus() {
	s.stAgents = map[string]*agentStatus{}
	// Automation connections opening and closing change Sessions (cdproute.go calls this
	// without locks held).
	s.cdpAutomationChanged = s.statusAutomation
}

// statusChanged tells the dashboard that the agent's Status may have changed
// (Config.OnChange: surface.Env.Changed, which coalesces and never blocks).
func (s *Service) statusChanged(agentID string) {
	if f := s.cfg.OnChange; f != nil {
		f(agentID)
	}
}

// statusActive records activity of the agent now.
func (s *Service) statusActive(agentID string) {
	now := time.Now()
	s.stMu.Lock()
	st := s.stAgents[agentID]
	if st == nil {
		st = &agentStatus{}
		s.stAgents[agentID] = st
	}
	st.active = now
	s.stMu.Unlock()
}

// statusFrame is called by the live view (without its lock held) after a new frame became
// the agent's newest: the thumbnail is made from it only when the dashboard asks (Status).
func (s *Service) statusFrame(agentID string) {
	s.statusActive(agentID)
	s.statusChanged(agentID)
}

// statusAutomation is the CDP side's cdpAutomationChanged: an automation connection of the
// agent opened or closed.
func (s *Service) statusAutomation(agentID string) {
	s.statusActive(agentID)
	s.statusChanged(agentID)
}

// Status is the agent's browser for the dashboard: Sessions 1 while the browser is connected
// (a live view or an automation client holds it), a JPEG thumbnail of the live view's newest
// frame while a live view runs, and the time of the newest frame or automation change. It
// never blocks on the agent; a new frame's thumbnail is made once (a few milliseconds),
// repeated calls reuse it.
func (s *Service) Status(agentID string) surface.Status {
	var last *shot
	viewing := false
	h, _ := s.hubs.Get(agentID)
	if h != nil {
		select {
		case <-h.ready:
			h.mu.Lock()
			viewing = !h.ended
			last = h.last
			h.mu.Unlock()
		default: // still connecting to the browser
		}
	}
	s.autoMu.Lock()
	automated := len(s.automation[agentID]) > 0
	s.autoMu.Unlock()

	var st surface.Status
	if viewing || automated {
		st.Sessions = 1
	}
	if !viewing {
		last = nil
	}
	s.stMu.Lock()
	as := s.stAgents[agentID]
	if as != nil {
		st.Active = as.active
		if last == nil {
			as.src, as.thumb = nil, nil // no live view: drop the old frame
		} else if as.src == last {
			st.Image = as.thumb
			last = nil
		}
	}
	s.stMu.Unlock()
	if last != nil {
		thumb, err := thumbnail(last.data)
		if err != nil {
			s.log.Debug("browser: dashboard thumbnail", "agent", agentID, "err", err)
		}
		s.stMu.Lock()
		as = s.stAgents[agentID]
		if as == nil {
			as = &agentStatus{}
			s.stAgents[agentID] = as
		}
		as.src, as.thumb = last, thumb
		s.stMu.Unlock()
		st.Image = thumb
	}
	if st.Image != nil {
		st.ImageType = "image/jpeg"
	}
	return st
}

var _ surface.StatusReporter = (*Service)(nil)

// thumbnail scales a frame's JPEG (untrusted: from the agent's sandbox) to fit in
// thumbMaxW × thumbMaxH and encodes it as a JPEG of quality thumbQuality.
func thumbnail(frame []byte) ([]byte, error) {
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("decode the frame's header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > thumbMaxPixels {
		return nil, fmt.Errorf("frame of %d×%d pixels: too large for a thumbnail", cfg.Width, cfg.Height)
	}
	src, err := jpeg.Decode(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("decode the frame: %w", err)
	}
	b := src.Bounds()
	w, h := thumbSize(b.Dx(), b.Dy())
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	if y, ok := src.(*image.YCbCr); ok {
		boxScale(dst, y) // Chromium's frames: no scratch buffer the size of the frame
	} else {
		draw.BiLinear.Scale(dst, dst.Bounds(), src, b, draw.Src, nil)
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: thumbQuality}); err != nil {
		return nil, fmt.Errorf("encode the thumbnail: %w", err)
	}
	return out.Bytes(), nil
}

// boxScale scales src down onto dst (never larger than src): each of dst's pixels is the
// mean of the box of src's pixels it covers.
func boxScale(dst *image.RGBA, src *image.YCbCr) {
	sb, db := src.Bounds(), dst.Bounds()
	sw, sh, dw, dh := sb.Dx(), sb.Dy(), db.Dx(), db.Dy()
	for dy := range dh {
		y0, y1 := sb.Min.Y+dy*sh/dh, sb.Min.Y+max((dy+1)*sh/dh, dy*sh/dh+1)
		for dx := range dw {
			x0, x1 := sb.Min.X+dx*sw/dw, sb.Min.X+max((dx+1)*sw/dw, dx*sw/dw+1)
			var r, g, b, n uint32
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					yi, ci := src.YOffset(x, y), src.COffset(x, y)
					pr, pg, pb := color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
					r, g, b, n = r+uint32(pr), g+uint32(pg), b+uint32(pb), n+1
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
