//go:build !js

package terminal

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Dashboard thumbnails: the last lines of a terminal, rebuilt from the tail of its scrollback
// on a small screen model. It is an approximation (it starts in the middle of the output and
// knows only the common cursor, erase and scroll sequences), good for a thumbnail, not a
// terminal emulator; the bytes are agent output, so everything is bounded.
const (
	thumbTail     = 32 << 10 // bytes of scrollback the thumbnail is rebuilt from
	thumbMaxLines = 12       // lines in a thumbnail
	thumbWidth    = 120      // runes per thumbnail line
	thumbMaxCols  = 300      // screen model bounds (the PTY may be larger)
	thumbMaxRows  = 120
	thumbMaxParam = 16 // CSI parameters kept
)

// thumbLines rebuilds a cols×rows screen from out (the tail of a terminal's output; partial
// when it does not start at the terminal's first byte) and returns its last non-blank lines:
// at most maxLines, each at most width runes, trailing blanks trimmed, only printable characters.
func thumbLines(out []byte, partial bool, cols, rows, maxLines, width int) []string {
	if cols <= 0 || rows <= 0 {
		cols, rows = 80, 24
	}
	cols, rows = min(cols, thumbMaxCols), min(rows, thumbMaxRows)
	// A tail starts in the middle of something: start at a line boundary when there is one
	// near the start (fewer half sequences).
	if i := bytes.IndexByte(out, '\n'); partial && i >= 0 && i < 4096 && i+1 < len(out) {
		out = out[i+1:]
	}
	sc := newThumbScreen(cols, rows)
	sc.feed(out)
	return sc.lines(maxLines, width)
}

type thumbScreen struct {
	cols, rows int
	grid       [][]rune
	saved      [][]rune // the main screen while the alternate one is shown
	r, c       int
	sr, scol   int // saved cursor

	state  int // thumbGround, ...
	params []int
	cur    int  // the parameter being read (-1: none yet)
	priv   bool // CSI with a private marker (? > < =)
}

const (
	thumbGround = iota
	thumbEsc
	thumbCSI
	thumbOSC       // until BEL or ESC \
	thumbOSCEsc    // ESC inside an OSC
	thumbString    // DCS, SOS, PM, APC: until ESC \
	thumbStringEsc // ESC inside one
	thumbCharset   // ESC ( X: skip X
)

func newThumbScreen(cols, rows int) *thumbScreen {
	return &thumbScreen{cols: cols, rows: rows, grid: blankGrid(cols, rows), params: make([]int, 0, thumbMaxParam)}
}

func blankGrid(cols, rows int) [][]rune {
	g := make([][]rune, rows)
	for i := range g {
		g[i] = blankRow(cols)
	}
	return g
}

func blankRow(cols int) []rune {
	r := make([]rune, cols)
	for i := range r {
		r[i] = ' '
	}
	return r
}

func (s *thumbScreen) feed(p []byte) {
	// Skip a partial UTF-8 sequence at the start.
	for len(p) > 0 && !utf8.RuneStart(p[0]) {
		p = p[1:]
	}
	for len(p) > 0 {
		c := p[0]
		if s.state != thumbGround || c < utf8.RuneSelf {
			s.byte(c)
			p = p[1:]
			continue
		}
		r, n := utf8.DecodeRune(p)
		p = p[n:]
		if r != utf8.RuneError || n > 1 {
			s.print(r)
		}
	}
}

func (s *thumbScreen) byte(c byte) {
	switch s.state {
	case thumbGround:
		s.control(c)
	case thumbEsc:
		s.esc(c)
	case thumbCSI:
		s.csi(c)
	case thumbOSC:
		switch c {
		case 0x07, 0x18, 0x1a:
			s.state = thumbGround
		case 0x1b:
			s.state = thumbOSCEsc
		}
	case thumbOSCEsc, thumbStringEsc:
		if c == '\\' {
			s.state = thumbGround
		} else if s.state == thumbOSCEsc {
			s.state = thumbOSC
		} else {
			s.state = thumbString
		}
	case thumbString:
		switch c {
		case 0x18, 0x1a:
			s.state = thumbGround
		case 0x1b:
			s.state = thumbStringEsc
		}
	case thumbCharset:
		s.state = thumbGround
	}
}

