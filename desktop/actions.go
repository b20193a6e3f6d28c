//go:build !js

package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/porthole/porthole/api"
)

// Action is one computer-use step (POST /api/agents/:id/desktop/actions), in the
// vocabulary computer-use models emit.
type Action struct {
	// Action is one of screenshot, mouse_move, left_click, right_click, middle_click,
	// double_click, triple_click, left_click_drag, left_mouse_down, left_mouse_up, scroll,
	// key, type, cursor_position, wait.
	Action string `json:"action"`
	// Coordinate is [x, y] on the display: the target of mouse_move, the clicks (optional:
	// the pointer's position when absent), scroll, and the end of left_click_drag.
	Coordinate []int `json:"coordinate,omitempty"`
	// StartCoordinate is where left_click_drag presses the button.
	StartCoordinate []int `json:"start_coordinate,omitempty"`
	// Text is the text to type (type), the xdotool-style keys to press (key: "ctrl+s",
	// "Return", "ctrl+a Delete"), or the modifiers held during a click or scroll ("shift").
	Text string `json:"text,omitempty"`
	// ScrollDirection is up, down, left or right; ScrollAmount the steps (1-100, default 3).
	ScrollDirection string `json:"scroll_direction,omitempty"`
	ScrollAmount    int    `json:"scroll_amount,omitempty"`
	// Duration is the wait in seconds (capped at Config.MaxWait).
	Duration float64 `json:"duration,omitempty"`
}

