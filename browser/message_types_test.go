package browser

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// viewerMessages are samples of every viewer → gateway message.
func viewerMessages() []Message {
	return []Message{
		Pointer{X: 10, Y: 20, Buttons: ButtonLeft, Modifiers: ModShift},
		Wheel{X: 1, Y: 2, DX: -120, DY: 240, Modifiers: ModCtrl},
		Key{Down: true, Modifiers: ModShift, Code: "KeyA", Key: "A"},
		Key{Code: "Enter"},
		Text{Text: "héllo 世界"},
		Ack{Seq: 7},
		TakeControl{},
		ReleaseControl{},
		Resize{W: 390, H: 844},
		Navigate{URL: "https://example.org/a?b=c"},
		History{Action: HistBack},
		History{Action: HistStop},
		TabNew{URL: ""},
		TabSwitch{ID: "ABCDEF0123"},
		TabClose{ID: "ABCDEF0123"},
		DialogAnswer{Accept: true, Prompt: "yes"},
		FileBegin{Name: "notes.txt", Size: 3},
		FileData{Data: []byte("abc")},
		FileDone{},
		FileDone{Cancel: true},
		Refresh{},
		SelectChoose{Index: 2},
		SelectChoose{Index: -1},
	}
}

// serverMessages are samples of every gateway → viewer message.
func serverMessages() []Message {
	return []Message{
		Hello{Version: ProtocolVersion, Mode: ModeDrive, ViewerID: "u1#3", ViewerName: "alice"},
		Frame{Seq: 1, W: 1280, H: 720, ScrollX: 0, ScrollY: -4, Data: []byte{0xff, 0xd8, 0xff, 0xd9}},
		Tabs{Tabs: []TabInfo{{ID: "T1", Title: "Test <b>page</b>", URL: "http://127.0.0.1/", Favicon: "", Active: true}, {ID: "T2", Title: "", URL: "about:blank"}}},
		Tabs{},
		Nav{URL: "http://127.0.0.1/x", CanBack: true, Loading: true},
		Dialog{Open: true, Type: "prompt", Message: "name?", Default: "bob", URL: "http://x/"},
		Dialog{},
		FileChooser{Open: true, Multiple: true},
		Downloads{Downloads: []DownloadInfo{{ID: "g1", Name: "a.zip", URL: "http://x/a.zip", Received: 10, Total: 20, State: DownloadProgress}}},
		Control{HolderID: "u1#3", HolderName: "alice", Automating: true},
		Control{},
		Viewers{Viewers: []ViewerInfo{{ID: "u1#3", Name: "alice", Mode: ModeDrive}, {ID: "u2#4", Name: "bob", Mode: ModeWatch}}},
		ErrorMsg{Code: ErrCodeWatchOnly, Message: "you are watching"},
		ModeMsg{Mode: ModeWatch},
		SelectPopup{Open: true, Selected: 1, Options: []SelectOption{{Label: "one"}, {Label: "two"}, {Label: "<three>", Disabled: true}}},
		SelectPopup{Selected: -1},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range append(viewerMessages(), serverMessages()...) {
		b := Encode(m)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)): %v", m, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(m)) {
			t.Errorf("round trip of %T: got %#v, want %#v", m, got, m)
		}
	}
}

// normalize makes nil and empty slices compare equal.
func normalize(m Message) Message {
	switch v := m.(type) {
	case Tabs:
		if len(v.Tabs) == 0 {
			v.Tabs = nil
		}
		return v
	case SelectPopup:
		if len(v.Options) == 0 {
			v.Options = nil
		}
		return v
	}
	return m
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string][]byte{
		"empty":             {},
		"unknown opcode":    {0x7e},
		"truncated":         {byte(OpPointer), 0, 1},
		"trailing":          append(Encode(Ack{Seq: 1}), 0),
		"buttons":           {byte(OpPointer), 0, 0, 0, 0, 0x80, 0},
		"modifiers":         {byte(OpPointer), 0, 0, 0, 0, 0, 0x10},
		"bad utf8":          {byte(OpText), 0, 1, 0xff},
		"history action":    {byte(OpHistory), 9},
		"empty key":         Encode(Key{}),
		"long text":         Encode(Text{Text: strings.Repeat("a", MaxText+1)}),
		"long url":          Encode(Navigate{URL: strings.Repeat("a", MaxURL+1)}),
		"huge upload":       Encode(FileBegin{Name: "x", Size: MaxUpload + 1}),
		"empty chunk":       {byte(OpFileData)},
		"tab count":         {byte(OpTabs), 0xff, 0xff},
		"viewer count":      {byte(OpViewers), 0x00, 0x10, 0, 0},
		"empty frame":       Encode(Frame{Seq: 1}),
		"download state":    Encode(Downloads{Downloads: []DownloadInfo{{State: 9}}}),
		"flag out of range": {byte(OpFileDone), 2},
		"option index":      Encode(SelectChoose{Index: -2}),
		"selected outside":  Encode(SelectPopup{Open: true, Selected: 5, Options: []SelectOption{{Label: "a"}}}),
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: Decode(% x) = %v, want an ErrBadMessage", name, b, err)
		}
	}
}

func TestEncodeCutsLongStrings(t *testing.T) {
	m := Tabs{Tabs: []TabInfo{{ID: "x", Title: strings.Repeat("é", 40000) + "\xff"}}}
	got, err := Decode(Encode(m))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.(Tabs).Tabs[0].Title); n > 0xffff || n < 0xfff0 {
		t.Errorf("title cut to %d bytes", n)
	}
}

func fuzzDecode(f *testing.F, seeds []Message) {
	for _, m := range seeds {
		f.Add(Encode(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("Decode(% x) error %v does not wrap ErrBadMessage", b, err)
			}
			return
		}
		if got := Encode(m); !bytes.Equal(got, b) {
			t.Fatalf("Encode(Decode(% x)) = % x, want the input back", b, got)
		}
	})
}

// FuzzViewerMessage: what a viewer sends the gateway (untrusted: any logged-in watcher).
func FuzzViewerMessage(f *testing.F) { fuzzDecode(f, viewerMessages()) }

// FuzzServerMessage: what the app decodes from the gateway.
func FuzzServerMessage(f *testing.F) { fuzzDecode(f, serverMessages()) }

// TestWriteMessageCorpus rewrites testdata/fuzz/Fuzz{Viewer,Server}Message from the samples
// when BROWSER_WRITE_CORPUS=1; otherwise it checks the files exist.
func TestWriteMessageCorpus(t *testing.T) {
	for name, ms := range map[string][]Message{"FuzzViewerMessage": viewerMessages(), "FuzzServerMessage": serverMessages()} {
		dir := filepath.Join("testdata", "fuzz", name)
		if os.Getenv("BROWSER_WRITE_CORPUS") == "1" {
			os.MkdirAll(dir, 0o755)
			for i, m := range ms {
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", Encode(m))
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range ms {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("seed-%02d", i))); err != nil {
				t.Errorf("seed corpus: %v (run with BROWSER_WRITE_CORPUS=1)", err)
			}
		}
	}
}
