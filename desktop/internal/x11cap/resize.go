package x11cap

import (
	"fmt"

	"github.com/jezek/xgb/randr"
	"github.com/jezek/xgb/xproto"
)

// Resize asks the X server for a w×h screen through RandR 1.2 (a mode of that size on the first CRTC,
// created if missing, and the screen size). The change arrives like any other: Next returns a keyframe
// with Resized set. Xvfb only goes up to the size it was started with (GetScreenSizeRange's maximum):
// anything else fails with ErrResize.
func (c *Capturer) Resize(w, h int) error {
	if !validSize(w, h) || w > 0xffff || h > 0xffff {
		return fmt.Errorf("%w: %dx%d", ErrScreenSize, w, h)
	}
	if !c.useRandR {
		return fmt.Errorf("%w: no RandR 1.2", ErrResize)
	}
	if c.closed.Load() {
		return ErrClosed
	}
	rng, err := randr.GetScreenSizeRange(c.conn, c.root).Reply()
	if err != nil {
		return fmt.Errorf("%w: size range: %v", ErrResize, err)
	}
	if w < int(rng.MinWidth) || h < int(rng.MinHeight) || w > int(rng.MaxWidth) || h > int(rng.MaxHeight) {
		return fmt.Errorf("%w: %dx%d outside %dx%d..%dx%d", ErrResize, w, h, rng.MinWidth, rng.MinHeight, rng.MaxWidth, rng.MaxHeight)
	}
	res, err := randr.GetScreenResourcesCurrent(c.conn, c.root).Reply()
	if err != nil || len(res.Crtcs) == 0 {
		return fmt.Errorf("%w: screen resources: %v", ErrResize, err)
	}
	crtc := res.Crtcs[0]
	info, err := randr.GetCrtcInfo(c.conn, crtc, res.ConfigTimestamp).Reply()
	if err != nil {
		return fmt.Errorf("%w: crtc info: %v", ErrResize, err)
	}
	outputs := info.Outputs
	if len(outputs) == 0 {
		outputs = info.Possible
	}
	if len(outputs) == 0 {
		return fmt.Errorf("%w: no output on the first crtc", ErrResize)
	}
	mode := randr.Mode(0)
	for _, m := range res.Modes {
		if int(m.Width) == w && int(m.Height) == h {
			mode = randr.Mode(m.Id)
			break
		}
	}
	if mode == 0 {
		name := fmt.Sprintf("%dx%d", w, h)
		mi := randr.ModeInfo{Width: uint16(w), Height: uint16(h), DotClock: uint32(w * h * 60),
			HsyncStart: uint16(w), HsyncEnd: uint16(w), Htotal: uint16(w), VsyncStart: uint16(h), VsyncEnd: uint16(h),
			Vtotal: uint16(h), NameLen: uint16(len(name))}
		r, err := randr.CreateMode(c.conn, c.root, mi, name).Reply()
		if err != nil {
			return fmt.Errorf("%w: create mode %s: %v", ErrResize, name, err)
		}
		mode = r.Mode
	}
	for _, o := range outputs {
		if err := randr.AddOutputModeChecked(c.conn, o, mode).Check(); err != nil {
			return fmt.Errorf("%w: add mode to output: %v", ErrResize, err)
		}
	}
	cw, ch := c.Size()
	mm := func(px int) uint32 { return uint32(px * 254 / 960) } // 96 dpi
	// The screen must hold the crtc at every step: grow it first, set the mode, then shrink it.
	bw, bh := max(w, cw), max(h, ch)
	if bw != cw || bh != ch {
		if err := randr.SetScreenSizeChecked(c.conn, c.root, uint16(bw), uint16(bh), mm(bw), mm(bh)).Check(); err != nil {
			return fmt.Errorf("%w: screen size %dx%d: %v", ErrResize, bw, bh, err)
		}
	}
	if r, err := randr.SetCrtcConfig(c.conn, crtc, xproto.TimeCurrentTime, res.ConfigTimestamp, 0, 0, mode,
		randr.RotationRotate0, outputs).Reply(); err != nil || r.Status != randr.SetConfigSuccess {
		st := -1
		if r != nil {
			st = int(r.Status)
		}
		return fmt.Errorf("%w: crtc config (status %d): %v", ErrResize, st, err)
	}
	if bw != w || bh != h {
		if err := randr.SetScreenSizeChecked(c.conn, c.root, uint16(w), uint16(h), mm(w), mm(h)).Check(); err != nil {
			return fmt.Errorf("%w: screen size %dx%d: %v", ErrResize, w, h, err)
		}
	}
	return nil
}