// ActionResult answers an Action.
type ActionResult struct {
	// Coordinate is the pointer's position (cursor_position).
	Coordinate []int `json:"coordinate,omitempty"`
	// Image is the screen (screenshot), base64 in JSON, of MediaType and Width×Height.
	Image     []byte `json:"image,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
}

// step is one frame to the helper, then a pause.
type step struct {
	msg   Message
	pause time.Duration
}

const (
	clickGap       = 40 * time.Millisecond // between the clicks of a double click
	dragPause      = 50 * time.Millisecond
	maxScrollSteps = 100
	pointerSettle  = time.Second // the longest an action waits for the display to report its pointer
)

// actionNames lists the vocabulary, for error messages.
const actionNames = "screenshot, mouse_move, left_click, right_click, middle_click, double_click, triple_click, left_click_drag, left_mouse_down, left_mouse_up, scroll, key, type, cursor_position, wait"

func badAction(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadAction, fmt.Sprintf(format, args...))
}

// pointerState is what a translation needs of the display.
type pointerState struct {
	screen  Screen
	pos     CursorPos
	hasPos  bool
	buttons uint8
}

// coord validates an [x, y] against the display.
func coord(field string, c []int, st pointerState) (uint16, uint16, error) {
	if len(c) != 2 {
		return 0, 0, badAction("%s must be [x, y], got %d numbers", field, len(c))
	}
	if c[0] < 0 || c[1] < 0 || c[0] >= int(st.screen.W) || c[1] >= int(st.screen.H) {
		return 0, 0, badAction("%s [%d, %d] is outside the %dx%d display", field, c[0], c[1], st.screen.W, st.screen.H)
	}
	return uint16(c[0]), uint16(c[1]), nil
}

// target is the click position: Coordinate, or the pointer's position when absent.
func target(a Action, st pointerState) (uint16, uint16, error) {
	if a.Coordinate == nil {
		if !st.hasPos {
			return 0, 0, badAction("%s needs a coordinate: the pointer's position is not known yet", a.Action)
		}
		return st.pos.X, st.pos.Y, nil
	}
	return coord("coordinate", a.Coordinate, st)
}

// isInputAction reports whether the action sends input to the display.
func isInputAction(name string) bool {
	switch name {
	case "screenshot", "cursor_position", "wait":
		return false
	}
	return true
}

// translate turns an input action into frames for the helper, given the display's state;
// it returns the buttons held afterwards. Bad input is an ErrBadAction naming the problem.
func translate(a Action, st pointerState) ([]step, uint8, error) {
	var steps []step
	add := func(m Message, pause time.Duration) { steps = append(steps, step{m, pause}) }
	mods, err := modifiers(a)
	if err != nil {
		return nil, 0, err
	}
	down := func() {
		for _, c := range mods {
			add(Key{Down: true, Code: c}, 0)
		}
	}
	up := func() {
		for i := len(mods) - 1; i >= 0; i-- {
			add(Key{Code: mods[i]}, 0)
		}
	}
	click := func(button uint8, n int) error {
		x, y, err := target(a, st)
		if err != nil {
			return err
		}
		down()
		add(Pointer{X: x, Y: y, Buttons: st.buttons}, 0)
		for i := range n {
			pause := time.Duration(0)
			if i < n-1 {
				pause = clickGap
			}
			add(Pointer{X: x, Y: y, Buttons: st.buttons | button}, 0)
			add(Pointer{X: x, Y: y, Buttons: st.buttons &^ button}, pause)
		}
		up()
		return nil
	}
	buttons := st.buttons
	switch a.Action {
	case "mouse_move":
		x, y, err := coord("coordinate", a.Coordinate, st)
		if err != nil {
			return nil, 0, err
		}
		add(Pointer{X: x, Y: y, Buttons: st.buttons}, 0)
	case "left_click":
		err = click(ButtonLeft, 1)
	case "right_click":
		err = click(ButtonRight, 1)
	case "middle_click":
		err = click(ButtonMiddle, 1)
	case "double_click":
		err = click(ButtonLeft, 2)
	case "triple_click":
		err = click(ButtonLeft, 3)
	case "left_click_drag":
		if a.StartCoordinate == nil {
			return nil, 0, badAction("left_click_drag needs start_coordinate and coordinate")
		}
		sx, sy, err := coord("start_coordinate", a.StartCoordinate, st)
		if err != nil {
			return nil, 0, err
		}
		ex, ey, err := coord("coordinate", a.Coordinate, st)
		if err != nil {
			return nil, 0, err
		}
		down()
		add(Pointer{X: sx, Y: sy}, 0)
		add(Pointer{X: sx, Y: sy, Buttons: ButtonLeft}, dragPause)
		add(Pointer{X: uint16((int(sx) + int(ex)) / 2), Y: uint16((int(sy) + int(ey)) / 2), Buttons: ButtonLeft}, dragPause)
		add(Pointer{X: ex, Y: ey, Buttons: ButtonLeft}, dragPause)
		add(Pointer{X: ex, Y: ey}, 0)
		up()
		buttons = 0
	case "left_mouse_down", "left_mouse_up":
		x, y, err := target(a, st)
		if err != nil {
			return nil, 0, err
		}
		buttons = st.buttons | ButtonLeft
		if a.Action == "left_mouse_up" {
			buttons = st.buttons &^ ButtonLeft
		}
		add(Pointer{X: x, Y: y, Buttons: buttons}, 0)
	case "scroll":
		x, y, err := target(a, st)
		if err != nil {
			return nil, 0, err
		}
		n := a.ScrollAmount
		if n == 0 {
			n = 3
		}
		if n < 0 || n > maxScrollSteps {
			return nil, 0, badAction("scroll_amount %d is outside 1-%d", a.ScrollAmount, maxScrollSteps)
		}
		var dx, dy int16
		switch a.ScrollDirection {
		case "up":
			dy = -int16(n)
		case "down":
			dy = int16(n)
		case "left":
			dx = -int16(n)
		case "right":
			dx = int16(n)
		default:
			return nil, 0, badAction("scroll_direction %q is not up, down, left or right", a.ScrollDirection)
		}
		down()
		add(Pointer{X: x, Y: y, Buttons: st.buttons}, 0)
		add(Wheel{X: x, Y: y, DX: dx, DY: dy}, 0)
		up()
	case "key":
		combos, err := parseKeys(a.Text)
		if err != nil {
			return nil, 0, err
		}
		for _, codes := range combos {
			for _, c := range codes {
				add(Key{Down: true, Code: c}, 0)
			}
			for i := len(codes) - 1; i >= 0; i-- {
				add(Key{Code: codes[i]}, 0)
			}
		}
	case "type":
		if a.Text == "" {
			return nil, 0, badAction("type needs text")
		}
		if !utf8.ValidString(a.Text) {
			return nil, 0, badAction("text is not valid UTF-8")
		}
		for _, chunk := range chunkText(a.Text, MaxText) {
			add(Text{Text: chunk}, 0)
		}
	default:
		return nil, 0, badAction("unknown action %q (known: %s)", a.Action, actionNames)
	}
	if err != nil {
		return nil, 0, err
	}
	return steps, buttons, nil
}

// modifiers are the keys a click or scroll holds (Text, e.g. "shift" or "ctrl+alt").
func modifiers(a Action) ([]string, error) {
	switch a.Action {
	case "left_click", "right_click", "middle_click", "double_click", "triple_click", "left_click_drag", "scroll":
	default:
		return nil, nil
	}
	if a.Text == "" {
		return nil, nil
	}
	combos, err := parseKeys(a.Text)
	if err != nil {
		return nil, err
	}
	if len(combos) != 1 {
		return nil, badAction("the keys held during %s are one combination like \"shift\" or \"ctrl+alt\", not %q", a.Action, a.Text)
	}
	return combos[0], nil
}

// chunkText cuts s into pieces of at most n bytes on rune boundaries.
func chunkText(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// parseKeys parses xdotool-style key names: combinations of keys joined by "+", several
// combinations separated by spaces ("ctrl+a Delete"). Each combination is the DOM codes to
// press in order (and release in reverse).
func parseKeys(s string) ([][]string, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, badAction("key needs text naming the keys, like \"ctrl+s\" or \"Return\"")
	}
	if len(fields) > 64 {
		return nil, badAction("key takes at most 64 combinations, got %d", len(fields))
	}
	var combos [][]string
	for _, f := range fields {
		var codes []string
		names := strings.Split(f, "+")
		if f == "+" {
			names = []string{"plus"}
		} else if rest, ok := strings.CutSuffix(f, "++"); ok { // "ctrl++": the plus key itself
			names = append(strings.Split(rest, "+"), "plus")
		}
		for _, name := range names {
			cs, err := keyCodes(name)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				if !contains(codes, c) {
					codes = append(codes, c)
				}
			}
		}
		combos = append(combos, codes)
	}
	return combos, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// keyCodes maps one xdotool key name (an X keysym name, case-insensitive, or a single
// character) to DOM KeyboardEvent.code values: the key, after Shift when the character
// needs it on a US layout.
func keyCodes(name string) ([]string, error) {
	if name == "" {
		return nil, badAction("empty key name in a combination (like \"ctrl+\")")
	}
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		switch {
		case r >= 'a' && r <= 'z':
			return []string{"Key" + string(r-'a'+'A')}, nil
		case r >= 'A' && r <= 'Z':
			return []string{"ShiftLeft", "Key" + string(r)}, nil
		case r >= '0' && r <= '9':
			return []string{"Digit" + string(r)}, nil
		}
		if c, ok := punct[r]; ok {
			return []string{c}, nil
		}
		if c, ok := shifted[r]; ok {
			return []string{"ShiftLeft", c}, nil
		}
	}
	lower := strings.ToLower(name)
	if r, ok := keysymChars[lower]; ok {
		return keyCodes(string(r))
	}
	if c, ok := keyNames[lower]; ok {
		return []string{c}, nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(lower, "f")); err == nil && strings.HasPrefix(lower, "f") && n >= 1 && n <= 24 {
		return []string{"F" + strconv.Itoa(n)}, nil
	}
	if rest, ok := strings.CutPrefix(lower, "kp_"); ok && len(rest) == 1 && rest[0] >= '0' && rest[0] <= '9' {
		return []string{"Numpad" + rest}, nil
	}
	return nil, badAction("unknown key %q (use xdotool names like ctrl, shift, alt, super, Return, Tab, Escape, BackSpace, Delete, Page_Down, Up, F5, a)", name)
}

// keyNames maps lower-case X keysym names and common aliases to DOM codes.
var keyNames = map[string]string{
	"ctrl": "ControlLeft", "control": "ControlLeft", "control_l": "ControlLeft", "ctrl_l": "ControlLeft",
	"control_r": "ControlRight", "ctrl_r": "ControlRight",
	"shift": "ShiftLeft", "shift_l": "ShiftLeft", "shift_r": "ShiftRight",
	"alt": "AltLeft", "alt_l": "AltLeft", "alt_r": "AltRight", "meta": "MetaLeft", "meta_l": "MetaLeft",
	"meta_r": "MetaRight", "option": "AltLeft", "altgr": "AltRight", "iso_level3_shift": "AltRight",
	"super": "MetaLeft", "super_l": "MetaLeft", "super_r": "MetaRight", "win": "MetaLeft",
	"cmd": "MetaLeft", "command": "MetaLeft", "hyper_l": "MetaLeft",
	"return": "Enter", "enter": "Enter", "kp_enter": "NumpadEnter", "tab": "Tab", "iso_left_tab": "Tab",
	"escape": "Escape", "esc": "Escape", "backspace": "Backspace", "delete": "Delete", "del": "Delete",
	"insert": "Insert", "home": "Home", "end": "End",
	"page_up": "PageUp", "pageup": "PageUp", "prior": "PageUp",
	"page_down": "PageDown", "pagedown": "PageDown", "next": "PageDown",
	"up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
	"space": "Space", "caps_lock": "CapsLock", "num_lock": "NumLock", "scroll_lock": "ScrollLock",
	"print": "PrintScreen", "sys_req": "PrintScreen", "pause": "Pause", "break": "Pause", "menu": "ContextMenu",
	"minus": "Minus", "equal": "Equal", "bracketleft": "BracketLeft", "bracketright": "BracketRight",
	"backslash": "Backslash", "semicolon": "Semicolon", "apostrophe": "Quote", "quoteright": "Quote",
	"grave": "Backquote", "quoteleft": "Backquote", "comma": "Comma", "period": "Period", "slash": "Slash",
	"kp_add": "NumpadAdd", "kp_subtract": "NumpadSubtract", "kp_multiply": "NumpadMultiply",
	"kp_divide": "NumpadDivide", "kp_decimal": "NumpadDecimal", "kp_equal": "NumpadEqual",
	"xf86audioraisevolume": "AudioVolumeUp", "xf86audiolowervolume": "AudioVolumeDown", "xf86audiomute": "AudioVolumeMute",
}

// keysymChars are X keysym names of punctuation typed with Shift on a US layout.
var keysymChars = map[string]rune{"plus": '+', "exclam": '!', "at": '@', "numbersign": '#',
	"dollar": '$', "percent": '%', "asciicircum": '^', "ampersand": '&', "asterisk": '*',
	"parenleft": '(', "parenright": ')', "underscore": '_', "braceleft": '{', "braceright": '}',
	"bar": '|', "colon": ':', "quotedbl": '"', "asciitilde": '~', "less": '<', "greater": '>',
	"question": '?'}

// punct and shifted are the US layout's punctuation keys.
var (
	punct = map[rune]string{'-': "Minus", '=': "Equal", '[': "BracketLeft", ']': "BracketRight",
		'\\': "Backslash", ';': "Semicolon", '\'': "Quote", '`': "Backquote", ',': "Comma", '.': "Period",
		'/': "Slash", ' ': "Space"}
	shifted = map[rune]string{'!': "Digit1", '@': "Digit2", '#': "Digit3", '$': "Digit4", '%': "Digit5",
		'^': "Digit6", '&': "Digit7", '*': "Digit8", '(': "Digit9", ')': "Digit0", '_': "Minus", '+': "Equal",
		'{': "BracketLeft", '}': "BracketRight", '|': "Backslash", ':': "Semicolon", '"': "Quote", '~': "Backquote",
		'<': "Comma", '>': "Period", '?': "Slash"}
)

