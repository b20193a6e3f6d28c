// Package x11cap captures an X display and encodes what changed as JPEG rectangles, once for every
// viewer. It is the engine of the desktop surface's helper half, which runs inside the agent's sandbox
// next to the X server.
//
// Pipeline: one persistent X connection and one MIT-SHM segment reused for every frame (plain GetImage
// when the server cannot attach the segment); XDamage (DamageReportNonEmpty, then Subtract into a
// region and FetchRegion) says which tile rows changed, so an idle screen costs no CPU and no bytes:
// Next blocks on X events. Without Damage, a tile diff of the whole screen runs on a bounded poll. Damaged
// tiles (64×64) are compared with the previous frame's copy; tiles whose pixels really changed are merged
// into rectangles (horizontal runs, then equal runs of consecutive rows) and encoded: losslessly with a
// palette (package palette) when a rectangle has few colours (text, window frames, flat backgrounds), with
// TurboJPEG otherwise.
//
// A window moved on the screen is not encoded again: top-level windows' ConfigureNotify events (the root's
// SubstructureNotify) give the move, and where the captured pixels at the window's new place equal what the
// viewers have at its old place, the frame carries a Copy (the viewer copies that part of its own picture)
// and only what the move uncovered is encoded.
//
// Quality adapts like KasmVNC's: a tile's first change after a quiet spell goes at Options.HighQuality,
// a tile that changes again goes at Options.Quality and one that keeps
// changing slides down to Options.MinQuality, viewers' lag (SetViewerLag) lowers it further, and once
// a tile has not changed for Options.SettleAfter it is sent once more at Options.HighQuality with 4:4:4
// chroma, so text ends sharp and a settled reconstruction is near-exact. When most of the screen changes
// frame after frame, rectangles are downscaled 2× before encoding (Rect.Scaled) until the motion calms.
//
// The cursor is not in the frames: its shape (XFixes, on change only) and position (QueryPointer at the
// frame rate, on NotePointerInput, or on Options.PointerPoll) travel in Frame.Cursor and Frame.Pointer.
// Screen size changes (RandR) produce a keyframe of the new size.
package x11cap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/randr"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/desktop/internal/palette"
	"github.com/porthole/porthole/desktop/internal/tjpeg"
)

// Limits on what an X server may report; anything outside fails with ErrScreenSize instead of
// allocating without bound.
const (
	MaxDim    = 8192        // widest or tallest screen
	MaxPixels = 7680 * 4320 // 8K UHD: 132 MB per BGRX copy
	// MaxCursorDim bounds a cursor image; a bigger one is not reported.
	MaxCursorDim = 256
)

var (
	// ErrClosed is returned by calls on a closed capturer, or after the X connection was lost.
	ErrClosed = errors.New("x11cap: capturer closed")
	// ErrScreenSize means the X server reported a size outside 1..MaxDim or above MaxPixels.
	ErrScreenSize = errors.New("x11cap: unsupported screen size")
	// ErrPixelFormat means the root window is not 24/32-bit little-endian BGRX.
	ErrPixelFormat = errors.New("x11cap: unsupported pixel format (want 24-bit TrueColor, 32 bpp, LSB first)")
	// ErrResize means the X server cannot take the requested size.
	ErrResize = errors.New("x11cap: screen size not supported by the X server")
)