func (s *thumbScreen) control(c byte) {
	switch c {
	case 0x1b:
		s.state = thumbEsc
	case '\r':
		s.c = 0
	case '\n', 0x0b, 0x0c:
		s.lineFeed()
	case '\b':
		s.c = max(min(s.c, s.cols-1)-1, 0)
	case '\t':
		s.c = min((s.c/8+1)*8, s.cols-1)
	default:
		if c >= 0x20 && c < 0x7f {
			s.print(rune(c))
		}
	}
}

func (s *thumbScreen) print(r rune) {
	if !unicode.IsPrint(r) {
		return
	}
	if s.c >= s.cols { // deferred wrap, as xterm does
		s.c = 0
		s.lineFeed()
	}
	s.grid[s.r][s.c] = r
	s.c++
}

func (s *thumbScreen) lineFeed() {
	if s.r < s.rows-1 {
		s.r++
		return
	}
	s.scrollUp(1)
}

func (s *thumbScreen) scrollUp(n int) {
	n = min(n, s.rows)
	copy(s.grid, s.grid[n:])
	for i := s.rows - n; i < s.rows; i++ {
		s.grid[i] = blankRow(s.cols)
	}
}

func (s *thumbScreen) scrollDown(n int) {
	n = min(n, s.rows)
	copy(s.grid[n:], s.grid[:s.rows-n])
	for i := 0; i < n; i++ {
		s.grid[i] = blankRow(s.cols)
	}
}

func (s *thumbScreen) esc(c byte) {
	s.state = thumbGround
	switch c {
	case '[':
		s.state, s.params, s.cur, s.priv = thumbCSI, s.params[:0], -1, false
	case ']':
		s.state = thumbOSC
	case 'P', 'X', '^', '_':
		s.state = thumbString
	case '(', ')', '*', '+', '-', '.', '/', '#', '%':
		s.state = thumbCharset
	case 'c':
		s.grid, s.saved, s.r, s.c = blankGrid(s.cols, s.rows), nil, 0, 0
	case 'D':
		s.lineFeed()
	case 'E':
		s.c = 0
		s.lineFeed()
	case 'M':
		if s.r > 0 {
			s.r--
		} else {
			s.scrollDown(1)
		}
	case '7':
		s.sr, s.scol = s.r, s.c
	case '8':
		s.r, s.c = min(s.sr, s.rows-1), min(s.scol, s.cols-1)
	case 0x1b:
		s.state = thumbEsc
	}
}