// audit records a computer-use call.
func (s *Service) audit(agent api.Agent, v Viewer, action, detail string, err error) {
	if err != nil {
		detail += ": refused: " + err.Error()
	}
	if f := s.cfg.OnCall; f != nil {
		f(agent, v, action, detail)
	}
}

// Screenshot returns the display's whole screen in format (EncPNG or EncJPEG; 0 = PNG),
// scaled to scale percent (1-100; 0 = 100), through the helper. Audited.
func (s *Service) Screenshot(ctx context.Context, agent api.Agent, v Viewer, format, scale uint8) (Screenshot, error) {
	shot, err := s.screenshot(ctx, agent, format, scale)
	s.audit(agent, v, "screenshot", fmt.Sprintf("format %d scale %d%%", format, scale), err)
	return shot, err
}

func (s *Service) screenshot(ctx context.Context, agent api.Agent, format, scale uint8) (Screenshot, error) {
	if format == 0 {
		format = EncPNG
	}
	if format != EncPNG && format != EncJPEG {
		return Screenshot{}, badAction("screenshot format %d is neither JPEG (1) nor PNG (2)", format)
	}
	if scale > 100 {
		return Screenshot{}, badAction("scale %d%% is over 100", scale)
	}
	use, err := s.acquire(agent)
	if err != nil {
		return Screenshot{}, err
	}
	defer use.Release()
	return use.Hub.screenshot(ctx, format, scale)
}