// Options tune the capturer; the zero value gives the defaults documented on each field.
type Options struct {
	TileSize    int           // side of a tile in pixels (16..256); default 64
	MaxFPS      int           // frames per second at most; default 60; negative: unlimited
	Quality     int           // JPEG quality of a region that changes again (a first change goes at HighQuality); default 80
	MinQuality  int           // quality of a region that keeps changing; default 45
	HighQuality int           // quality of the settle refresh (4:4:4) and of keyframes; default 95
	SettleAfter time.Duration // quiet time before the settle refresh; default 400 ms

	// HalfResAbove is the share of tiles changing in a frame that counts as large motion; after 3 such
	// frames in a row rectangles are downscaled 2×, until 5 frames stay under half of it. Default 0.5.
	HalfResAbove float64
	NoHalfRes    bool // never downscale
	// TileAligned keeps every Rect on whole tiles (for a consumer that caches one image per tile);
	// by default a Rect is trimmed to the changed pixels within its tiles, which for a line of text is
	// several times smaller.
	TileAligned bool

	// MaxPalette is the most colours a rectangle may have to go as a palette (lossless); default 256
	// (the most the encoding holds). NoPalette sends every rectangle as JPEG (small ones as PNG).
	MaxPalette int
	NoPalette  bool
	// NoCopy never sends moved windows as copies of the viewer's picture.
	NoCopy bool

	NoSHM    bool // do not use MIT-SHM even when available (plain GetImage)
	NoDamage bool // do not use XDamage even when available (tile diff on a poll)
	// PollInterval is the tile-diff period when Damage is unavailable; default 100 ms, backing off to 4×
	// while the screen stays unchanged.
	PollInterval time.Duration
	// PointerPoll, when positive, also queries the pointer position at this period while nothing else
	// happens (pointer moves that no input of ours caused). Default 0: off, so idle costs nothing.
	PointerPoll time.Duration

	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.TileSize, 64)
	o.TileSize = min(max(o.TileSize, 16), 256)
	if o.MaxFPS == 0 {
		o.MaxFPS = 60
	}
	def(&o.Quality, 80)
	def(&o.MinQuality, 45)
	def(&o.HighQuality, 95)
	def(&o.MaxPalette, palette.MaxColours)
	o.MaxPalette = min(o.MaxPalette, palette.MaxColours)
	o.Quality, o.MinQuality, o.HighQuality = min(o.Quality, 100), min(o.MinQuality, 100), min(o.HighQuality, 100)
	o.MinQuality = min(o.MinQuality, o.Quality)
	if o.SettleAfter <= 0 {
		o.SettleAfter = 400 * time.Millisecond
	}
	if o.HalfResAbove <= 0 || o.HalfResAbove > 1 {
		o.HalfResAbove = 0.5
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Encodings of a Rect's Data (the same numbers as the desktop wire protocol's EncJPEG, EncPNG and
// EncPalette).
const (
	EncJPEG    uint8 = 1
	EncPNG     uint8 = 2
	EncPalette uint8 = 3 // package palette's layout
)

// SmallArea is the largest rect (in pixels) sent as PNG when it has too many colours for a palette:
// lossless, and a few hundred bytes less than a JPEG's ~620 bytes of headers and tables.
const SmallArea = 1024

// CopyBytes is what a Copy costs on the wire (opcode and six u16), counted by Frame.Bytes.
const CopyBytes = 13

// Rect is one encoded region of the screen, in screen pixels. When Scaled is set the image is half the
// size ((W+1)/2 × (H+1)/2) and must be stretched to W×H.
type Rect struct {
	X, Y, W, H int
	Scaled     bool
	Quality    int   // JPEG quality; 100 for PNG
	Full444    bool  // 4:4:4 chroma or lossless (settle refresh, keyframes, PNG, palette)
	Enc        uint8 // EncJPEG, EncPNG or EncPalette
	Data       []byte
}

// Cursor is the pointer's image: straight (not premultiplied) RGBA, W×H, row-major.
type Cursor struct {
	Serial     uint32 // XFixes cursor serial: equal serials mean equal images
	W, H       int
	HotX, HotY int
	RGBA       []byte
}

// Point is a pointer position in screen pixels.
type Point struct{ X, Y int }

// Copy moves pixels the viewer already has: the W×H pixels at (SrcX, SrcY) of the picture go to (X, Y),
// as if copied to a scratch image first (the areas may overlap).
type Copy struct {
	SrcX, SrcY, X, Y, W, H int
}

// Frame is what changed since the previous frame (or the whole screen when Keyframe is set). A viewer
// applies the Copies in order, then draws the Rects in order.
type Frame struct {
	Width, Height int  // screen size
	Keyframe      bool // Rects cover the whole screen
	Resized       bool // the screen size changed: drop the old image (implies Keyframe)
	Copies        []Copy
	Rects         []Rect
	Cursor        *Cursor // new cursor image; nil if unchanged
	Pointer       *Point  // new pointer position; nil if unchanged
}

// Bytes is the frame's encoded payload: the Rects' data, and CopyBytes per Copy.
func (f Frame) Bytes() int {
	n := CopyBytes * len(f.Copies)
	for _, r := range f.Rects {
		n += len(r.Data)
	}
	return n
}

func (f Frame) empty() bool {
	return len(f.Rects) == 0 && len(f.Copies) == 0 && f.Cursor == nil && f.Pointer == nil && !f.Resized
}

// Capturer captures one X display. Next is called from one goroutine at a time; Keyframe,
// SetViewerLag, NotePointerInput, Resize, Size and Close are safe from any goroutine.
type Capturer struct {
	opts Options
	log  *slog.Logger
	conn *xgb.Conn
	root xproto.Window

	useSHM, useDamage, useXFixes, useRandR bool
	dmg                                    damage.Damage
	region                                 xfixes.Region

	events chan xgb.Event
	done   chan struct{}
	wake   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
	lagMS  atomic.Int64

	nextMu                                             sync.Mutex // one Next at a time; guards the event flags below
	first, damaged, resized, cursorChanged, pointerDue bool
	lastFrame, lastChange, nextPoll, nextPointer       time.Time
	pollIdle                                           int

	mu      sync.Mutex // guards the capture state below
	w, h    int
	g       grid
	seg     *segment
	cur     []byte // latest capture (the SHM segment, or a Go buffer without SHM)
	prev    []byte // what viewers have (modulo JPEG loss): the diff reference
	tiles   []tile
	chg     []area // per tile: pixels changed in the frame being built
	class   []int
	pclass  []int // class for the palette pass: 2 = changed or due for refresh, full resolution
	half    []byte
	enc     *tjpeg.Encoder
	png     pngEncoder
	pal     palette.Encoder
	wins    map[xproto.Window]*topWindow // the root's children, for moves (Next's goroutine only)
	rowCapt []bool                       // per tile row: captured in the frame being built
	motion  int                          // consecutive large-motion frames
	calm    int                          // consecutive frames under half the threshold while in half-resolution mode
	halfRes bool
	cursor  *Cursor
	pointer Point
}

// Open connects to display (e.g. ":0"; "" means $DISPLAY) and prepares the capture. The first Next
// returns a keyframe with the cursor and pointer.
func Open(display string, opts Options) (*Capturer, error) {
	opts.setDefaults()
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("x11cap: connect to display %q: %w", display, err)
	}
	c := &Capturer{opts: opts, log: opts.Logger, conn: conn, events: make(chan xgb.Event, 64),
		done: make(chan struct{}), wake: make(chan struct{}, 1), first: true}
	if err := c.init(); err != nil {
		conn.Close()
		return nil, err
	}
	c.wg.Add(1)
	go c.read()
	return c, nil
}

