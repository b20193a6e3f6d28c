//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/surface"
)

// viewEventSeeds are streams of CDP events, one JSON message a line, as the agent's Chromium
// (untrusted: it runs in the sandbox) could send them to the live view.
func viewEventSeeds() [][]byte {
	jpeg := base64.StdEncoding.EncodeToString([]byte{0xff, 0xd8, 0xff, 0xd9})
	lines := func(ls ...string) []byte { return []byte(strings.Join(ls, "\n")) }
	return [][]byte{
		lines(
			`{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"T2","type":"page","title":"two","url":"http://x/"}}}`,
			`{"method":"Target.targetInfoChanged","params":{"targetInfo":{"targetId":"T1","type":"page","title":"<b>one</b>","url":"http://y/"}}}`,
			`{"method":"Page.screencastFrame","sessionId":"S1","params":{"data":"`+jpeg+`","metadata":{"deviceWidth":800,"deviceHeight":600,"scrollOffsetX":0,"scrollOffsetY":12.5},"sessionId":3}}`,
			`{"method":"Target.targetDestroyed","params":{"targetId":"T1"}}`,
		),
		lines(
			`{"method":"Page.javascriptDialogOpening","sessionId":"S1","params":{"url":"http://x/","message":"sure?","type":"confirm","defaultPrompt":""}}`,
			`{"method":"Page.javascriptDialogClosed","sessionId":"S1","params":{"result":true}}`,
			`{"method":"Page.fileChooserOpened","sessionId":"S1","params":{"frameId":"F","mode":"selectMultiple","backendNodeId":7}}`,
		),
		lines(
			`{"method":"Browser.downloadWillBegin","params":{"guid":"g1","url":"http://x/a","suggestedFilename":"../../a.zip"}}`,
			`{"method":"Browser.downloadProgress","params":{"guid":"g1","totalBytes":100,"receivedBytes":100,"state":"completed"}}`,
			`{"method":"Browser.downloadProgress","params":{"guid":"nope","totalBytes":-5,"receivedBytes":1e300,"state":"x"}}`,
		),
		lines(
			`{"method":"Page.frameNavigated","sessionId":"S1","params":{"frame":{"id":"T1","url":"http://z/"}}}`,
			`{"method":"Page.frameStartedLoading","sessionId":"S1","params":{"frameId":"T1"}}`,
			`{"method":"Page.navigatedWithinDocument","sessionId":"S1","params":{}}`,
			`{"method":"Target.detachedFromTarget","params":{"sessionId":"S1"}}`,
		),
		lines(
			`{"method":"Page.screencastFrame","sessionId":"S1","params":{"data":"!!!","metadata":{"deviceWidth":-1,"deviceHeight":1e99},"sessionId":1}}`,
			`{"method":"Page.screencastFrame","sessionId":"S2","params":{"data":"`+jpeg+`"}}`,
			`{"method":"Target.targetCreated","params":{"targetInfo":{"targetId":"","type":"page"}}}`,
			`{"id":5,"result":{}}`,
			`not json`,
		),
	}
}

// FuzzViewEvents feeds arbitrary CDP events to a live view hub with a viewer attached:
// nothing panics, the bounded lists stay bounded, and everything the viewer is sent decodes.
func FuzzViewEvents(f *testing.F) {
	for _, s := range viewEventSeeds() {
		f.Add(s)
	}
	svc := NewService(Config{Logger: testLogger(f)}, nil)
	defer svc.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newViewHub(svc, api.Agent{ID: "fuzz"})
		defer h.cancel(nil)
		h.cdp = newCDPCaller(discardCDP{}, h.event)
		h.pages = []*pageInfo{{id: "T1"}}
		h.active, h.attached, h.session, h.setUp = "T1", "T1", "S1", true
		s := &viewSession{h: h, mode: ModeDrive, conn: surface.NewViewerConn(nil), log: h.log}
		h.sessions = []*viewSession{s}
		var out [][]byte
		for _, line := range bytes.Split(data, []byte("\n")) {
			var m cdpMessage
			if json.Unmarshal(line, &m) != nil || m.Method == "" {
				continue
			}
			h.event(cdpEvent{Method: m.Method, Params: m.Params, SessionID: m.SessionID})
			var sh *shot
			out, sh, _ = h.take(s, out[:0])
			for _, b := range out {
				if _, err := Decode(b); err != nil {
					t.Fatalf("the viewer was sent a message that does not decode: %v", err)
				}
			}
			if sh != nil {
				s.acked = s.seq
				b := Encode(Frame{Seq: 1, W: sh.w, H: sh.h, ScrollX: sh.sx, ScrollY: sh.sy, Data: sh.data})
				if _, err := Decode(b); err != nil {
					t.Fatalf("a frame that does not decode: %v", err)
				}
			}
			if len(h.pages) > maxTrackedPages || len(h.downloads) > MaxDownloads || h.owed > 16 {
				t.Fatalf("unbounded: %d pages, %d downloads, %d owed", len(h.pages), len(h.downloads), h.owed)
			}
			for _, d := range h.downloads {
				if strings.ContainsAny(d.Name, "/\\") {
					t.Fatalf("a download name with a directory: %q", d.Name)
				}
			}
		}
	})
}

// discardCDP is a cdpClient that drops what it is sent and never answers.
type discardCDP struct{}

func (discardCDP) Send(context.Context, []byte) error { return nil }
func (discardCDP) Recv(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (discardCDP) Close() error { return nil }

// TestWriteViewEventCorpus rewrites testdata/fuzz/FuzzViewEvents from viewEventSeeds when
// BROWSER_WRITE_CORPUS=1; otherwise it checks the files exist.
func TestWriteViewEventCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzViewEvents")
	seeds := viewEventSeeds()
	if os.Getenv("BROWSER_WRITE_CORPUS") == "1" {
		os.MkdirAll(dir, 0o755)
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range seeds {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("seed-%02d", i))); err != nil {
			t.Errorf("seed corpus: %v (run with BROWSER_WRITE_CORPUS=1)", err)
		}
	}
}