func (h *hub) screenshot(ctx context.Context, format, scale uint8) (Screenshot, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, shotTimeout, ErrTimeout)
	defer cancel()
	if err := h.waitScreen(ctx); err != nil {
		return Screenshot{}, err
	}
	ch := make(chan shotReply, 1)
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return Screenshot{}, h.endErr
	}
	if len(h.shots) >= maxShotsInFlight {
		h.mu.Unlock()
		return Screenshot{}, fmt.Errorf("%w: %d screenshots of this desktop are already being taken", ErrBusy, maxShotsInFlight)
	}
	// Queued and sent under one lock: replies come back in the order of the requests.
	if !h.trySendLocked(Encode(ScreenshotRequest{Format: format, Scale: scale})) {
		h.mu.Unlock()
		return Screenshot{}, fmt.Errorf("%w: the desktop helper is not keeping up", ErrBusy)
	}
	h.shots = append(h.shots, ch)
	h.mu.Unlock()
	select {
	case r := <-ch:
		if r.err == nil && r.shot.Format != format {
			r.err = fmt.Errorf("%w: asked for a screenshot in format %d, got %d", ErrBadHelper, format, r.shot.Format)
		}
		return r.shot, r.err
	case <-ctx.Done():
		return Screenshot{}, context.Cause(ctx)
	}
}