func (c *Capturer) init() error {
	setup := xproto.Setup(c.conn)
	screen := setup.DefaultScreen(c.conn)
	c.root = screen.Root
	if err := checkFormat(setup, screen); err != nil {
		return err
	}
	// Extensions: each missing one degrades, none is required.
	if !c.opts.NoSHM {
		if err := shm.Init(c.conn); err == nil {
			c.useSHM = true
		} else {
			c.log.Warn("x11cap: MIT-SHM unavailable, using plain GetImage (≈15× slower per frame)", "err", err)
		}
	}
	if err := xfixes.Init(c.conn); err == nil {
		if _, err := xfixes.QueryVersion(c.conn, 5, 0).Reply(); err == nil {
			c.useXFixes = true
		}
	}
	if !c.useXFixes {
		c.log.Warn("x11cap: XFIXES unavailable: no cursor image, no Damage")
	}
	if c.useXFixes && !c.opts.NoDamage {
		if err := damage.Init(c.conn); err == nil {
			if _, err := damage.QueryVersion(c.conn, 1, 1).Reply(); err == nil {
				c.useDamage = true
			}
		}
		if !c.useDamage {
			c.log.Warn("x11cap: DAMAGE unavailable, polling with a tile diff", "interval", c.opts.PollInterval)
		}
	}
	if err := randr.Init(c.conn); err == nil {
		if _, err := randr.QueryVersion(c.conn, 1, 2).Reply(); err == nil {
			c.useRandR = true
		}
	}
	// Root size changes: RandR's notify, else ConfigureNotify on the root. Moves of top-level windows:
	// ConfigureNotify of the root's children.
	var mask uint32
	if c.useRandR {
		if err := randr.SelectInputChecked(c.conn, c.root, randr.NotifyMaskScreenChange).Check(); err != nil {
			return fmt.Errorf("x11cap: RandR select input: %w", err)
		}
	} else {
		mask |= xproto.EventMaskStructureNotify
	}
	if !c.opts.NoCopy {
		mask |= xproto.EventMaskSubstructureNotify
	}
	if mask != 0 {
		if err := xproto.ChangeWindowAttributesChecked(c.conn, c.root, xproto.CwEventMask, []uint32{mask}).Check(); err != nil {
			return fmt.Errorf("x11cap: select root events: %w", err)
		}
	}
	if !c.opts.NoCopy {
		c.wins = map[xproto.Window]*topWindow{}
		if tree, err := xproto.QueryTree(c.conn, c.root).Reply(); err == nil {
			for _, w := range tree.Children {
				if g, err := xproto.GetGeometry(c.conn, xproto.Drawable(w)).Reply(); err == nil {
					r := outer(int(g.X), int(g.Y), int(g.Width), int(g.Height), int(g.BorderWidth))
					c.wins[w] = &topWindow{cur: r, ref: r}
				}
			}
		}
	}
	if c.useXFixes {
		if err := xfixes.SelectCursorInputChecked(c.conn, c.root, xfixes.CursorNotifyMaskDisplayCursor).Check(); err != nil {
			return fmt.Errorf("x11cap: XFixes cursor input: %w", err)
		}
	}
	if c.useDamage {
		var err error
		if c.region, err = xfixes.NewRegionId(c.conn); err == nil {
			err = xfixes.CreateRegionChecked(c.conn, c.region, nil).Check()
		}
		if err == nil {
			c.dmg, err = damage.NewDamageId(c.conn)
		}
		if err == nil {
			err = damage.CreateChecked(c.conn, c.dmg, xproto.Drawable(c.root), damage.ReportLevelNonEmpty).Check()
		}
		if err != nil {
			return fmt.Errorf("x11cap: create damage: %w", err)
		}
	}
	enc, err := tjpeg.New()
	if err != nil {
		return err
	}
	c.enc = enc
	g, err := xproto.GetGeometry(c.conn, xproto.Drawable(c.root)).Reply()
	if err != nil {
		return fmt.Errorf("x11cap: root geometry: %w", err)
	}
	return c.configure(int(g.Width), int(g.Height))
}

