//go:build !js

package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseKeys(t *testing.T) {
	cases := []struct {
		in   string
		want [][]string
	}{
		{"ctrl+s", [][]string{{"ControlLeft", "KeyS"}}},
		{"Return", [][]string{{"Enter"}}},
		{"super", [][]string{{"MetaLeft"}}},
		{"Page_Down", [][]string{{"PageDown"}}},
		{"BackSpace", [][]string{{"Backspace"}}},
		{"F5", [][]string{{"F5"}}},
		{"f12", [][]string{{"F12"}}},
		{"a", [][]string{{"KeyA"}}},
		{"A", [][]string{{"ShiftLeft", "KeyA"}}},
		{"shift+A", [][]string{{"ShiftLeft", "KeyA"}}},
		{"ctrl+shift+t", [][]string{{"ControlLeft", "ShiftLeft", "KeyT"}}},
		{"alt+Tab", [][]string{{"AltLeft", "Tab"}}},
		{"Escape", [][]string{{"Escape"}}},
		{"ctrl+a Delete", [][]string{{"ControlLeft", "KeyA"}, {"Delete"}}},
		{"ctrl++", [][]string{{"ControlLeft", "ShiftLeft", "Equal"}}},
		{"plus", [][]string{{"ShiftLeft", "Equal"}}},
		{"KP_5", [][]string{{"Numpad5"}}},
		{"Up", [][]string{{"ArrowUp"}}},
		{"space", [][]string{{"Space"}}},
		{"5", [][]string{{"Digit5"}}},
		{"/", [][]string{{"Slash"}}},
		{"?", [][]string{{"ShiftLeft", "Slash"}}},
		{"question", [][]string{{"ShiftLeft", "Slash"}}},
		{"Next", [][]string{{"PageDown"}}},
	}
	for _, c := range cases {
		got, err := parseKeys(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseKeys(%q) = %v, %v, want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "Hyperdrive", "ctrl+", "F25", "ctrl+Bogus_Key"} {
		_, err := parseKeys(bad)
		if !errors.Is(err, ErrBadAction) {
			t.Errorf("parseKeys(%q) err = %v, want ErrBadAction", bad, err)
		}
	}
	if _, err := parseKeys("ctrl+Bogus_Key"); err == nil || !strings.Contains(err.Error(), `"Bogus_Key"`) {
		t.Errorf("the error does not name the unknown key: %v", err)
	}
}

func TestTranslate(t *testing.T) {
	st := pointerState{screen: Screen{W: 1280, H: 800}, pos: CursorPos{X: 5, Y: 6}, hasPos: true}
	L, R, M := ButtonLeft, ButtonRight, ButtonMiddle
	cases := []struct {
		a    Action
		want []Message
	}{
		{Action{Action: "mouse_move", Coordinate: []int{100, 200}}, []Message{Pointer{X: 100, Y: 200}}},
		{Action{Action: "left_click", Coordinate: []int{1, 2}}, []Message{Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}}},
		{Action{Action: "left_click"}, []Message{Pointer{X: 5, Y: 6}, Pointer{X: 5, Y: 6, Buttons: L}, Pointer{X: 5, Y: 6}}},
		{Action{Action: "right_click", Coordinate: []int{1, 2}}, []Message{Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: R}, Pointer{X: 1, Y: 2}}},
		{Action{Action: "middle_click", Coordinate: []int{1, 2}}, []Message{Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: M}, Pointer{X: 1, Y: 2}}},
		{Action{Action: "double_click", Coordinate: []int{1, 2}}, []Message{Pointer{X: 1, Y: 2},
			Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}}},
		{Action{Action: "triple_click", Coordinate: []int{1, 2}}, []Message{Pointer{X: 1, Y: 2},
			Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2},
			Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}}},
		{Action{Action: "left_click", Coordinate: []int{1, 2}, Text: "shift"}, []Message{Key{Down: true, Code: "ShiftLeft"},
			Pointer{X: 1, Y: 2}, Pointer{X: 1, Y: 2, Buttons: L}, Pointer{X: 1, Y: 2}, Key{Code: "ShiftLeft"}}},
		{Action{Action: "left_click_drag", StartCoordinate: []int{10, 20}, Coordinate: []int{30, 40}}, []Message{
			Pointer{X: 10, Y: 20}, Pointer{X: 10, Y: 20, Buttons: L}, Pointer{X: 20, Y: 30, Buttons: L},
			Pointer{X: 30, Y: 40, Buttons: L}, Pointer{X: 30, Y: 40}}},
		{Action{Action: "left_mouse_down"}, []Message{Pointer{X: 5, Y: 6, Buttons: L}}},
		{Action{Action: "left_mouse_up", Coordinate: []int{7, 8}}, []Message{Pointer{X: 7, Y: 8}}},
		{Action{Action: "scroll", Coordinate: []int{50, 60}, ScrollDirection: "down", ScrollAmount: 5}, []Message{Pointer{X: 50, Y: 60}, Wheel{X: 50, Y: 60, DY: 5}}},
		{Action{Action: "scroll", Coordinate: []int{50, 60}, ScrollDirection: "up"}, []Message{Pointer{X: 50, Y: 60}, Wheel{X: 50, Y: 60, DY: -3}}},
		{Action{Action: "scroll", Coordinate: []int{50, 60}, ScrollDirection: "left", ScrollAmount: 2}, []Message{Pointer{X: 50, Y: 60}, Wheel{X: 50, Y: 60, DX: -2}}},
		{Action{Action: "scroll", Coordinate: []int{50, 60}, ScrollDirection: "right", ScrollAmount: 1, Text: "ctrl"}, []Message{
			Key{Down: true, Code: "ControlLeft"}, Pointer{X: 50, Y: 60}, Wheel{X: 50, Y: 60, DX: 1}, Key{Code: "ControlLeft"}}},
		{Action{Action: "key", Text: "ctrl+s"}, []Message{Key{Down: true, Code: "ControlLeft"}, Key{Down: true, Code: "KeyS"}, Key{Code: "KeyS"}, Key{Code: "ControlLeft"}}},
		{Action{Action: "key", Text: "Return"}, []Message{Key{Down: true, Code: "Enter"}, Key{Code: "Enter"}}},
		{Action{Action: "type", Text: "héllo"}, []Message{Text{Text: "héllo"}}},
	}
	for _, c := range cases {
		steps, _, err := translate(c.a, st)
		var got []Message
		for _, s := range steps {
			got = append(got, s.msg)
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("translate(%+v) = %v, %v, want %v", c.a, got, err, c.want)
		}
	}

	long := strings.Repeat("é", MaxText) // 2 bytes each: two full Text frames
	steps, _, err := translate(Action{Action: "type", Text: long}, st)
	if err != nil || len(steps) != 2 || steps[0].msg.(Text).Text+steps[1].msg.(Text).Text != long || len(steps[0].msg.(Text).Text) > MaxText {
		t.Errorf("type of %d bytes: %d steps, %v; want 2 chunks of at most %d bytes", len(long), len(steps), err, MaxText)
	}

	bad := []struct {
		a    Action
		want string
	}{
		{Action{Action: "fly"}, `unknown action "fly"`},
		{Action{Action: "mouse_move"}, "coordinate must be [x, y]"},
		{Action{Action: "mouse_move", Coordinate: []int{1280, 0}}, "[1280, 0] is outside the 1280x800 display"},
		{Action{Action: "left_click", Coordinate: []int{-1, 0}}, "outside"},
		{Action{Action: "left_click_drag", Coordinate: []int{1, 1}}, "needs start_coordinate"},
		{Action{Action: "scroll", Coordinate: []int{1, 1}, ScrollDirection: "sideways"}, `scroll_direction "sideways"`},
		{Action{Action: "scroll", Coordinate: []int{1, 1}, ScrollDirection: "up", ScrollAmount: 1000}, "scroll_amount 1000"},
		{Action{Action: "key", Text: "ctrl+Bogus"}, `unknown key "Bogus"`},
		{Action{Action: "key"}, "key needs text"},
		{Action{Action: "type"}, "type needs text"},
		{Action{Action: "left_click", Text: "ctrl shift"}, "one combination"},
	}
	for _, c := range bad {
		_, _, err := translate(c.a, st)
		if !errors.Is(err, ErrBadAction) || !strings.Contains(err.Error(), c.want) || HTTPStatus(err) != http.StatusBadRequest {
			t.Errorf("translate(%+v) err = %v, want a 400 containing %q", c.a, err, c.want)
		}
	}
	if _, _, err := translate(Action{Action: "left_click"}, pointerState{screen: st.screen}); !errors.Is(err, ErrBadAction) {
		t.Errorf("a click without coordinate nor known pointer: err = %v, want ErrBadAction", err)
	}
}