func (s *thumbScreen) csi(c byte) {
	switch {
	case c >= '0' && c <= '9':
		if s.cur < 0 {
			s.cur = 0
		}
		s.cur = min(s.cur*10+int(c-'0'), 10000)
		return
	case c == ';' || c == ':':
		s.push()
		s.cur = 0
		return
	case c == '?' || c == '>' || c == '<' || c == '=':
		s.priv = true
		return
	case c >= 0x20 && c <= 0x2f: // intermediates
		return
	case c == 0x1b:
		s.state = thumbEsc
		return
	case c == 0x18 || c == 0x1a:
		s.state = thumbGround
		return
	case c < 0x20: // C0 controls act inside a CSI too
		s.control(c)
		return
	}
	s.push()
	s.state = thumbGround
	if c < 0x40 || c > 0x7e {
		return
	}
	p := func(i, def int) int {
		if i < len(s.params) && s.params[i] > 0 {
			return s.params[i]
		}
		return def
	}
	if s.priv {
		if c == 'h' || c == 'l' {
			for _, m := range s.params {
				if m == 1049 || m == 1047 || m == 47 {
					s.altScreen(c == 'h')
				}
			}
		}
		return
	}
	if c != 'm' { // SGR keeps a deferred wrap; cursor and erase sequences end it
		s.c = min(s.c, s.cols-1)
	}
	switch c {
	case 'A':
		s.r = max(s.r-p(0, 1), 0)
	case 'B', 'e':
		s.r = min(s.r+p(0, 1), s.rows-1)
	case 'C', 'a':
		s.c = min(s.c+p(0, 1), s.cols-1)
	case 'D':
		s.c = max(s.c-p(0, 1), 0)
	case 'E':
		s.r, s.c = min(s.r+p(0, 1), s.rows-1), 0
	case 'F':
		s.r, s.c = max(s.r-p(0, 1), 0), 0
	case 'G', '`':
		s.c = min(p(0, 1), s.cols) - 1
	case 'd':
		s.r = min(p(0, 1), s.rows) - 1
	case 'H', 'f':
		s.r, s.c = min(p(0, 1), s.rows)-1, min(p(1, 1), s.cols)-1
	case 'J':
		switch p(0, 0) {
		case 0:
			s.eraseLine(s.r, s.c, s.cols)
			for i := s.r + 1; i < s.rows; i++ {
				s.grid[i] = blankRow(s.cols)
			}
		case 1:
			for i := 0; i < s.r; i++ {
				s.grid[i] = blankRow(s.cols)
			}
			s.eraseLine(s.r, 0, s.c+1)
		default:
			s.grid = blankGrid(s.cols, s.rows)
		}
	case 'K':
		switch p(0, 0) {
		case 0:
			s.eraseLine(s.r, s.c, s.cols)
		case 1:
			s.eraseLine(s.r, 0, s.c+1)
		default:
			s.eraseLine(s.r, 0, s.cols)
		}
	case 'X':
		s.eraseLine(s.r, s.c, s.c+p(0, 1))
	case 'P':
		n := min(p(0, 1), s.cols-s.c)
		row := s.grid[s.r]
		copy(row[s.c:], row[s.c+n:])
		s.eraseLine(s.r, s.cols-n, s.cols)
	case '@':
		n := min(p(0, 1), s.cols-s.c)
		row := s.grid[s.r]
		copy(row[s.c+n:], row[s.c:s.cols-n])
		s.eraseLine(s.r, s.c, s.c+n)
	case 'L', 'M':
		n := min(p(0, 1), s.rows-s.r)
		rest := s.grid[s.r:]
		if c == 'L' {
			copy(rest[n:], rest[:len(rest)-n])
			for i := 0; i < n; i++ {
				rest[i] = blankRow(s.cols)
			}
		} else {
			copy(rest, rest[n:])
			for i := len(rest) - n; i < len(rest); i++ {
				rest[i] = blankRow(s.cols)
			}
		}
	case 'S':
		s.scrollUp(p(0, 1))
	case 'T':
		s.scrollDown(p(0, 1))
	case 's':
		s.sr, s.scol = s.r, s.c
	case 'u':
		s.r, s.c = min(s.sr, s.rows-1), min(s.scol, s.cols-1)
	}
}

func (s *thumbScreen) push() {
	if s.cur < 0 {
		s.cur = 0
	}
	if len(s.params) < thumbMaxParam {
		s.params = append(s.params, s.cur)
	}
	s.cur = -1
}

// eraseLine blanks row r from column from (inclusive) to to (exclusive), clamped.
func (s *thumbScreen) eraseLine(r, from, to int) {
	from, to = max(from, 0), min(to, s.cols)
	for i := from; i < to; i++ {
		s.grid[r][i] = ' '
	}
}

// altScreen switches to the alternate screen (full-screen programs) and back.
func (s *thumbScreen) altScreen(on bool) {
	switch {
	case on && s.saved == nil:
		s.saved, s.grid = s.grid, blankGrid(s.cols, s.rows)
	case !on && s.saved != nil:
		s.grid, s.saved = s.saved, nil
	}
}

// lines returns the screen's last non-blank lines (see thumbLines).
func (s *thumbScreen) lines(maxLines, width int) []string {
	last := -1
	for i := s.rows - 1; i >= 0; i-- {
		if strings.TrimRight(string(s.grid[i]), " ") != "" {
			last = i
			break
		}
	}
	if last < 0 || maxLines <= 0 {
		return nil
	}
	first := max(0, last-maxLines+1)
	out := make([]string, 0, last-first+1)
	for i := first; i <= last; i++ {
		row := s.grid[i]
		if len(row) > width {
			row = row[:width]
		}
		out = append(out, strings.TrimRight(string(row), " "))
	}
	return out
}