// checkFormat accepts only what the capture and TurboJPEG's BGRX input understand.
func checkFormat(setup *xproto.SetupInfo, screen *xproto.ScreenInfo) error {
	if setup.ImageByteOrder != xproto.ImageOrderLSBFirst {
		return fmt.Errorf("%w: image byte order MSB first", ErrPixelFormat)
	}
	if screen.RootDepth != 24 && screen.RootDepth != 32 {
		return fmt.Errorf("%w: root depth %d", ErrPixelFormat, screen.RootDepth)
	}
	bpp := 0
	for _, f := range setup.PixmapFormats {
		if f.Depth == screen.RootDepth {
			bpp = int(f.BitsPerPixel)
		}
	}
	if bpp != 32 {
		return fmt.Errorf("%w: %d bits per pixel at depth %d", ErrPixelFormat, bpp, screen.RootDepth)
	}
	for _, d := range screen.AllowedDepths {
		for _, v := range d.Visuals {
			if v.VisualId == screen.RootVisual {
				if v.RedMask != 0xff0000 || v.GreenMask != 0xff00 || v.BlueMask != 0xff {
					return fmt.Errorf("%w: masks %#x/%#x/%#x", ErrPixelFormat, v.RedMask, v.GreenMask, v.BlueMask)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("%w: root visual not found", ErrPixelFormat)
}

// validSize reports whether a w×h screen is within the limits.
func validSize(w, h int) bool {
	return w >= 1 && h >= 1 && w <= MaxDim && h <= MaxDim && w*h <= MaxPixels
}

// configure (re)allocates everything sized by the screen. Called with mu held (or before start).
func (c *Capturer) configure(w, h int) error {
	if !validSize(w, h) {
		return fmt.Errorf("%w: %dx%d (at most %dx%d, %d pixels)", ErrScreenSize, w, h, MaxDim, MaxDim, MaxPixels)
	}
	c.seg.close(c.conn)
	c.seg, c.cur = nil, nil
	if c.useSHM {
		seg, err := newSegment(c.conn, w*h*4)
		if err != nil {
			// E.g. the X server runs in another IPC namespace: it cannot see our segment.
			c.log.Warn("x11cap: MIT-SHM segment unusable, using plain GetImage", "err", err)
			c.useSHM = false
		} else {
			c.seg, c.cur = seg, seg.data
		}
	}
	if c.cur == nil {
		c.cur = make([]byte, w*h*4)
	}
	c.w, c.h = w, h
	c.g = newGrid(w, h, c.opts.TileSize)
	c.prev = make([]byte, w*h*4)
	c.tiles = make([]tile, c.g.cols*c.g.rows)
	c.class = make([]int, c.g.cols*c.g.rows)
	c.chg = make([]area, c.g.cols*c.g.rows)
	c.motion, c.calm, c.halfRes = 0, 0, false
	return nil
}

// read owns the X event stream until the connection closes.
func (c *Capturer) read() {
	defer c.wg.Done()
	defer close(c.events)
	for {
		ev, xerr := c.conn.WaitForEvent()
		if ev == nil && xerr == nil {
			return
		}
		if xerr != nil {
			c.log.Debug("x11cap: X error", "err", xerr)
			continue
		}
		select {
		case c.events <- ev:
		case <-c.done:
			return
		}
	}
}

// Size returns the current screen size.
func (c *Capturer) Size() (w, h int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w, c.h
}

// UsesSHM and UsesDamage report which fast paths are active.
func (c *Capturer) UsesSHM() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seg != nil
}

// UsesDamage reports whether changes come from XDamage (false: tile diff on a poll).
func (c *Capturer) UsesDamage() bool { return c.useDamage }

// SetViewerLag tells the capturer how far behind the viewers are (e.g. the oldest unacknowledged
// frame's age): from 100 ms on, quality drops by 5 per 50 ms, at most 40, never below 10. 0 clears it.
func (c *Capturer) SetViewerLag(lag time.Duration) {
	c.lagMS.Store(max(int64(lag/time.Millisecond), 0))
}

// NotePointerInput says input moved the pointer: the next frame (at the frame rate) reports the position.
func (c *Capturer) NotePointerInput() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close releases the X connection, the SHM segment and the encoder. Next returns ErrClosed.
func (c *Capturer) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.done)
	c.mu.Lock()
	c.seg.close(c.conn)
	c.seg, c.cur = nil, nil
	c.enc.Close()
	c.mu.Unlock()
	c.conn.Close()
	c.wg.Wait()
	return nil
}

// Next blocks until something changed on the screen (or the cursor or pointer did) and returns it
// encoded; the first call returns a keyframe. It returns ctx's error when ctx ends, ErrClosed after
// Close or when the X connection is lost.
func (c *Capturer) Next(ctx context.Context) (Frame, error) {
	c.nextMu.Lock()
	defer c.nextMu.Unlock()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	matchRetries := 0
	for {
		if c.closed.Load() {
			return Frame{}, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return Frame{}, err
		}
		now := time.Now()
		at := c.dueAt(now)
		if !at.IsZero() && !at.After(now) {
			c.drain()
			f, err := c.produce(now)
			if shrunk(err) && matchRetries < 3 {
				// The screen shrank (RandR) between the last event and the capture: read the
				// new geometry and capture again.
				matchRetries++
				c.mu.Lock()
				c.resized = true
				c.mu.Unlock()
				continue
			}
			if err != nil || !f.empty() {
				return f, err
			}
			matchRetries = 0
			continue
		}
		var tc <-chan time.Time
		if !at.IsZero() {
			if timer == nil {
				timer = time.NewTimer(at.Sub(now))
			} else {
				timer.Reset(at.Sub(now))
			}
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		case ev, ok := <-c.events:
			if !ok {
				return Frame{}, fmt.Errorf("%w: X connection lost", ErrClosed)
			}
			c.handle(ev)
		case <-c.wake:
			c.pointerDue = true
		case <-tc:
		}
	}
}

// drain handles the events already received, so a frame never runs behind them.
func (c *Capturer) drain() {
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return
			}
			c.handle(ev)
		default:
			return
		}
	}
}

// handle records what an X event asks for.
func (c *Capturer) handle(ev xgb.Event) {
	switch e := ev.(type) {
	case damage.NotifyEvent:
		c.damaged = true
	case xfixes.CursorNotifyEvent:
		c.cursorChanged = true
	case randr.ScreenChangeNotifyEvent:
		c.resized = true
	case xproto.ConfigureNotifyEvent:
		if e.Window == c.root {
			c.resized = true
		} else if e.Event == c.root {
			c.placed(e.Window, outer(int(e.X), int(e.Y), int(e.Width), int(e.Height), int(e.BorderWidth)))
		}
	case xproto.CreateNotifyEvent:
		if e.Parent == c.root {
			c.placed(e.Window, outer(int(e.X), int(e.Y), int(e.Width), int(e.Height), int(e.BorderWidth)))
		}
	case xproto.GravityNotifyEvent:
		if w := c.wins[e.Window]; w != nil && e.Event == c.root {
			w.cur = area{int(e.X), int(e.Y), int(e.X) + w.cur.x1 - w.cur.x0, int(e.Y) + w.cur.y1 - w.cur.y0}
		}
	case xproto.DestroyNotifyEvent:
		if c.wins != nil && e.Event == c.root {
			delete(c.wins, e.Window)
		}
	case xproto.ReparentNotifyEvent:
		if c.wins != nil && e.Event == c.root && e.Parent != c.root {
			delete(c.wins, e.Window) // no longer top-level
		}
	}
}

