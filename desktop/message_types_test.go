package desktop

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func sampleMessages() []Message {
	return []Message{
		Pointer{X: 10, Y: 20, Buttons: ButtonLeft | ButtonRight},
		Wheel{X: 1, Y: 2, DX: -3, DY: 4},
		Key{Down: true, Code: "ControlLeft"},
		Key{Down: false, Code: "KeyA"},
		Text{Text: "héllo ✓"},
		Ack{Seq: 42},
		TakeControl{},
		ReleaseControl{},
		ResizeRequest{W: 1920, H: 1080},
		SetClipboard{Text: "copied"},
		Refresh{},
		ScreenshotRequest{Format: EncPNG, Scale: 50},
		Lag{Frames: 3},
		Hello{Version: ProtocolVersion, Mode: ModeDrive, ViewerID: "u1", ViewerName: "alice"},
		Screen{W: 1280, H: 800},
		Rect{X: 64, Y: 128, W: 64, H: 64, Enc: EncJPEG, Flags: RectScaled, Data: []byte{0xff, 0xd8, 0xff, 0xd9}},
		FrameEnd{Seq: 7},
		CursorShape{W: 2, H: 1, HotX: 1, HotY: 0, RGBA: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		CursorPos{X: 100, Y: 200},
		Control{HolderID: "token:t1", HolderName: "alice (agent token)", Agent: true},
		Control{},
		Viewers{Viewers: []ViewerInfo{{ID: "u1", Name: "alice", Mode: ModeDrive}, {ID: "u2", Name: "bob", Mode: ModeWatch}}},
		Clipboard{Text: "from the display"},
		ErrorMsg{Code: ErrCodeNotHolder, Message: "bob holds control"},
		ModeMsg{Mode: ModeWatch},
		Screenshot{Format: EncJPEG, W: 640, H: 400, Data: []byte{0xff, 0xd8}},
		// Appended (the fuzz corpus files are numbered in this order).
		Copy{SrcX: 100, SrcY: 200, X: 108, Y: 199, W: 640, H: 400},
		ClipRect{CX: 0, CY: 300, CW: 632, CH: 100, X: -8, Y: 290, W: 640, H: 400, Enc: EncPalette, Data: []byte{1, 0, 0, 0, 255, 255, 255, 0, 0xaa}},
		Rect{X: 1, Y: 2, W: 3, H: 4, Enc: EncPalette, Data: []byte{0, 10, 20, 30}},
		ClipboardCut{Size: 2 << 20},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := Encode(m)
		got, err := Decode(b)
		if err != nil {
			t.Errorf("Decode(Encode(%#v)) error %v", m, err)
			continue
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("Decode(Encode(%#v)) = %#v", m, got)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	long := strings.Repeat("x", MaxText+1)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty frame"},
		{"unknown opcode", []byte{0x7e}, "unknown opcode 0x7e"},
		{"truncated pointer", []byte{byte(OpPointer), 0, 1}, "truncated at y"},
		{"trailing bytes", append(Encode(Ack{Seq: 1}), 9), "1 unexpected trailing bytes"},
		{"unknown buttons", Encode(Pointer{Buttons: 0x80}), "unknown buttons"},
		{"empty key code", Encode(Key{Down: true}), "key code of 0 bytes"},
		{"key down not a flag", []byte{byte(OpKey), 2, 0, 1, 'a'}, "down is 2"},
		{"text too long", Encode(Text{Text: long}), "over the 4096-byte limit"},
		{"invalid utf-8", []byte{byte(OpText), 0, 2, 0xff, 0xfe}, "not valid UTF-8"},
		{"tiny screen", Encode(Screen{W: 1, H: 1}), "outside"},
		{"huge screen", Encode(Screen{W: 65535, H: 65535}), "outside"},
		{"rect outside", Encode(Rect{X: 7000, Y: 0, W: 1000, H: 10, Enc: EncJPEG, Data: []byte{1}}), "outside the largest display"},
		{"empty rect", Encode(Rect{W: 0, H: 10, Enc: EncJPEG, Data: []byte{1}}), "outside the largest display"},
		{"rect without data", Encode(Rect{W: 10, H: 10, Enc: EncJPEG}), "rect data of 0 bytes"},
		{"rect encoding", Encode(Rect{W: 10, H: 10, Enc: 9, Data: []byte{1}}), "encoding 9"},
		{"empty copy", Encode(Copy{W: 0, H: 5}), "outside the largest display"},
		{"copy source outside", Encode(Copy{SrcX: 7000, W: 1000, H: 5}), "outside the largest display"},
		{"copy target outside", Encode(Copy{Y: 4000, W: 10, H: 400}), "outside the largest display"},
		{"truncated copy", Encode(Copy{W: 1, H: 1})[:11], "truncated at h"},
		{"clipboard cut within the limit", Encode(ClipboardCut{Size: MaxClipboard}), "within the 1048576-byte limit"},
		{"truncated clipboard cut", Encode(ClipboardCut{Size: 2 << 20})[:3], "truncated at size"},
		{"clip outside", Encode(ClipRect{CX: 7680, CW: 1, CH: 1, X: 7680, W: 1, H: 1, Enc: EncJPEG, Data: []byte{1}}), "outside the largest display"},
		{"empty clip", Encode(ClipRect{CW: 0, CH: 1, W: 1, H: 1, Enc: EncJPEG, Data: []byte{1}}), "outside the largest display"},
		{"clip outside image", Encode(ClipRect{CX: 0, CW: 10, CH: 10, X: 1, W: 20, H: 20, Enc: EncJPEG, Data: []byte{1}}), "not inside the image"},
		{"clip past image", Encode(ClipRect{CX: 5, CW: 10, CH: 10, X: -10, W: 20, H: 20, Enc: EncJPEG, Data: []byte{1}}), "not inside the image"},
		{"clip encoding", Encode(ClipRect{CW: 1, CH: 1, W: 1, H: 1, Enc: 4, Data: []byte{1}}), "encoding 4"},
		{"clip flags", Encode(ClipRect{CW: 1, CH: 1, W: 1, H: 1, Enc: EncPNG, Flags: 2, Data: []byte{1}}), "unknown rect flags"},
		{"clip without data", Encode(ClipRect{CW: 1, CH: 1, W: 1, H: 1, Enc: EncPNG}), "rect data of 0 bytes"},
		{"rect flags", Encode(Rect{W: 10, H: 10, Enc: EncPNG, Flags: 0x80, Data: []byte{1}}), "unknown rect flags"},
		{"cursor too big", Encode(CursorShape{W: 300, H: 1, RGBA: make([]byte, 1200)}), "over 256x256"},
		{"cursor short pixels", Encode(CursorShape{W: 2, H: 2, RGBA: make([]byte, 3)}), "needs 16 bytes"},
		{"cursor hot spot", Encode(CursorShape{W: 1, H: 1, HotX: 5, RGBA: make([]byte, 4)}), "hot spot"},
		{"viewers count lies", []byte{byte(OpViewers), 0xff, 0xff, 0}, "do not fit"},
		{"bad mode", Encode(ModeMsg{Mode: 3}), "neither watch"},
		{"clipboard length lies", []byte{byte(OpSetClipboard), 0x7f, 0xff, 0xff, 0xff}, "over the 1048576-byte limit"},
		{"screenshot format", Encode(ScreenshotRequest{Format: 3}), "neither JPEG"},
		{"screenshot scale", Encode(ScreenshotRequest{Format: EncPNG, Scale: 101}), "over 100"},
	}
	for _, c := range cases {
		m, err := Decode(c.b)
		if err == nil || !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode(% x) = %#v, %v; want an ErrBadFrame naming %q", c.name, c.b, m, err, c.want)
		}
	}
}

func TestStreamFrames(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range sampleMessages() {
		if err := WriteStreamFrame(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	var scratch []byte
	for _, want := range sampleMessages() {
		b, err := ReadStreamFrame(&buf, scratch, MaxStreamFrame)
		if err != nil {
			t.Fatalf("ReadStreamFrame: %v", err)
		}
		scratch = b
		got, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("stream frame = %#v, %v; want %#v", got, err, want)
		}
	}
	// A length prefix over the limit is refused before anything is allocated.
	r := bytes.NewReader([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3})
	if _, err := ReadStreamFrame(r, nil, 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("ReadStreamFrame(2 GiB prefix) = %v, want ErrFrameTooLarge", err)
	}
}

func TestClampDisplay(t *testing.T) {
	cases := []struct{ w, h, ww, wh uint16 }{
		{0, 0, DefaultWidth, DefaultHeight},
		{1, 1, MinDisplay, MinDisplay},
		{65535, 65535, MaxDisplayW, MaxDisplayH},
		{1920, 1080, 1920, 1080},
	}
	for _, c := range cases {
		if w, h := ClampDisplay(c.w, c.h); w != c.ww || h != c.wh {
			t.Errorf("ClampDisplay(%d, %d) = %d, %d; want %d, %d", c.w, c.h, w, h, c.ww, c.wh)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(Encode(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("Decode(% x) error %v does not wrap ErrBadFrame", b, err)
			}
			return
		}
		if got := Encode(m); !bytes.Equal(got, b) {
			t.Fatalf("Encode(Decode(% x)) = % x, want the input back", b, got)
		}
	})
}

// TestDecodeCorpus checks testdata/fuzz/FuzzDecode holds every sample message (seed-NN is
// sampleMessages()[NN]); DESKTOP_WRITE_CORPUS=1 writes the missing ones.
func TestDecodeCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for i, m := range sampleMessages() {
		name := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", Encode(m))
		got, err := os.ReadFile(name)
		if err != nil && os.Getenv("DESKTOP_WRITE_CORPUS") == "1" {
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Errorf("seed corpus: %v (run with DESKTOP_WRITE_CORPUS=1)", err)
			continue
		}
		if m, err := Decode(parseSeed(t, got)); err != nil {
			t.Errorf("%s does not decode: %v (%#v)", name, err, m)
		}
	}
}

// parseSeed reads the one []byte of a corpus file.
func parseSeed(t *testing.T, b []byte) []byte {
	t.Helper()
	_, lit, ok := strings.Cut(strings.TrimSpace(string(b)), "[]byte(")
	if !ok {
		t.Fatalf("corpus file %q", b)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatalf("corpus file %q: %v", b, err)
	}
	return []byte(s)
}