// Action runs one computer-use step as v (an agent token or a person with drive). Input is
// refused with a *ControlHeldError (errors.Is ErrControlHeld) while a person holds control;
// otherwise the agent's API shows as the driver until AgentHold after its last input. Bad
// input is an ErrBadAction naming the problem. Audited.
func (s *Service) Action(ctx context.Context, agent api.Agent, v Viewer, a Action) (ActionResult, error) {
	res, err := s.action(ctx, agent, v, a)
	detail := a.Action
	switch a.Action {
	case "type":
		detail += fmt.Sprintf(" (%d bytes)", len(a.Text))
	case "key":
		detail += " " + strconv.Quote(cut(a.Text, 64))
	}
	if a.Coordinate != nil {
		detail += fmt.Sprintf(" at %v", a.Coordinate)
	}
	s.audit(agent, v, "action", detail, err)
	return res, err
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return chunkText(s, n)[0] + "…"
}

func (s *Service) action(ctx context.Context, agent api.Agent, v Viewer, a Action) (ActionResult, error) {
	switch a.Action {
	case "":
		return ActionResult{}, badAction("missing \"action\" (known: %s)", actionNames)
	case "screenshot":
		shot, err := s.screenshot(ctx, agent, EncPNG, 100)
		if err != nil {
			return ActionResult{}, err
		}
		return ActionResult{Image: shot.Data, MediaType: "image/png", Width: int(shot.W), Height: int(shot.H)}, nil
	case "wait":
		if a.Duration < 0 {
			return ActionResult{}, badAction("wait duration %g is negative", a.Duration)
		}
		d := min(time.Duration(a.Duration*float64(time.Second)), s.cfg.MaxWait)
		if a.Duration == 0 {
			d = time.Second
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ActionResult{}, context.Cause(ctx)
		case <-s.ctx.Done():
			return ActionResult{}, ErrClosed
		}
		return ActionResult{}, nil
	}
	if isInputAction(a.Action) && ModeOf(v.Mode) != ModeDrive {
		return ActionResult{}, fmt.Errorf("%w: %s may only watch this desktop", ErrWatchOnly, v.Name)
	}
	// Catch an unknown action or a bad field before reaching the helper.
	if a.Action != "cursor_position" {
		probe := pointerState{screen: Screen{W: MaxDisplayW, H: MaxDisplayH}, hasPos: true}
		if _, _, err := translate(a, probe); err != nil {
			return ActionResult{}, err
		}
	}
	use, err := s.acquire(agent)
	if err != nil {
		return ActionResult{}, err
	}
	defer use.Release()
	h := use.Hub
	wctx, cancel := context.WithTimeoutCause(ctx, openTimeout, ErrTimeout)
	err = h.waitScreen(wctx)
	cancel()
	if err != nil {
		return ActionResult{}, err
	}
	if a.Action == "cursor_position" {
		h.mu.Lock()
		p, ok := h.cursorPos, h.haveCursor
		h.mu.Unlock()
		if !ok {
			return ActionResult{}, fmt.Errorf("%w: the desktop has not reported the pointer's position yet", ErrHelper)
		}
		return ActionResult{Coordinate: []int{int(p.X), int(p.Y)}}, nil
	}
	h.mu.Lock()
	if c := h.holder; c.person() {
		h.mu.Unlock()
		return ActionResult{}, &ControlHeldError{Holder: c.label()}
	}
	st := pointerState{screen: h.model.screen, pos: h.cursorPos, hasPos: h.haveCursor, buttons: h.apiButtons}
	steps, buttons, err := translate(a, st)
	if err != nil {
		h.mu.Unlock()
		return ActionResult{}, err
	}
	h.holdForAgentLocked(v)
	h.apiButtons = buttons
	h.mu.Unlock()
	var to *CursorPos // where the action leaves the pointer
	for _, st := range steps {
		if err := h.agentInput(ctx, st.msg); err != nil {
			return ActionResult{}, err
		}
		switch m := st.msg.(type) {
		case Pointer:
			to = &CursorPos{X: m.X, Y: m.Y}
		case Wheel:
			to = &CursorPos{X: m.X, Y: m.Y}
		}
		if st.pause > 0 {
			t := time.NewTimer(st.pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ActionResult{}, context.Cause(ctx)
			}
		}
	}
	if to != nil {
		h.waitPointer(ctx, *to)
	}
	return ActionResult{}, nil
}