// topWindow is a child of the root: where it is (outer rectangle, border included) and where it was
// when the last frame was captured.
type topWindow struct {
	cur, ref area
	movedAt  time.Time // last seen moving
}

func outer(x, y, w, h, border int) area {
	return area{x, y, x + w + 2*border, y + h + 2*border}
}

// placed records a top-level window's geometry; a window seen for the first time has not moved.
func (c *Capturer) placed(w xproto.Window, r area) {
	if c.wins == nil {
		return
	}
	if tw := c.wins[w]; tw != nil {
		if r != tw.cur {
			tw.cur, tw.movedAt = r, time.Now()
		}
	} else if len(c.wins) < maxTopWindows {
		c.wins[w] = &topWindow{cur: r, ref: r}
	}
}

// maxTopWindows bounds the windows tracked for moves (a client creating windows without end costs
// memory, not correctness: a window not tracked is encoded like any change).
const maxTopWindows = 4096

// dueAt returns when the next frame should be produced (zero: nothing pending).
func (c *Capturer) dueAt(now time.Time) time.Time {
	if c.first || c.resized {
		return now
	}
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	paced := now
	if c.opts.MaxFPS > 0 {
		if t := c.lastFrame.Add(time.Second / time.Duration(c.opts.MaxFPS)); t.After(now) {
			paced = t
		}
	}
	if c.damaged || c.cursorChanged || c.pointerDue {
		earliest(paced)
	}
	if !c.useDamage {
		earliest(maxTime(c.nextPoll, paced))
	}
	if s := c.settleAt(); !s.IsZero() {
		earliest(maxTime(s, paced))
	}
	if c.opts.PointerPoll > 0 {
		earliest(c.nextPointer)
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// settleAt is the earliest time a tile sent at low quality is due for its refresh.
func (c *Capturer) settleAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for i := range c.tiles {
		t := &c.tiles[i]
		if !t.low.empty() {
			if s := t.changedAt.Add(c.opts.SettleAfter); at.IsZero() || s.Before(at) {
				at = s
			}
		}
	}
	return at
}

// produce builds one frame. Called by Next only.
func (c *Capturer) produce(now time.Time) (Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return Frame{}, ErrClosed
	}
	var f Frame
	if c.resized {
		c.resized = false
		g, err := xproto.GetGeometry(c.conn, xproto.Drawable(c.root)).Reply()
		if err != nil {
			return Frame{}, fmt.Errorf("x11cap: root geometry: %w", err)
		}
		if int(g.Width) != c.w || int(g.Height) != c.h {
			if err := c.configure(int(g.Width), int(g.Height)); err != nil {
				return Frame{}, err
			}
			c.first = true
			f.Resized = true
			c.log.Info("x11cap: screen resized", "w", c.w, "h", c.h)
		}
	}
	if c.first {
		c.first, c.damaged = false, false
		c.fetchDamage() // everything is in the keyframe
		kf, err := c.keyframeLocked(true)
		if err != nil {
			return Frame{}, err
		}
		kf.Resized = f.Resized
		c.lastFrame, c.lastChange = now, now
		c.nextPoll = now.Add(c.opts.PollInterval)
		return kf, nil
	}
	f.Width, f.Height = c.w, c.h

	// Where the windows that moved lately are: asked before the damage and the capture, so the answer
	// describes (barring a move in the microseconds between) the pixels captured.
	geoms := c.askGeometry(now)

	// Which tiles may have changed.
	cand := make([]bool, len(c.tiles))
	any := false
	// Whatever woke us (settle refresh, cursor, pointer), damage is fetched too (one round trip): a
	// change whose event is still in flight is then in this frame, never behind a refresh of older pixels.
	if c.damaged || c.useDamage {
		c.damaged = false
		for _, r := range c.fetchDamage() {
			x0, y0 := max(int(r.X), 0), max(int(r.Y), 0)
			x1, y1 := min(int(r.X)+int(r.Width), c.w), min(int(r.Y)+int(r.Height), c.h)
			if x0 >= x1 || y0 >= y1 {
				continue
			}
			for cy := y0 / c.g.ts; cy <= (y1-1)/c.g.ts; cy++ {
				for cx := x0 / c.g.ts; cx <= (x1-1)/c.g.ts; cx++ {
					cand[cy*c.g.cols+cx] = true
					any = true
				}
			}
		}
	}
	if !c.useDamage && !now.Before(c.nextPoll) {
		for i := range cand {
			cand[i] = true
		}
		any = true
	}
	changed := 0
	c.gotGeometry(geoms, now)
	if any {
		// Capture full-width bands over the candidate tile rows: with SHM each band lands at its own
		// offset, so the segment mirrors the screen with one stride.
		if len(c.rowCapt) != c.g.rows {
			c.rowCapt = make([]bool, c.g.rows)
		}
		clear(c.rowCapt)
		for cy := 0; cy < c.g.rows; {
			if !rowHas(cand, cy, c.g.cols) {
				cy++
				continue
			}
			end := cy + 1
			for end < c.g.rows && rowHas(cand, end, c.g.cols) {
				end++
			}
			y0, y1 := cy*c.g.ts, min(end*c.g.ts, c.h)
			if err := c.captureBand(y0, y1-y0); err != nil {
				return Frame{}, err
			}
			for r := cy; r < end; r++ {
				c.rowCapt[r] = true
			}
			cy = end
		}
		// Windows that moved: where the viewers' picture already holds the pixels, a copy.
		f.Copies = c.moves(now)
		for i, ok := range cand {
			c.chg[i] = area{}
			if ok {
				c.chg[i] = c.g.diffTile(c.cur, c.prev, i%c.g.cols, i/c.g.cols)
			}
			if !c.chg[i].empty() {
				changed++
				c.class[i] = -1 // marks "changed" until classes are set
			} else {
				c.class[i] = 0
			}
		}
	} else {
		clear(c.class)
		clear(c.chg)
		c.settleWindows()
	}
	if !c.useDamage && !now.Before(c.nextPoll) {
		// Bounded poll: back off to 4× while nothing changes.
		if changed > 0 {
			c.pollIdle = 0
		} else {
			c.pollIdle = min(c.pollIdle+1, 3)
		}
		c.nextPoll = now.Add(c.opts.PollInterval * time.Duration(1+c.pollIdle))
	}

	// Large motion: half resolution after 3 frames with most tiles changing, back after 5 calm ones.
	frac := float64(changed) / float64(len(c.tiles))
	if changed > 0 {
		if frac >= c.opts.HalfResAbove {
			c.motion++
			c.calm = 0
		} else {
			c.motion = 0
			if frac < c.opts.HalfResAbove/2 {
				c.calm++
			}
		}
		if !c.opts.NoHalfRes && c.motion >= 3 {
			c.halfRes = true
		}
		if c.halfRes && c.calm >= 5 {
			c.halfRes = false
		}
		c.lastChange = now
	} else if c.halfRes && now.Sub(c.lastChange) >= c.opts.SettleAfter {
		c.halfRes, c.motion = false, 0
	}

	lag := c.lagMS.Load()
	penalty := 0
	if lag >= 100 {
		penalty = min(int(lag-50)/50*5, 40)
	}
	for i := range c.tiles {
		t := &c.tiles[i]
		switch {
		case c.class[i] == -1:
			q := c.changeQuality(t.touch(now), penalty)
			c.class[i] = q << 1
			if c.halfRes {
				c.class[i] |= 1
			}
		case !t.low.empty() && now.Sub(t.changedAt) >= c.opts.SettleAfter:
			c.class[i] = c.opts.HighQuality << 1
		}
	}

	// First the largest boxes whatever their quality class, as palettes where they have few colours
	// (lossless: the class does not matter, and one rect costs less than several); what is left goes
	// by class.
	if !c.opts.NoPalette {
		if len(c.pclass) != len(c.class) {
			c.pclass = make([]int, len(c.class))
		}
		for i, cl := range c.class {
			c.pclass[i] = 0
			if cl != 0 && cl&1 == 0 {
				c.pclass[i] = 2
			}
		}
		for _, b := range merge(c.pclass, c.g.cols, c.g.rows) {
			r := c.boxRect(b)
			data, ok := c.pal.Encode(nil, c.prev[r.Y*c.w*4+r.X*4:], r.W, r.H, c.w*4, c.opts.MaxPalette)
			if !ok || !paletteWins(data, r.W, r.H) {
				continue
			}
			r.Enc, r.Quality, r.Full444, r.Data = EncPalette, 100, true, data
			f.Rects = append(f.Rects, r)
			c.sent(b, r)
			for cy := b.cy; cy < b.cy+b.ch; cy++ {
				for cx := b.cx; cx < b.cx+b.cw; cx++ {
					c.class[cy*c.g.cols+cx] = 0
				}
			}
		}
	}
	for _, b := range merge(c.class, c.g.cols, c.g.rows) {
		r, err := c.encodeBox(b)
		if err != nil {
			return Frame{}, err
		}
		f.Rects = append(f.Rects, r)
		c.sent(b, r)
	}
	if len(f.Rects) > 0 || len(f.Copies) > 0 {
		c.lastFrame = now
	}

	if c.cursorChanged {
		c.cursorChanged = false
		if cur := c.fetchCursor(); cur != nil {
			f.Cursor = cur
		}
	}
	pointerPoll := c.opts.PointerPoll > 0 && !now.Before(c.nextPointer)
	if c.pointerDue || len(f.Rects) > 0 || len(f.Copies) > 0 || f.Cursor != nil || pointerPoll {
		c.pointerDue = false
		if c.opts.PointerPoll > 0 {
			c.nextPointer = now.Add(c.opts.PointerPoll)
		}
		if p, ok := c.queryPointer(); ok && p != c.pointer {
			c.pointer = p
			f.Pointer = &p
		}
	}
	return f, nil
}

