//go:build linux && !js

package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"image/jpeg"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/internal/testenv"
)

// The live view through the gateway's multiplexer and a real helper stream, with Chromium in
// a bwrap jail or a container: the page's title, favicon and a screenshot reach the viewers; a
// driver's click reaches the page (which records it in its title), a watcher's does not.

func TestViewInJail(t *testing.T) {
	m := newBrowserManager(t, "")
	testViewSandbox(t, viewService(t, m), jailAgentB("bview", "owner", api.NetworkNone))
}

func TestViewInContainer(t *testing.T) {
	engine := testenv.Getenv(t, "PORTHOLE_TEST_ENGINE")
	m := newBrowserManager(t, engine)
	testViewSandbox(t, viewService(t, m), containerAgentB("bviewc", "owner"))
}

// viewService is browserService with the files stream (uploads, downloads) wired as
// NewGateway wires it.
func viewService(t *testing.T, m *bridges.Manager) *Service {
	s := browserService(t, m)
	s.openFiles = func(ctx context.Context, a api.Agent) (net.Conn, error) { return m.Open(ctx, a, FilesStreamKind) }
	return s
}

const clickPage = `<title>Porthole test page</title><style>body{margin:0}button,input,a{position:absolute;left:0;width:300px;height:80px;display:block}</style>` +
	`<button style="top:0;height:200px" onclick="document.title='clicked '+(window.n=(window.n||0)+1)">click me</button>` +
	`<input type=file style="top:250px" onchange="const f=this.files[0]; f.text().then(t => document.title='file:'+f.name+':'+t)">` +
	`<a style="top:350px" download="fromjail.txt" href="data:text/plain,made%20in%20the%20sandbox">download</a>`

func testViewSandbox(t *testing.T, s *Service, agent api.Agent) {
	base := viewServerFor(t, s, agent)
	owner := dialViewer(t, base, "owner", "drive", false)
	bob := dialViewer(t, base, "bob", "watch", false)
	owner.wait(60*time.Second, "hello and tabs", func() bool { return owner.last[OpTabs] != nil })

	owner.send(Resize{W: 800, H: 600})
	owner.send(TakeControl{})
	owner.wait(10*time.Second, "control", owner.holds())
	icon := `<link rel=icon href="` + FaviconPrefix + base64.StdEncoding.EncodeToString(pngOf(t, 16, 16, red, false)) + `">`
	owner.send(Navigate{URL: "data:text/html," + url.PathEscape(icon+clickPage)})
	owner.wait(30*time.Second, "the page's title", owner.tabTitle("Porthole test page"))
	bob.wait(10*time.Second, "the page's title (watcher)", bob.tabTitle("Porthole test page"))

	// The page's favicon, drawn by the sandbox's Chromium, reaches the watcher as a PNG.
	var favicon string
	bob.wait(20*time.Second, "the page's favicon", func() bool {
		tabs, _ := bob.last[OpTabs].(Tabs)
		for _, tb := range tabs.Tabs {
			if tb.Active && tb.Favicon != "" {
				favicon = tb.Favicon
				return true
			}
		}
		return false
	})
	if isRed, _ := iconIsRed(t, favicon); !isRed {
		t.Errorf("the favicon from the sandbox is not the page's red icon")
	}

	owner.wait(20*time.Second, "a frame", func() bool { return len(owner.frames) > 0 })
	bob.wait(20*time.Second, "a frame (watcher)", func() bool { return len(bob.frames) > 0 })
	owner.mu.Lock()
	f := owner.frames[len(owner.frames)-1]
	owner.mu.Unlock()
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(f.Data))
	if err != nil {
		t.Fatalf("the frame is not a JPEG: %v", err)
	}
	t.Logf("screenshot through the viewer protocol: page %dx%d CSS px, JPEG %dx%d, %d bytes", f.W, f.H, cfg.Width, cfg.Height, len(f.Data))

	// While a person holds control, the agent's own automation may not send input.
	auto := dialCDP(t, s, agent, "automation:token:t1")
	if _, err := auto.try("", "Target.getTargets", nil); err != nil {
		t.Errorf("automation's other calls while a person drives: %v", err)
	}
	if _, err := auto.try("", "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": 1, "y": 1}); err == nil || !strings.Contains(err.Error(), "owner has taken control") {
		t.Errorf("automation input while the owner holds control: %v, want refused naming the owner", err)
	}

	bob.clickAt(100, 100)
	bob.send(TakeControl{})
	bob.wait(10*time.Second, "watch-only errors", func() bool { return len(bob.errs) > 0 })
	time.Sleep(time.Second)
	owner.mu.Lock()
	stillUnclicked := owner.tabTitle("Porthole test page")()
	tabs := owner.last[OpTabs]
	owner.mu.Unlock()
	if !stillUnclicked {
		t.Fatalf("a watcher's click reached the page: tabs %+v", tabs)
	}
	owner.clickAt(100, 100)
	owner.wait(20*time.Second, "the page to record the driver's click", owner.tabTitle("clicked 1"))
	bob.wait(20*time.Second, "the watcher to see the click", bob.tabTitle("clicked 1"))

	// An upload into the sandbox through the file chooser, and a download back out.
	owner.clickAt(100, 290)
	owner.wait(10*time.Second, "the file chooser", func() bool { c, _ := owner.last[OpFileChooser].(FileChooser); return c.Open })
	owner.send(FileBegin{Name: "up.txt", Size: 2})
	owner.send(FileData{Data: []byte("hi")})
	owner.send(FileDone{})
	owner.wait(20*time.Second, "the page read the upload", owner.tabTitle("file:up.txt:hi"))
	owner.clickAt(100, 390)
	var id string
	owner.wait(20*time.Second, "a finished download", func() bool {
		ds, _ := owner.last[OpDownloads].(Downloads)
		for _, d := range ds.Downloads {
			if d.Name == "fromjail.txt" && d.State == DownloadCompleted {
				id = d.ID
				return true
			}
		}
		return false
	})
	rec := httptest.NewRecorder()
	s.serveDownload(rec, httptest.NewRequest("GET", "/x?id="+id, nil), agent, Viewer{ID: "owner", Mode: api.LevelDrive})
	if body := rec.Body.String(); rec.Code != 200 || body != "made in the sandbox" {
		t.Errorf("download from the sandbox: %d %q", rec.Code, body)
	}
}

// TestViewBrowserCrashInJail: Chromium killed in the agent's jail while a person watches the
// live view: the viewer is told the browser is unavailable and its connection closes 1013;
// the next viewer gets frames from a new Chromium (started on that use).
func TestViewBrowserCrashInJail(t *testing.T) {
	m := newBrowserManager(t, "")
	s := viewService(t, m)
	a := jailAgentB("bviewcrash", "owner", api.NetworkNone)
	base := viewServerFor(t, s, a)
	v := dialViewer(t, base, "owner", "drive", false)
	v.send(Resize{W: 800, H: 600})
	v.wait(60*time.Second, "a first frame", func() bool { return len(v.frames) > 0 })

	sandboxSh(t, m, a, `for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- '--remote-debugging-[p]ipe'; then kill -9 ${p#/proc/}; fi; done`)
	v.waitBrowserGone(20 * time.Second)

	w := dialViewer(t, base, "owner", "drive", false)
	w.send(Resize{W: 800, H: 600})
	w.wait(60*time.Second, "a frame from the restarted browser", func() bool { return len(w.frames) > 0 })
	if !chromiumRunning(t, m, a) {
		t.Error("no Chromium runs in the sandbox after the next viewer came")
	}
}
