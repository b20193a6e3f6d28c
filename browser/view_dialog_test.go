//go:build !js

package browser

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
)

// dialogPage has a confirm button, a prompt button, a file input and a download link, each
// reporting in the page's title.
const dialogPage = `<!doctype html><html><head><title>dialogs</title><style>body{margin:0} *{position:absolute;left:0;width:300px;height:80px;display:block}</style></head><body>
<button id=c style="top:0" onclick="document.title='confirm:'+confirm('sure?')">confirm</button>
<button id=p style="top:100px" onclick="document.title='prompt:'+prompt('name?','bob')">prompt</button>
<input id=f type=file style="top:200px" onchange="const f=this.files[0]; f.text().then(t => document.title='file:'+f.name+':'+t)">
<a id=d style="top:300px" href="/dl" download>download</a>
<select id=s style="top:400px" onchange="document.title='select:'+this.value"><option>one<option>two<option disabled>three<option>four</select>
<button id=m style="top:500px" onmousedown="alert('down')">alert on mousedown</button>
</body></html>`

// localFiles serves the files stream in this process (HOME is a temporary directory).
func localFiles(t *testing.T) func(ctx context.Context, agent api.Agent) (net.Conn, error) {
	t.Setenv("HOME", t.TempDir())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return func(ctx context.Context, agent api.Agent) (net.Conn, error) {
		a, b := net.Pipe()
		wg.Add(1)
		go func() { defer wg.Done(); ServeFilesStream(context.Background(), b) }()
		return a, nil
	}
}

// lastDialog is the newest Dialog (v.mu held).
func (v *testViewer) lastDialog() Dialog {
	d, _ := v.last[OpDialog].(Dialog)
	return d
}