// waitPointer waits, at most pointerSettle, until the helper reports the pointer at p: an
// action that moved the pointer returns once the display has it there, so a cursor_position
// or a screenshot right after it sees the move. A pointer a program holds elsewhere (a grab,
// a warp) only costs the wait.
func (h *hub) waitPointer(ctx context.Context, p CursorPos) {
	t := time.NewTimer(pointerSettle)
	defer t.Stop()
	for {
		h.mu.Lock()
		if h.haveCursor && h.cursorPos == p {
			h.mu.Unlock()
			return
		}
		if h.cursorMoved == nil {
			h.cursorMoved = make(chan struct{})
		}
		moved := h.cursorMoved
		h.mu.Unlock()
		select {
		case <-moved:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		}
	}
}

// holdForAgentLocked shows the agent as the driver until AgentHold after its last input.
func (h *hub) holdForAgentLocked(v Viewer) {
	h.setHolderLocked(holder{agent: true, id: v.ID, name: v.Name})
	if h.agentTimer != nil {
		h.agentTimer.Stop()
	}
	h.agentGen++
	gen := h.agentGen
	h.agentTimer = time.AfterFunc(h.svc.cfg.AgentHold, func() {
		h.mu.Lock()
		if h.agentGen == gen && h.holder.agent && !h.ended {
			h.setHolderLocked(holder{})
		}
		h.mu.Unlock()
	})
}

