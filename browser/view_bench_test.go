//go:build linux && !js

package browser

import (
	"context"
	"encoding/json"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/porthole/porthole/api"
)

// animatedPage moves a big box and changes a counter on every animation frame.
const animatedPage = `<title>anim</title><style>body{margin:0;background:#fff}#b{position:absolute;width:200px;height:200px;background:#c30}#n{position:absolute;top:260px;font:40px sans-serif}</style>` +
	`<div id=b></div><div id=n></div><script>let i=0;function f(){i++;b.style.left=(i*7%600)+'px';b.style.top=(i*3%200)+'px';n.textContent=i;requestAnimationFrame(f)}f()</script>`

const staticPage = `<title>static</title><h1 style="font:40px sans-serif">A page that does not change</h1>`

// screencastCounter counts frames and their bytes; reset starts a new window.
type screencastCounter struct {
	frames, bytes atomic.Int64
}

func (c *screencastCounter) add(n int) { c.frames.Add(1); c.bytes.Add(int64(n)) }
func (c *screencastCounter) reset()    { c.frames.Store(0); c.bytes.Store(0) }

// BenchmarkBrowserScreencast: Chromium in a bwrap jail, an animated page. At the same time,
// over the same window, a native CDP client on the same browser (its own session on the same
// tab, Page.startScreencast with the same bounds, every frame acked at once: what a CDP
// viewer gets, base64 JSON) and the live view relayed through the gateway to a viewer that
// acks each frame once read (binary JPEG). fps and bytes per frame of both; then a static
// page's bytes per second at the viewer after settling.
func BenchmarkBrowserScreencast(b *testing.B) {
	m := newBrowserManager(b, "")
	s := browserService(b, m)
	agent := jailAgentB("bscreencast", "owner", api.NetworkNone)
	base := viewServerFor(b, s, agent)

	// The viewer: acks every frame as soon as it is read, counts what it receives.
	var relay screencastCounter
	ws, _, err := websocket.DefaultDialer.Dial(base+"?id=owner&name=owner&mode=drive", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	var wmu sync.Mutex
	send := func(m Message) {
		wmu.Lock()
		defer wmu.Unlock()
		ws.WriteMessage(websocket.BinaryMessage, Encode(m))
	}
	tabs := make(chan Tabs, 16)
	go func() { // owner: the benchmark; ends when ws closes
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			m, err := Decode(msg)
			if err != nil {
				continue
			}
			switch m := m.(type) {
			case Frame:
				relay.add(len(msg))
				send(Ack{Seq: m.Seq})
			case Tabs:
				select {
				case tabs <- m:
				default:
				}
			}
		}
	}()
	waitTitle := func(title string) string {
		deadline := time.After(60 * time.Second)
		for {
			select {
			case ts := <-tabs:
				for _, t := range ts.Tabs {
					if t.Active && t.Title == title {
						return t.ID
					}
				}
			case <-deadline:
				b.Fatalf("the page %q did not load", title)
			}
		}
	}
	const w, h = 1280, 800
	send(Resize{W: w, H: h})
	send(TakeControl{})
	send(Navigate{URL: "data:text/html," + url.PathEscape(animatedPage)})
	target := waitTitle("anim")

	// The native client: its own CDP session on the same tab.
	ctx := context.Background()
	c, err := s.newClient(ctx, agent, "bench:native")
	if err != nil {
		b.Fatal(err)
	}
	var native screencastCounter
	var nc *cdpCaller
	nc = newCDPCaller(c, func(ev cdpEvent) {
		if ev.Method != "Page.screencastFrame" {
			return
		}
		var p struct {
			SessionID int `json:"sessionId"`
		}
		json.Unmarshal(ev.Params, &p)
		// The message as a CDP client reads it: method, params (base64 JPEG), session.
		raw, _ := json.Marshal(ev)
		native.add(len(raw))
		nc.send(ctx, ev.SessionID, "Page.screencastFrameAck", map[string]any{"sessionId": p.SessionID})
	})
	done := make(chan struct{})
	go func() { defer close(done); nc.run(ctx) }()
	defer func() { c.Close(); <-done }()
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := nc.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}, &att); err != nil {
		b.Fatal(err)
	}
	if err := nc.call(ctx, att.SessionID, "Page.startScreencast", map[string]any{
		"format": "jpeg", "quality": 80, "maxWidth": w, "maxHeight": h, "everyNthFrame": 1}, nil); err != nil {
		b.Fatal(err)
	}

	time.Sleep(2 * time.Second) // both running
	const window = 5 * time.Second
	b.ResetTimer()
	for range b.N {
		relay.reset()
		native.reset()
		time.Sleep(window)
	}
	b.StopTimer()
	rf, rb, nf, nb := relay.frames.Load(), relay.bytes.Load(), native.frames.Load(), native.bytes.Load()
	nc.call(ctx, att.SessionID, "Page.stopScreencast", nil, nil)
	if rf == 0 || nf == 0 {
		b.Fatalf("frames: relayed %d, native %d", rf, nf)
	}
	b.ReportMetric(float64(rf)/window.Seconds(), "fps")
	b.ReportMetric(float64(nf)/window.Seconds(), "native-fps")
	b.ReportMetric(float64(rb)/float64(rf), "B/frame")
	b.ReportMetric(float64(nb)/float64(nf), "native-B/frame")
	b.ReportMetric(float64(rb)/float64(rf)/(float64(nb)/float64(nf)), "bytes-ratio")

	// A static page: after it settled, what reaches the viewer per second.
	send(Navigate{URL: "data:text/html," + url.PathEscape(staticPage)})
	waitTitle("static")
	time.Sleep(2 * time.Second)
	relay.reset()
	time.Sleep(5 * time.Second)
	b.ReportMetric(float64(relay.bytes.Load())/5, "static-B/s")
	b.ReportMetric(0, "ns/op")
}