// TestViewDialogsFilesDownloads: a JavaScript confirm and prompt reach the viewers and only
// the driver's answer closes them; a file chooser is announced to the driver, whose upload
// lands in the page's file input; a download is listed and read back to the viewer's device.
func TestViewDialogsFilesDownloads(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, dialogPage) })
	mux.HandleFunc("/dl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", `attachment; filename="hello.txt"`)
		fmt.Fprint(w, "hello download")
	})
	page := httptest.NewServer(mux)
	t.Cleanup(page.Close)

	files := localFiles(t)
	s := newTestService(t, func() cdpClient { return startPipeChromium(t) })
	s.openFiles = files
	base := viewServer(t, s)
	owner := dialViewer(t, base, "owner", "drive", false)
	bob := dialViewer(t, base, "bob", "watch", false)
	owner.wait(20*time.Second, "tabs", func() bool { return owner.last[OpTabs] != nil })
	owner.send(TakeControl{})
	owner.wait(5*time.Second, "control", owner.holds())
	owner.send(Navigate{URL: page.URL})
	owner.wait(20*time.Second, "the page", owner.tabTitle("dialogs"))
	owner.wait(10*time.Second, "a frame", func() bool { return len(owner.frames) > 0 })

	// confirm: both see it; the watcher's answer is dropped; the driver's closes it.
	owner.clickAt(50, 40)
	owner.wait(10*time.Second, "the confirm dialog", func() bool { d := owner.lastDialog(); return d.Open && d.Type == "confirm" && d.Message == "sure?" })
	bob.wait(10*time.Second, "the confirm dialog (watcher)", func() bool { return bob.lastDialog().Open })
	bob.send(DialogAnswer{Accept: true})
	time.Sleep(300 * time.Millisecond)
	owner.mu.Lock()
	stillOpen := owner.lastDialog().Open
	owner.mu.Unlock()
	if !stillOpen {
		t.Fatal("a watcher's answer closed the dialog")
	}
	owner.send(DialogAnswer{Accept: true})
	owner.wait(10*time.Second, "the dialog closed", func() bool { return !owner.lastDialog().Open })
	owner.wait(10*time.Second, "the page saw true", owner.tabTitle("confirm:true"))

	// prompt, with the driver's text.
	owner.clickAt(50, 140)
	owner.wait(10*time.Second, "the prompt", func() bool { d := owner.lastDialog(); return d.Open && d.Type == "prompt" && d.Default == "bob" })
	owner.send(DialogAnswer{Accept: true, Prompt: "alice"})
	owner.wait(10*time.Second, "the page saw the answer", owner.tabTitle("prompt:alice"))

	// The file chooser: announced to the driver only; the upload reaches the page.
	owner.clickAt(50, 240)
	owner.wait(10*time.Second, "the file chooser", func() bool { c, _ := owner.last[OpFileChooser].(FileChooser); return c.Open })
	bob.mu.Lock()
	if c, _ := bob.last[OpFileChooser].(FileChooser); c.Open {
		t.Error("the watcher was told about the file chooser")
	}
	bob.mu.Unlock()
	owner.send(FileBegin{Name: "notes.txt", Size: 11})
	owner.send(FileData{Data: []byte("hello ")})
	owner.send(FileData{Data: []byte("world")})
	owner.send(FileDone{})
	owner.wait(10*time.Second, "the page read the file", owner.tabTitle("file:notes.txt:hello world"))
	owner.wait(10*time.Second, "the chooser closed", func() bool { c, _ := owner.last[OpFileChooser].(FileChooser); return !c.Open })

	// A <select>: its popup's options go to the driver, whose choice reaches the page.
	owner.clickAt(50, 440)
	owner.wait(10*time.Second, "the select popup", func() bool { p, _ := owner.last[OpSelectPopup].(SelectPopup); return p.Open })
	owner.mu.Lock()
	p := owner.last[OpSelectPopup].(SelectPopup)
	owner.mu.Unlock()
	if want := []SelectOption{{Label: "one"}, {Label: "two"}, {Label: "three", Disabled: true}, {Label: "four"}}; p.Selected != 0 || fmt.Sprint(p.Options) != fmt.Sprint(want) {
		t.Errorf("select popup %+v, want %v selected 0", p, want)
	}
	bob.mu.Lock()
	if _, ok := bob.last[OpSelectPopup]; ok {
		t.Error("the watcher was sent the select popup")
	}
	bob.mu.Unlock()
	owner.send(SelectChoose{Index: 3})
	owner.wait(10*time.Second, "the page's change event", owner.tabTitle("select:four"))
	owner.wait(10*time.Second, "the popup closed", func() bool { p, _ := owner.last[OpSelectPopup].(SelectPopup); return !p.Open })

	// A dialog opened by mousedown holds Chromium's reply to the press: the driver can still
	// answer it at once.
	start := time.Now()
	owner.clickAt(50, 540)
	owner.wait(10*time.Second, "the mousedown alert", func() bool { d := owner.lastDialog(); return d.Open && d.Message == "down" })
	owner.send(DialogAnswer{Accept: true})
	owner.wait(10*time.Second, "the alert closed", func() bool { return !owner.lastDialog().Open })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answering a mousedown alert took %v", d)
	}

	// A download: listed when done, then read back through the download route.
	owner.clickAt(50, 340)
	var id string
	owner.wait(20*time.Second, "a finished download", func() bool {
		ds, _ := owner.last[OpDownloads].(Downloads)
		for _, d := range ds.Downloads {
			if d.Name == "hello.txt" && d.State == DownloadCompleted {
				id = d.ID
				return true
			}
		}
		return false
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/agents/a1/browser/download?id="+id, nil)
	s.serveDownload(rec, req, api.Agent{ID: "a1", OwnerID: "owner"}, Viewer{ID: "owner", Mode: api.LevelDrive})
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || string(body) != "hello download" || !strings.Contains(rec.Header().Get("Content-Disposition"), `filename=hello.txt`) {
		t.Errorf("download route: %d %q %v", rec.Code, body, rec.Header())
	}
	rec = httptest.NewRecorder()
	s.serveDownload(rec, httptest.NewRequest("GET", "/x?id=nope", nil), api.Agent{ID: "a1"}, Viewer{ID: "owner"})
	if rec.Code != 404 {
		t.Errorf("an unknown download: %d, want 404", rec.Code)
	}
}