// serveShots answers screenshot requests, reports the pointer where input moved it (as the
// real helper does once it replayed the move), and records the rest, until the stream closes.
func serveShots(f *fakeHelper, data []byte, input chan<- Message) {
	for {
		var m Message
		select {
		case m = <-f.in:
		case <-f.done:
			return
		}
		switch m := m.(type) {
		case ScreenshotRequest:
			f.send(Screenshot{Format: m.Format, W: 640, H: 400, Data: data})
		case Lag:
		default:
			input <- m
			switch p := m.(type) {
			case Pointer:
				f.send(CursorPos{X: p.X, Y: p.Y})
			case Wheel:
				f.send(CursorPos{X: p.X, Y: p.Y})
			}
		}
	}
}

func post(t *testing.T, e *testEnv, v Viewer, body string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/api/agents/a1/desktop/actions", strings.NewReader(body))
	e.svc.serveAction(w, r, e.agent, v)
	var out map[string]any
	json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// The computer-use API: refused with 409 naming the holder while a person holds control;
// otherwise its input reaches the helper and everyone sees the agent drive. Every call is
// audited.
func TestComputerUse(t *testing.T) {
	e := newEnv(t, Config{AgentHold: 300 * time.Millisecond, MaxWait: 50 * time.Millisecond})
	alice := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 1280, H: 800})
	f.send(CursorPos{X: 9, Y: 9})
	input := make(chan Message, 64)
	go serveShots(f, []byte("\x89PNG fake"), input) // exits when the env closes the stream
	agentV := Viewer{ID: "token:t1", Name: "alice (agent token)", Mode: "drive", Token: "t1"}

	alice.send(TakeControl{})
	alice.wait("alice holds control", holderIs("alice", false))
	code, out := post(t, e, agentV, `{"action":"left_click","coordinate":[10,20]}`)
	if code != http.StatusConflict || !strings.Contains(out["error"].(string), "alice holds control") {
		t.Fatalf("action while alice drives: %d %v, want 409 naming alice", code, out)
	}
	_, err := e.svc.Action(context.Background(), e.agent, agentV, Action{Action: "type", Text: "x"})
	var held *ControlHeldError
	if !errors.As(err, &held) || held.Holder != "alice" || !errors.Is(err, ErrControlHeld) {
		t.Fatalf("Action err = %v, want a ControlHeldError naming alice", err)
	}
	select {
	case m := <-input:
		t.Fatalf("the helper got %+v while a person held control", m)
	case <-time.After(100 * time.Millisecond):
	}

	alice.send(ReleaseControl{})
	alice.wait("nobody holds control", holderIs("", false))
	code, out = post(t, e, agentV, `{"action":"left_click","coordinate":[10,20]}`)
	if code != http.StatusOK {
		t.Fatalf("action: %d %v", code, out)
	}
	for _, want := range []Message{Pointer{X: 10, Y: 20}, Pointer{X: 10, Y: 20, Buttons: ButtonLeft}, Pointer{X: 10, Y: 20}} {
		select {
		case m := <-input:
			if m != want {
				t.Fatalf("helper got %+v, want %+v", m, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the click did not reach the helper")
		}
	}
	alice.wait("the agent drives", holderIs("token:t1", true))
	alice.wait("the agent's hold expires", holderIs("", false))

	// A person takes control from the agent at any time.
	post(t, e, agentV, `{"action":"key","text":"ctrl+s"}`)
	alice.wait("the agent drives", holderIs("token:t1", true))
	alice.send(TakeControl{})
	alice.wait("alice took control from the agent", holderIs("alice", false))
	alice.send(ReleaseControl{})
	alice.wait("nobody holds control", holderIs("", false))

	for body, want := range map[string]string{
		`{"action":"mouse_move","coordinate":[5000,1]}`: "outside the 1280x800 display",
		`{"action":"bogus"}`:                            `unknown action "bogus"`,
		`{}`:                                            `missing "action"`,
		`{"action":"key","text":"ctrl+Nope"}`:           `unknown key "Nope"`,
		`{"action":"left_click","coordinate":"x"}`:      "not an action",
		`{"action":"type","txt":"x"}`:                   "not an action",
	} {
		if code, out := post(t, e, agentV, body); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), want) {
			t.Errorf("POST %s: %d %v, want 400 with %q", body, code, out, want)
		}
	}
	watcher := agentV
	watcher.Mode = "watch"
	if _, err := e.svc.Action(context.Background(), e.agent, watcher, Action{Action: "type", Text: "x"}); HTTPStatus(err) != http.StatusForbidden {
		t.Errorf("a watcher's action: %v, want 403", err)
	}

	// The pointer is where the agent's last click left it (the helper reported it at 9,9 first).
	code, out = post(t, e, agentV, `{"action":"cursor_position"}`)
	if code != http.StatusOK || !reflect.DeepEqual(out["coordinate"], []any{10.0, 20.0}) {
		t.Errorf("cursor_position: %d %v, want [10 20]", code, out)
	}
	start := time.Now()
	if code, _ := post(t, e, agentV, `{"action":"wait","duration":100}`); code != http.StatusOK || time.Since(start) > 2*time.Second {
		t.Errorf("wait: %d after %v, want 200 capped at MaxWait", code, time.Since(start))
	}
	code, out = post(t, e, agentV, `{"action":"screenshot"}`)
	if code != http.StatusOK || out["image"] != "iVBORyBmYWtl" || out["media_type"] != "image/png" {
		t.Errorf("screenshot action: %d %v", code, out)
	}

	w := httptest.NewRecorder()
	e.svc.serveScreenshot(w, httptest.NewRequest("GET", "/x?format=jpeg&scale=50", nil), e.agent, agentV)
	if w.Code != 200 || w.Header().Get("Content-Type") != "image/jpeg" || w.Body.String() != "\x89PNG fake" {
		t.Errorf("GET screenshot: %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	for _, q := range []string{"format=gif", "scale=0", "scale=101", "scale=x"} {
		w := httptest.NewRecorder()
		e.svc.serveScreenshot(w, httptest.NewRequest("GET", "/x?"+q, nil), e.agent, agentV)
		if w.Code != http.StatusBadRequest {
			t.Errorf("GET screenshot?%s: %d, want 400", q, w.Code)
		}
	}

	var audits []string
	for len(e.audit) > 0 {
		audits = append(audits, <-e.audit)
	}
	joined := strings.Join(audits, "\n")
	for _, want := range []string{"a1 token:t1 action: left_click at [10 20]: refused: alice holds control",
		"a1 token:t1 action: left_click at [10 20]\n", "a1 token:t1 screenshot: format 1 scale 50%", `action: key "ctrl+s"`} {
		if !strings.Contains(joined+"\n", want) {
			t.Errorf("audit log lacks %q:\n%s", want, joined)
		}
	}
}

// A helper that never answers a screenshot: the call times out instead of hanging, and a
// helper that is gone fails the call with ErrHelper.
func TestScreenshotHelperGone(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.dial("alice", "drive", "")
	f := e.helper()
	f.send(Screen{W: 64, H: 64})
	a.wait("a keyframe", func(st *viewState) bool { return st.frameEnds >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.svc.Screenshot(ctx, e.agent, Viewer{ID: "alice", Mode: "drive"}, EncPNG, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("screenshot from a silent helper: %v, want a deadline", err)
	}
	go func() { time.Sleep(50 * time.Millisecond); f.conn.Close() }()
	_, err := e.svc.Screenshot(context.Background(), e.agent, Viewer{ID: "alice", Mode: "drive"}, EncPNG, 0)
	if HTTPStatus(err) != http.StatusBadGateway {
		t.Fatalf("screenshot from a helper that left: %v (status %d), want 502", err, HTTPStatus(err))
	}
}
