package app

import (
	"reflect"
	"testing"
	"time"

	"github.com/porthole/porthole/browser"
	"github.com/porthole/porthole/desktop"
)

// bvRecorder is a bvSink that records what the client did.
type bvRecorder struct {
	sent    []browser.Message
	sizes   [][2]int
	ends    []uint32
	capture bool
}

func (r *bvRecorder) sendBV(m browser.Message)                 { r.sent = append(r.sent, m) }
func (r *bvRecorder) setSize(w, h int)                         { r.sizes = append(r.sizes, [2]int{w, h}) }
func (r *bvRecorder) setView(v deskView)                       {}
func (r *bvRecorder) frameEnd(seq uint32)                      { r.ends = append(r.ends, seq) }
func (r *bvRecorder) cursorShape(c desktop.CursorShape)        {}
func (r *bvRecorder) cursorPos(x, y int, local bool)           {}
func (r *bvRecorder) setCapture(on bool)                       { r.capture = on }
func (r *bvRecorder) after(d time.Duration, f func(time.Time)) {}

func (r *bvRecorder) take() []browser.Message {
	s := r.sent
	r.sent = nil
	return s
}

// connectedBV is a client that said Hello as a driver and shows an 800×600 page in a
// 800×600 viewport (scale 1).
func connectedBV(t *testing.T, mode browser.Mode) (*bvClient, *bvRecorder) {
	r := &bvRecorder{}
	c := newBVClient(r, mode)
	c.handle(browser.Hello{Version: 1, Mode: mode, ViewerID: "u1#1", ViewerName: "alice"})
	c.desk.viewport(800, 600)
	c.handle(browser.Frame{Seq: 1, W: 800, H: 600, Data: []byte{1}})
	return c, r
}

func TestBVFrameDrawsAndAcks(t *testing.T) {
	c, r := connectedBV(t, browser.ModeWatch)
	if !reflect.DeepEqual(r.sizes, [][2]int{{800, 600}}) || !reflect.DeepEqual(r.ends, []uint32{1}) {
		t.Fatalf("sizes %v ends %v, want the page's size once and frame 1 ended", r.sizes, r.ends)
	}
	c.handle(browser.Frame{Seq: 2, W: 800, H: 600, Data: []byte{1}})
	if len(r.sizes) != 1 {
		t.Errorf("the same page size set the canvas again: %v", r.sizes)
	}
	c.desk.drawn(2)
	if got := r.take(); !reflect.DeepEqual(got, []browser.Message{browser.Ack{Seq: 2}}) {
		t.Errorf("drawn(2) sent %v, want Ack 2", got)
	}
}

func TestBVWatcherSendsNoInput(t *testing.T) {
	c, r := connectedBV(t, browser.ModeWatch)
	c.desk.mouse(10, 10, 1)
	c.desk.key(true, "KeyA")
	c.navigate("example.org")
	c.command(browser.TabNew{})
	c.desk.takeControl()
	if got := r.take(); len(got) != 0 {
		t.Errorf("a watcher's client sent %v", got)
	}
}

func TestBVDriverInputMapping(t *testing.T) {
	c, r := connectedBV(t, browser.ModeDrive)
	c.desk.takeControl()
	if got := r.take(); !reflect.DeepEqual(got, []browser.Message{browser.TakeControl{}}) {
		t.Fatalf("take control sent %v", got)
	}
	c.handle(browser.Control{HolderID: "u1#1", HolderName: "alice", Automating: true})
	if !c.desk.holding() || !r.capture {
		t.Fatal("not holding control after Control names us")
	}
	c.desk.key(true, "ShiftLeft")
	c.desk.mouse(100, 50, 1)
	c.desk.mouse(100, 50, 0)
	c.desk.key(false, "ShiftLeft")
	c.desk.wheelEvent(10, 10, 0, 250, 0)
	want := []browser.Message{
		browser.Key{Down: true, Code: "ShiftLeft", Modifiers: browser.ModShift},
		browser.Pointer{X: 100, Y: 50, Buttons: browser.ButtonLeft, Modifiers: browser.ModShift},
		browser.Pointer{X: 100, Y: 50, Modifiers: browser.ModShift},
		browser.Key{Code: "ShiftLeft"},
		browser.Wheel{X: 10, Y: 10, DY: 200}, // two whole notches of 100 px
	}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("input sent\n%v\nwant\n%v", got, want)
	}
	if !c.navigate(" example.org ") || !reflect.DeepEqual(r.take(), []browser.Message{browser.Navigate{URL: "example.org"}}) {
		t.Error("navigate did not send the address")
	}
	if c.answerDialog(true, "x") {
		t.Error("answered a dialog that is not open")
	}
	c.handle(browser.Dialog{Open: true, Type: "prompt", Message: "name?"})
	if !c.answerDialog(true, "bob") || !reflect.DeepEqual(r.take(), []browser.Message{browser.DialogAnswer{Accept: true, Prompt: "bob"}}) {
		t.Error("the dialog's answer was not sent")
	}
	if got := c.controlText(); got != "You have control; the agent's automation is connected (its input is refused meanwhile)" {
		t.Errorf("control text %q", got)
	}
}

func TestBVSelectChoose(t *testing.T) {
	c, r := connectedBV(t, browser.ModeDrive)
	c.handle(browser.Control{HolderID: "u1#1"})
	if c.choose(0) {
		t.Error("chose in a popup that is not open")
	}
	c.handle(browser.SelectPopup{Open: true, Selected: 0, Options: []browser.SelectOption{{Label: "a"}, {Label: "b", Disabled: true}, {Label: "c"}}})
	if c.choose(1) {
		t.Error("chose a disabled option")
	}
	if !c.choose(2) || !reflect.DeepEqual(r.take(), []browser.Message{browser.SelectChoose{Index: 2}}) || c.sel.Open {
		t.Error("choosing option 2 did not send it and close the popup")
	}
}

func TestBVDownloadText(t *testing.T) {
	for _, c := range []struct {
		d    browser.DownloadInfo
		want string
	}{
		{browser.DownloadInfo{Name: "a.zip", Received: 1536, Total: 3 << 20, State: browser.DownloadProgress}, "a.zip — 1.5 KB of 3 MB"},
		{browser.DownloadInfo{Name: "b.txt", Received: 12, State: browser.DownloadCompleted}, "b.txt — done (12 B)"},
		{browser.DownloadInfo{Name: "c", State: browser.DownloadCanceled}, "c — canceled"},
	} {
		if got := downloadText(c.d); got != c.want {
			t.Errorf("downloadText(%+v) = %q, want %q", c.d, got, c.want)
		}
	}
}