// agentInput sends one frame of the agent's, unless a person took control meanwhile.
func (h *hub) agentInput(ctx context.Context, m Message) error {
	h.mu.Lock()
	if c := h.holder; c.person() {
		h.mu.Unlock()
		return &ControlHeldError{Holder: c.label()}
	}
	h.mu.Unlock()
	return h.send(ctx, Encode(m))
}

// HTTPStatus maps the errors of Screenshot and Action to an HTTP status.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrBadAction):
		return http.StatusBadRequest
	case errors.Is(err, ErrWatchOnly):
		return http.StatusForbidden
	case errors.Is(err, ErrControlHeld):
		return http.StatusConflict
	case errors.Is(err, ErrBusy), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, ErrHelper), errors.Is(err, ErrBadHelper):
		return http.StatusBadGateway
	case errors.Is(err, context.Canceled):
		return 499 // the client went away
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	writeJSON(w, HTTPStatus(err), api.Error{Error: err.Error()})
}

// serveScreenshot is GET /api/agents/:id/desktop/screenshot?format=png|jpeg&scale=1-100.
func (s *Service) serveScreenshot(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer) {
	q := r.URL.Query()
	var format uint8
	switch f := strings.ToLower(q.Get("format")); f {
	case "", "png":
		format = EncPNG
	case "jpeg", "jpg":
		format = EncJPEG
	default:
		writeErr(w, badAction("format %q is neither png nor jpeg", f))
		return
	}
	var scale uint8
	if sc := q.Get("scale"); sc != "" {
		n, err := strconv.Atoi(sc)
		if err != nil || n < 1 || n > 100 {
			writeErr(w, badAction("scale %q is not a percentage from 1 to 100", sc))
			return
		}
		scale = uint8(n)
	}
	shot, err := s.Screenshot(r.Context(), agent, v, format, scale)
	if err != nil {
		writeErr(w, err)
		return
	}
	ct := "image/png"
	if shot.Format == EncJPEG {
		ct = "image/jpeg"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(shot.Data)))
	w.Write(shot.Data)
}

// maxActionBody bounds a POST actions body (type's text is at most this).
const maxActionBody = 1 << 20

// serveAction is POST /api/agents/:id/desktop/actions with an Action as JSON.
func (s *Service) serveAction(w http.ResponseWriter, r *http.Request, agent api.Agent, v Viewer) {
	var a Action
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		writeErr(w, badAction("the body is not an action: %v", err))
		return
	}
	res, err := s.Action(r.Context(), agent, v, a)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