func rowHas(cand []bool, cy, cols int) bool {
	for _, ok := range cand[cy*cols : (cy+1)*cols] {
		if ok {
			return true
		}
	}
	return false
}

// changeQuality maps a tile's change score to a JPEG quality. A tile changing after a quiet spell (score
// ≤ 1.5: no other change in the last ~0.7 s) goes straight at HighQuality, so a one-off change (a line
// of output, a dialog) is sent once and needs no refresh. A tile that keeps changing goes at Quality,
// sliding to MinQuality at 5 changes a second; the lag penalty lowers both. Rounded to tens so
// neighbouring tiles merge.
func (c *Capturer) changeQuality(score float32, penalty int) int {
	if score <= 1.5 && penalty == 0 {
		return c.opts.HighQuality
	}
	hi, lo := float32(c.opts.Quality), float32(c.opts.MinQuality)
	s := min(max((score-1.5)/(5-1.5), 0), 1)
	q := int(hi-(hi-lo)*s+0.5) - penalty
	q = (q + 5) / 10 * 10
	return min(max(q, 10), 100)
}

// fetchDamage empties the damage and returns its rectangles (nil without Damage).
func (c *Capturer) fetchDamage() []xproto.Rectangle {
	if !c.useDamage {
		return nil
	}
	damage.Subtract(c.conn, c.dmg, 0, c.region)
	r, err := xfixes.FetchRegion(c.conn, c.region).Reply()
	if err != nil {
		c.log.Warn("x11cap: fetch damage region", "err", err)
		// Treat as everything damaged rather than miss a change.
		return []xproto.Rectangle{{Width: uint16(c.w), Height: uint16(c.h)}}
	}
	return r.Rectangles
}

// captureBand copies screen rows [y, y+h) into c.cur at their own offset.
func (c *Capturer) captureBand(y, h int) error {
	if c.seg != nil {
		_, err := shm.GetImage(c.conn, xproto.Drawable(c.root), 0, int16(y), uint16(c.w), uint16(h), 0xffffffff,
			xproto.ImageFormatZPixmap, c.seg.id, uint32(y*c.w*4)).Reply()
		if err != nil {
			return fmt.Errorf("x11cap: SHM GetImage: %w", err)
		}
		return nil
	}
	r, err := xproto.GetImage(c.conn, xproto.ImageFormatZPixmap, xproto.Drawable(c.root), 0, int16(y),
		uint16(c.w), uint16(h), 0xffffffff).Reply()
	if err != nil {
		return fmt.Errorf("x11cap: GetImage: %w", err)
	}
	if len(r.Data) < c.w*h*4 {
		return fmt.Errorf("x11cap: GetImage returned %d bytes for %dx%d", len(r.Data), c.w, h)
	}
	copy(c.cur[y*c.w*4:], r.Data[:c.w*h*4])
	return nil
}

// encodeBox encodes a box of tiles from prev with the quality and scaling its class says, trimmed
// (unless TileAligned) to the pixels that changed, or for a settle refresh to those sent low.
func (c *Capturer) encodeBox(b box) (Rect, error) {
	r := c.boxRect(b)
	return r, c.encodeInto(&r, c.prev, c.w*4)
}

// sent records in the tiles of box b what r (which covers their changes) sent.
func (c *Capturer) sent(b box, r Rect) {
	low := r.Scaled || !r.Full444 || r.Quality < c.opts.HighQuality
	done := area{r.X, r.Y, r.X + r.W, r.Y + r.H}
	for cy := b.cy; cy < b.cy+b.ch; cy++ {
		for cx := b.cx; cx < b.cx+b.cw; cx++ {
			t := &c.tiles[cy*c.g.cols+cx]
			t.sentQ = uint8(r.Quality)
			switch {
			case low:
				t.low = t.low.union(done.intersect(c.g.tileArea(cx, cy)))
			case t.low.intersect(done) == t.low:
				t.low = area{}
			}
		}
	}
}

// boxRect is the screen area box b encodes, with its class's quality and scaling: the box, trimmed
// (unless TileAligned) to the pixels that changed, or for a settle refresh to those sent low.
func (c *Capturer) boxRect(b box) Rect {
	q, scaled := b.class>>1, b.class&1 == 1
	x, y := b.cx*c.g.ts, b.cy*c.g.ts
	w, h := min(b.cw*c.g.ts, c.w-x), min(b.ch*c.g.ts, c.h-y)
	if !c.opts.TileAligned {
		var a area
		for cy := b.cy; cy < b.cy+b.ch; cy++ {
			for cx := b.cx; cx < b.cx+b.cw; cx++ {
				i := cy*c.g.cols + cx
				if !c.chg[i].empty() {
					a = a.union(c.chg[i])
				} else {
					a = a.union(c.tiles[i].low)
				}
			}
		}
		if a = a.intersect(area{x, y, x + w, y + h}); !a.empty() {
			x, y, w, h = a.x0, a.y0, a.x1-a.x0, a.y1-a.y0
		}
	}
	return Rect{X: x, Y: y, W: w, H: h, Scaled: scaled, Quality: q}
}

// encodeInto fills r.Data from the image pix (stride bytes per row) at r's position: as a palette when
// it has few enough colours (lossless), else as JPEG (PNG when small); a palette of many colours that
// comes out large (paletteWins) is kept only if it is smaller than the JPEG.
func (c *Capturer) encodeInto(r *Rect, pix []byte, stride int) error {
	src := pix[r.Y*stride+r.X*4:]
	var pal []byte
	if !r.Scaled && !c.opts.NoPalette {
		if data, ok := c.pal.Encode(nil, src, r.W, r.H, stride, c.opts.MaxPalette); ok {
			if paletteWins(data, r.W, r.H) {
				r.Enc, r.Quality, r.Full444, r.Data = EncPalette, 100, true, data
				return nil
			}
			pal = data
		}
	}
	if err := c.encodeImage(r, src, stride); err != nil {
		return err
	}
	if pal != nil && len(pal) <= len(r.Data) {
		r.Enc, r.Quality, r.Full444, r.Data = EncPalette, 100, true, pal
	}
	return nil
}

// paletteWins says a palette encoding needs no comparison with JPEG: it has at most 16 colours, or
// the region is small, or it takes at most 2 bits a pixel.
func paletteWins(data []byte, w, h int) bool {
	return int(data[0]) < 16 || w*h <= SmallArea || len(data)*4 <= w*h
}

// encodeImage fills r.Data with a JPEG (a PNG when small) of the image at src.
func (c *Capturer) encodeImage(r *Rect, src []byte, stride int) error {
	var err error
	r.Enc = EncJPEG
	if !r.Scaled && r.W*r.H <= SmallArea {
		r.Enc, r.Quality, r.Full444 = EncPNG, 100, true
		r.Data, err = c.png.encode(src, r.W, r.H, stride)
	} else if r.Scaled {
		var w2, h2 int
		c.half, w2, h2 = halve(c.half, src, r.W, r.H, stride)
		r.Data, err = c.enc.EncodeBGRX(c.half, w2, h2, w2*4, r.Quality, tjpeg.S420)
	} else {
		sub := tjpeg.S420
		if r.Quality >= c.opts.HighQuality {
			sub, r.Full444 = tjpeg.S444, true
		}
		r.Data, err = c.enc.EncodeBGRX(src, r.W, r.H, stride, r.Quality, sub)
	}
	if err != nil {
		return fmt.Errorf("x11cap: encode %dx%d at %d,%d: %w", r.W, r.H, r.X, r.Y, err)
	}
	return nil
}

// Keyframe captures and encodes the whole current screen at HighQuality 4:4:4, with the cursor image
// and pointer position, e.g. for a new or lagging viewer. It does not disturb Next: changes not yet
// returned by Next are still returned by it.
func (c *Capturer) Keyframe() (Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return Frame{}, ErrClosed
	}
	f, err := c.keyframeLocked(false)
	if shrunk(err) {
		// The screen shrank under the capture: Next reads the new size and sends its keyframe.
		c.resized = true
		return Frame{Width: c.w, Height: c.h}, nil
	}
	return f, err
}

// shrunk reports a capture that failed with BadMatch: the area asked for is no longer inside
// the root window, because a RandR resize shrank the screen after the capturer last read its size.
func shrunk(err error) bool {
	var m xproto.MatchError
	return errors.As(err, &m)
}

// keyframeLocked encodes the whole screen; reset also makes it the diff reference (Next's keyframes).
func (c *Capturer) keyframeLocked(reset bool) (Frame, error) {
	if err := c.captureBand(0, c.h); err != nil {
		return Frame{}, err
	}
	src := c.cur
	if reset {
		copy(c.prev, c.cur)
		src = c.prev
		for i := range c.tiles {
			c.tiles[i] = tile{sentQ: uint8(c.opts.HighQuality)}
		}
		c.motion, c.calm, c.halfRes = 0, 0, false
		c.settleWindows()
	}
	r := Rect{W: c.w, H: c.h, Quality: c.opts.HighQuality}
	if err := c.encodeInto(&r, src, c.w*4); err != nil {
		return Frame{}, err
	}
	f := Frame{Width: c.w, Height: c.h, Keyframe: true, Rects: []Rect{r}}
	if reset || c.cursor == nil {
		c.cursorChanged = false
		if cur := c.fetchCursor(); cur != nil {
			c.cursor = cur
		}
	}
	if c.cursor != nil {
		cur := *c.cursor
		f.Cursor = &cur
	}
	if p, ok := c.queryPointer(); ok {
		if reset {
			c.pointer = p
		}
		f.Pointer = &p
	}
	return f, nil
}

// fetchCursor returns the cursor image if it differs from the last one reported.
func (c *Capturer) fetchCursor() *Cursor {
	if !c.useXFixes {
		return nil
	}
	r, err := xfixes.GetCursorImage(c.conn).Reply()
	if err != nil {
		c.log.Debug("x11cap: cursor image", "err", err)
		return nil
	}
	if c.cursor != nil && c.cursor.Serial == r.CursorSerial {
		return nil
	}
	w, h := int(r.Width), int(r.Height)
	if w < 1 || h < 1 || w > MaxCursorDim || h > MaxCursorDim || len(r.CursorImage) < w*h {
		c.log.Debug("x11cap: cursor image out of bounds", "w", w, "h", h)
		return nil
	}
	cur := &Cursor{Serial: r.CursorSerial, W: w, H: h, HotX: min(int(r.Xhot), w-1), HotY: min(int(r.Yhot), h-1),
		RGBA: make([]byte, w*h*4)}
	for i, p := range r.CursorImage[:w*h] {
		a := p >> 24
		cr, cg, cb := (p>>16)&0xff, (p>>8)&0xff, p&0xff
		if a > 0 && a < 255 { // XFixes gives premultiplied ARGB
			cr, cg, cb = min(cr*255/a, 255), min(cg*255/a, 255), min(cb*255/a, 255)
		}
		cur.RGBA[4*i], cur.RGBA[4*i+1], cur.RGBA[4*i+2], cur.RGBA[4*i+3] = byte(cr), byte(cg), byte(cb), byte(a)
	}
	c.cursor = cur
	out := *cur
	return &out
}

func (c *Capturer) queryPointer() (Point, bool) {
	r, err := xproto.QueryPointer(c.conn, c.root).Reply()
	if err != nil || !r.SameScreen {
		return Point{}, false
	}
	return Point{X: min(max(int(r.RootX), 0), c.w-1), Y: min(max(int(r.RootY), 0), c.h-1)}, true
}
