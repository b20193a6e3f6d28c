package e2e

// BenchmarkDesktopCompare: the desktop surface end to end against a real peer, in the same run.
//
//   - Porthole: a `porthole serve` process (its own process, so its CPU is its own), a bwrap
//     agent whose helper runs Xvfb + openbox in the jail, viewers that are Go WebSocket clients
//     acking every FrameEnd like the app (viewer 0 decodes the rects over the latency marker).
//   - x11vnc: started in the same jail on the same Xvfb (MIT-SHM, XDamage, its defaults),
//     listening on a unix socket in the agent's home; websockify on the host in front of it;
//     noVNC (Debian's, its default tight/JPEG settings) in headless Chromium.
//   - The Octop-style baseline (kbinani/screenshot + image/jpeg q80 + base64 JSON at 10 fps) is
//     x11cap's BenchmarkDesktopOctopBaseline; benchtable compares with its figures.
//
// Bytes are counted server→client by a TCP proxy in front of each (the gateway's HTTP port;
// websockify). The scenes are painted on the agent's display by this process through the jail's
// X socket (/proc/<Xvfb>/root/tmp/.X11-unix/X0) and by xdotool in the jail: an idle screen, a
// line typed into an xterm, a window moved across the screen, full-screen motion. A 24×24
// marker changes colour every 200 ms during the drag and motion scenes; the capture-to-viewer
// latency is from the X server having the change (a round trip after painting) to the viewer's
// reconstruction showing it (Go: the decoded rect at FrameEnd; noVNC: its backbuffer at flip).

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
	"github.com/porthole/porthole/desktop"
	"github.com/porthole/porthole/internal/testenv"
)

const (
	cmpW, cmpH    = 1920, 1080
	cmpMarkerX    = 1880 // the marker window: 24×24 at the bottom right
	cmpMarkerY    = 1040
	cmpMarkerSize = 24
	cmpMarkerTick = 200 * time.Millisecond
	cmpSettle     = 1500 * time.Millisecond
	cmpTypedLine  = "$ go test -run '^$' -bench DesktopCompare ./e2e/ | tee bench.txt"
)

// cmpPalette is the marker's colours; a viewer's pixel is classified by the nearest one.
var cmpPalette = [][3]int{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 0}, {0, 255, 255}, {255, 0, 255}}

func classify(r, g, b int) int {
	best, bd := -1, 3*90*90
	for i, p := range cmpPalette {
		d := (r-p[0])*(r-p[0]) + (g-p[1])*(g-p[1]) + (b-p[2])*(b-p[2])
		if d < bd {
			best, bd = i, d
		}
	}
	return best
}

// --- byte-counting TCP proxy ---------------------------------------------------------------

// countingProxy forwards 127.0.0.1:port to target and counts the bytes going server→client.
type countingProxy struct {
	ln     net.Listener
	target string
	down   atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func startProxy(b testing.TB, target string) *countingProxy {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() { // owner: the proxy; ends when the listener closes
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	b.Cleanup(p.close)
	return p
}

func (p *countingProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *countingProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		client.Close()
		server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	done := make(chan struct{})
	go func() { // owner: serve; ends when either side closes
		io.Copy(server, client)
		server.Close()
		close(done)
	}()
	buf := make([]byte, 256<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.down.Add(int64(n))
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	<-done
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// --- CPU from /proc --------------------------------------------------------------------------

type procInfo struct {
	ppid int
	comm string
	cpu  float64 // user+system seconds
}

func readProcs() map[int]procInfo {
	out := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		l, r := bytes.IndexByte(s, '('), bytes.LastIndexByte(s, ')')
		if l < 0 || r < l {
			continue
		}
		f := strings.Fields(string(s[r+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[pid] = procInfo{ppid: ppid, comm: string(s[l+1 : r]), cpu: (ut + st) / 100}
	}
	return out
}

// descendantsNamed returns the pids under root (not root) whose comm is comm.
func descendantsNamed(procs map[int]procInfo, root int, comm string) []int {
	var out []int
	for pid, p := range procs {
		if p.comm != comm || pid == root {
			continue
		}
		for q, n := p.ppid, 0; q > 1 && n < 64; q, n = procs[q].ppid, n+1 {
			if q == root {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// --- the Porthole gateway process ------------------------------------------------------------

type cmpGateway struct {
	url, host string
	pid       int
	dataDir   string
	client    *http.Client
}

func freePort(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startChild starts a process that ends (SIGTERM, then SIGKILL) at cleanup.
func startChild(b testing.TB, logName string, cmd *exec.Cmd) {
	b.Helper()
	logf, err := os.Create(filepath.Join(b.TempDir(), logName))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }() // owner: cleanup below
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if b.Failed() {
			if out, err := os.ReadFile(logf.Name()); err == nil {
				b.Logf("%s log:\n%s", logName, tail(string(out), 4000))
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func startCmpGateway(b *testing.B) *cmpGateway {
	b.Helper()
	// Short: the agent's home holds x11vnc's unix socket (108-byte path limit).
	dataDir, err := os.MkdirTemp("", "phb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dataDir) })
	add := exec.Command(portholeBin, "user", "add", "bench", "--admin", "--password-stdin", "--data", dataDir)
	add.Stdin = strings.NewReader(adminPassword + "\n")
	if out, err := add.CombinedOutput(); err != nil {
		b.Fatalf("porthole user add: %v\n%s", err, out)
	}
	addr := freePort(b)
	startChild(b, "porthole-serve.log", exec.Command(portholeBin, "serve", "--addr", addr, "--data", dataDir,
		"--idle-timeout", "30m", "--log-level", "warn"))
	g := &cmpGateway{url: "http://" + addr, host: addr, dataDir: dataDir}
	jar, _ := cookiejar.New(nil)
	g.client = &http.Client{Jar: jar, Timeout: 60 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(g.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("porthole serve did not listen on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for pid, p := range readProcs() {
		if p.ppid == os.Getpid() && p.comm == "porthole" {
			g.pid = pid
		}
	}
	if g.pid == 0 {
		b.Fatal("the porthole serve process is not a child of this one")
	}
	apiCall(b, g.client, g.url, "POST", "/api/session", api.LoginRequest{Username: "bench", Password: adminPassword}, http.StatusOK, nil)
	return g
}

// cpu is the gateway process's CPU and its descendant helpers' (seconds).
func (g *cmpGateway) cpu() (gateway, helper float64) {
	procs := readProcs()
	for _, pid := range descendantsNamed(procs, g.pid, "porthole") {
		helper += procs[pid].cpu
	}
	return procs[g.pid].cpu, helper
}

// longExec runs cmd in the agent through the exec API until the benchmark ends.
func (g *cmpGateway) longExec(b *testing.B, agentID, what string, cmd string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owner: cleanup below
		defer close(done)
		body := fmt.Sprintf(`{"command":["sh","-c",%q],"timeout_s":3600}`, cmd)
		req, _ := http.NewRequestWithContext(ctx, "POST", g.url+"/api/agents/"+agentID+"/exec", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", g.url)
		resp, err := (&http.Client{Jar: g.client.Jar}).Do(req)
		if err != nil {
			if ctx.Err() == nil {
				b.Errorf("exec %s: %v", what, err)
			}
			return
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ctx.Err() == nil {
			b.Errorf("%s ended early: %d %s", what, resp.StatusCode, out)
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
}

func (g *cmpGateway) exec(b *testing.B, agentID, cmd string) {
	var out api.ExecResult
	apiCall(b, g.client, g.url, "POST", "/api/agents/"+agentID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", cmd}, TimeoutS: 60}, http.StatusOK, &out)
	if out.ExitCode != 0 {
		b.Fatalf("exec %q: exit %d: %s%s", cmd, out.ExitCode, out.Stdout, out.Stderr)
	}
}

// --- the Porthole viewer (Go) ---------------------------------------------------------------

type seen struct {
	t time.Time
	c int
}

type phViewer struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	decode  bool // decode the rects over the marker
	done    chan struct{}
	frames  atomic.Int64
	copies  atomic.Int64 // Copy messages
	clips   atomic.Int64 // ClipRect messages
	mu      sync.Mutex
	kf      map[uint8]int // image bytes per encoding of the first frame (the keyframe)
	kfDone  bool
	w, h    int
	cur     int
	pending int
	seen    []seen
	errs    []string
}

func dialViewer(b *testing.B, g *cmpGateway, via, agentID string, decode bool) *phViewer {
	b.Helper()
	u := "ws://" + via + "/api/agents/" + agentID + "/desktop"
	hdr := http.Header{}
	hdr.Set("Origin", "http://"+via)
	gu, _ := url.Parse(g.url)
	for _, c := range g.client.Jar.Cookies(gu) {
		hdr.Add("Cookie", c.Name+"="+c.Value)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1 << 20}
	ws, resp, err := d.Dial(u, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		b.Fatalf("dial %s: %v (HTTP %d)", u, err, status)
	}
	v := &phViewer{ws: ws, decode: decode, done: make(chan struct{}), cur: -1, pending: -1}
	go v.read() // owner: the viewer; ends when ws closes
	b.Cleanup(v.close)
	return v
}

func (v *phViewer) send(m desktop.Message) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	v.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return v.ws.WriteMessage(websocket.BinaryMessage, desktop.Encode(m))
}

func (v *phViewer) close() {
	v.ws.Close()
	<-v.done
}

func (v *phViewer) read() {
	defer close(v.done)
	for {
		_, data, err := v.ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := desktop.Decode(data)
		if err != nil {
			v.mu.Lock()
			v.errs = append(v.errs, err.Error())
			v.mu.Unlock()
			continue
		}
		switch m := m.(type) {
		case desktop.Screen:
			v.mu.Lock()
			v.w, v.h = int(m.W), int(m.H)
			v.mu.Unlock()
		case desktop.Rect:
			v.mu.Lock()
			if !v.kfDone {
				if v.kf == nil {
					v.kf = map[uint8]int{}
				}
				v.kf[m.Enc] += len(m.Data)
			}
			v.mu.Unlock()
			if v.decode {
				v.rect(int(m.X), int(m.Y), int(m.W), int(m.H), m.Enc, m.Flags, m.Data, int(m.X), int(m.Y), int(m.W), int(m.H))
			}
		case desktop.ClipRect:
			v.clips.Add(1)
			if v.decode {
				v.rect(int(m.X), int(m.Y), int(m.W), int(m.H), m.Enc, m.Flags, m.Data, int(m.CX), int(m.CY), int(m.CW), int(m.CH))
			}
		case desktop.Copy:
			v.copies.Add(1)
			mx, my := cmpMarkerX+cmpMarkerSize/2, cmpMarkerY+cmpMarkerSize/2
			if v.decode && mx >= int(m.X) && my >= int(m.Y) && mx < int(m.X)+int(m.W) && my < int(m.Y)+int(m.H) {
				v.mu.Lock()
				v.errs = append(v.errs, "a copy over the marker (the bench's viewer does not keep a picture)")
				v.mu.Unlock()
			}
		case desktop.FrameEnd:
			v.mu.Lock()
			v.kfDone = v.kfDone || len(v.kf) > 0 // the first frame with rects
			if v.pending >= 0 && v.pending != v.cur {
				v.cur = v.pending
				v.seen = append(v.seen, seen{time.Now(), v.cur})
			}
			v.mu.Unlock()
			v.frames.Add(1)
			if v.send(desktop.Ack{Seq: m.Seq}) != nil {
				return
			}
		case desktop.ErrorMsg:
			v.mu.Lock()
			v.errs = append(v.errs, m.Message)
			v.mu.Unlock()
		}
	}
}

// rect decodes an image placed at x, y (w×h) drawn within the clip cx, cy, cw, ch (a Rect's
// clip is itself) when the clip covers the marker's centre, and reads the colour there.
func (v *phViewer) rect(x, y, w, h int, enc, flags uint8, data []byte, cx, cy, cw, ch int) {
	mx, my := cmpMarkerX+cmpMarkerSize/2, cmpMarkerY+cmpMarkerSize/2
	if mx < cx || my < cy || mx >= cx+cw || my >= cy+ch {
		return
	}
	px, py := mx-x, my-y
	if flags&desktop.RectScaled != 0 {
		px, py = px/2, py/2
	}
	var c [3]int
	var err error
	switch enc {
	case desktop.EncPalette:
		var rgba []byte
		if rgba, err = desktop.DecodePalette(data, w, h); err == nil {
			o := (py*w + px) * 4
			c = [3]int{int(rgba[o]), int(rgba[o+1]), int(rgba[o+2])}
		}
	default:
		var img image.Image
		if enc == desktop.EncPNG {
			img, err = png.Decode(bytes.NewReader(data))
		} else {
			img, err = jpeg.Decode(bytes.NewReader(data))
		}
		if err == nil {
			cr, cg, cb, _ := img.At(img.Bounds().Min.X+px, img.Bounds().Min.Y+py).RGBA()
			c = [3]int{int(cr >> 8), int(cg >> 8), int(cb >> 8)}
		}
	}
	if err != nil {
		v.mu.Lock()
		v.errs = append(v.errs, "decode rect: "+err.Error())
		v.mu.Unlock()
		return
	}
	v.mu.Lock()
	v.pending = classify(c[0], c[1], c[2])
	v.mu.Unlock()
}

func (v *phViewer) size() (int, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.w, v.h
}

func (v *phViewer) takeSeen() []seen {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.seen
	v.seen = nil
	return s
}

// --- scenes on the agent's display -----------------------------------------------------------

type painter struct {
	x       *xgb.Conn
	root    xproto.Window
	gc      xproto.Gcontext
	marker  xproto.Window
	drag    xproto.Window
	motion  xproto.Window
	frames  [3]xproto.Pixmap
	mu      sync.Mutex
	paints  []seen
	markerN int
}

// dialJailDisplay connects to the agent's Xvfb through its jail's root (/proc/<pid>/root).
func dialJailDisplay(b *testing.B, g *cmpGateway) *xgb.Conn {
	b.Helper()
	procs := readProcs()
	xs := descendantsNamed(procs, g.pid, "Xvfb")
	if len(xs) != 1 {
		b.Fatalf("want the agent's one Xvfb under the gateway, found %v", xs)
	}
	c, err := net.Dial("unix", fmt.Sprintf("/proc/%d/root/tmp/.X11-unix/X0", xs[0]))
	if err != nil {
		b.Fatalf("connect to the agent's display: %v", err)
	}
	x, err := xgb.NewConnNet(c)
	if err != nil {
		b.Fatalf("X setup on the agent's display: %v", err)
	}
	b.Cleanup(x.Close)
	return x
}

func newPainter(b *testing.B, x *xgb.Conn) *painter {
	scr := xproto.Setup(x).DefaultScreen(x)
	p := &painter{x: x, root: scr.Root}
	var err error
	if p.gc, err = xproto.NewGcontextId(x); err != nil {
		b.Fatal(err)
	}
	xproto.CreateGC(x, p.gc, xproto.Drawable(scr.Root), 0, nil)
	// Three full-screen motion frames: smooth colour fields with moving discs (video-like).
	for k := range p.frames {
		img := image.NewRGBA(image.Rect(0, 0, cmpW, cmpH))
		for y := 0; y < cmpH; y++ {
			for x := 0; x < cmpW; x++ {
				i := img.PixOffset(x, y)
				ph := float64(k) * 2.1
				img.Pix[i] = uint8(128 + 127*math.Sin(float64(x)/97+ph))
				img.Pix[i+1] = uint8(128 + 127*math.Sin(float64(y)/61-ph))
				img.Pix[i+2] = uint8(128 + 127*math.Sin(float64(x+y)/143+2*ph))
				for d := range 6 {
					cx, cy := 200+d*300+k*40, 300+(d%3)*220+k*25
					if (x-cx)*(x-cx)+(y-cy)*(y-cy) < 90*90 {
						img.Pix[i], img.Pix[i+1], img.Pix[i+2] = uint8(40*d), 250-uint8(30*d), uint8(60+20*k)
					}
				}
			}
		}
		p.frames[k] = p.pixmap(b, scr, img)
	}
	// The dragged window: a 640×400 page of "text" (dark glyph boxes on white), as its
	// background so the X server repaints it without a client event loop.
	page := image.NewRGBA(image.Rect(0, 0, 640, 400))
	for i := range page.Pix {
		page.Pix[i] = 0xff
	}
	for row := 0; row < 400/18; row++ {
		for col := 0; col < 640/9-4; col++ {
			if (row*31+col*7)%11 < 2 {
				continue // spaces
			}
			for y := row*18 + 4; y < row*18+15; y++ {
				for x := 16 + col*9; x < 16+col*9+6; x++ {
					if (x*3+y*5+col)%4 != 0 {
						o := page.PixOffset(x, y)
						page.Pix[o], page.Pix[o+1], page.Pix[o+2] = 20, 20, 60
					}
				}
			}
		}
	}
	bg := p.pixmap(b, scr, page)
	p.drag = p.window(b, scr, 0, 300, 640, 400, xproto.CwBackPixmap, uint32(bg))
	p.motion = p.window(b, scr, 0, 0, cmpW, cmpH, xproto.CwBackPixmap, xproto.BackPixmapNone)
	p.marker = p.window(b, scr, cmpMarkerX, cmpMarkerY, cmpMarkerSize, cmpMarkerSize, xproto.CwBackPixel, 0x808080)
	p.sync()
	return p
}

func (p *painter) pixmap(b *testing.B, scr *xproto.ScreenInfo, img *image.RGBA) xproto.Pixmap {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	pm, err := xproto.NewPixmapId(p.x)
	if err != nil {
		b.Fatal(err)
	}
	xproto.CreatePixmap(p.x, scr.RootDepth, pm, xproto.Drawable(scr.Root), uint16(w), uint16(h))
	rows := max(1, 60000/(w*4))
	buf := make([]byte, 0, rows*w*4)
	for y0 := 0; y0 < h; y0 += rows {
		n := min(rows, h-y0)
		buf = buf[:0]
		for y := y0; y < y0+n; y++ {
			for x := 0; x < w; x++ {
				i := img.PixOffset(x, y)
				buf = append(buf, img.Pix[i+2], img.Pix[i+1], img.Pix[i], 0) // BGRX
			}
		}
		xproto.PutImage(p.x, xproto.ImageFormatZPixmap, xproto.Drawable(pm), p.gc, uint16(w), uint16(n), 0, int16(y0), 0, scr.RootDepth, buf)
	}
	return pm
}

// window creates an override-redirect window (no frame, no focus), unmapped.
func (p *painter) window(b *testing.B, scr *xproto.ScreenInfo, x, y, w, h int, mask, val uint32) xproto.Window {
	id, err := xproto.NewWindowId(p.x)
	if err != nil {
		b.Fatal(err)
	}
	// Value order follows the mask bits: BackPixmap (1) or BackPixel (2), then OverrideRedirect (0x200).
	xproto.CreateWindow(p.x, scr.RootDepth, id, scr.Root, int16(x), int16(y), uint16(w), uint16(h), 0,
		xproto.WindowClassInputOutput, scr.RootVisual, mask|xproto.CwOverrideRedirect, []uint32{val, 1})
	return id
}

// sync waits until the X server has handled everything sent so far.
func (p *painter) sync() { xproto.GetInputFocus(p.x).Reply() }

func (p *painter) show(w xproto.Window, on bool) {
	if on {
		xproto.MapWindow(p.x, w)
		xproto.ConfigureWindow(p.x, w, xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove})
		if w != p.marker {
			xproto.ConfigureWindow(p.x, p.marker, xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove})
		}
	} else {
		xproto.UnmapWindow(p.x, w)
	}
	p.sync()
}

// tickMarker gives the marker its next colour and records when the X server had it.
func (p *painter) tickMarker() {
	c := p.markerN % len(cmpPalette)
	p.markerN++
	col := cmpPalette[c]
	xproto.ChangeWindowAttributes(p.x, p.marker, xproto.CwBackPixel, []uint32{uint32(col[0]<<16 | col[1]<<8 | col[2])})
	xproto.ClearArea(p.x, false, p.marker, 0, 0, 0, 0)
	p.sync()
	p.mu.Lock()
	p.paints = append(p.paints, seen{time.Now(), c})
	p.mu.Unlock()
}

func (p *painter) takePaints() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.paints
	p.paints = nil
	return s
}

// latencies matches each colour the viewer showed with the latest paint of that colour
// before it (a paint the viewer skipped is not measured).
func latencies(paints, shown []seen) []float64 {
	var out []float64
	used := map[int]bool{}
	for _, s := range shown {
		best := -1
		for i, p := range paints {
			if p.c == s.c && !p.t.After(s.t) {
				best = i
			}
		}
		if best >= 0 && !used[best] {
			used[best] = true
			out = append(out, float64(s.t.Sub(paints[best].t).Microseconds())/1000)
		}
	}
	sort.Float64s(out)
	return out
}

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// --- the systems -----------------------------------------------------------------------------

// system is one thing serving the display to a viewer.
type system interface {
	bytes() int64
	frames(b *testing.B) int64
	shown(b *testing.B) []seen
	cpu() (server, aux float64) // seconds: what the figures call server CPU, and a part or peer of it
}

type portholeSys struct {
	g     *cmpGateway
	proxy *countingProxy
	v     *phViewer
}

func (s *portholeSys) bytes() int64              { return s.proxy.down.Load() }
func (s *portholeSys) frames(b *testing.B) int64 { return s.v.frames.Load() }
func (s *portholeSys) shown(b *testing.B) []seen { return s.v.takeSeen() }
func (s *portholeSys) cpu() (float64, float64) {
	gw, h := s.g.cpu()
	return gw + h, gw
}

type vncSys struct {
	proxy     *countingProxy
	ctx       context.Context
	x11vnc    int
	websockfy int
}

func (s *vncSys) bytes() int64 { return s.proxy.down.Load() }
func (s *vncSys) frames(b *testing.B) int64 {
	return int64(evalB[float64](b, s.ctx, `bench.frames`))
}
func (s *vncSys) shown(b *testing.B) []seen {
	raw := evalB[[][2]float64](b, s.ctx, `(() => { const s = bench.seen; bench.seen = []; return s })()`)
	out := make([]seen, len(raw))
	for i, r := range raw {
		out[i] = seen{time.UnixMicro(int64(r[0] * 1000)), int(r[1])}
	}
	return out
}
func (s *vncSys) cpu() (float64, float64) {
	procs := readProcs()
	return procs[s.x11vnc].cpu, treeCPU(procs, s.websockfy)
}

// treeCPU is the CPU of root and all its live descendants (websockify forks per client).
func treeCPU(procs map[int]procInfo, root int) float64 {
	total := procs[root].cpu
	for pid, p := range procs {
		for q, n := p.ppid, 0; q > 1 && n < 64; q, n = procs[q].ppid, n+1 {
			if q == root && pid != root {
				total += p.cpu
				break
			}
		}
	}
	return total
}

func evalB[T any](b *testing.B, ctx context.Context, expr string) T {
	b.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// novncPage runs noVNC's RFB against ws and counts the framebuffer updates it draws; at each
// it reads the marker's pixel from the backbuffer and records colour changes at Date.now() (the
// system's wall clock, as Go's time.Now; performance.timeOrigin + now() drifts from it by up to
// ~100 ms, which made latencies wrap around the marker's colour cycle).
const novncPage = `<!doctype html><html><body style="margin:0"><div id="screen" style="width:1920px;height:1080px"></div>
<script type="module">
import RFB from "/novnc/core/rfb.js";
const cls = (r, g, b) => { let best = -1, bd = 3*90*90; ` + "PALETTE" + `.forEach((p, i) => { const d = (r-p[0])**2 + (g-p[1])**2 + (b-p[2])**2; if (d < bd) { best = i; bd = d } }); return best };
window.bench = {frames: 0, seen: [], cur: -1, connected: false};
const rfb = new RFB(document.getElementById("screen"), "WSURL");
rfb.addEventListener("connect", () => {
	const d = rfb._display, flip = d.flip.bind(d);
	d.flip = (fromQueue) => {
		const drawn = fromQueue || d._renderQ.length === 0;
		flip(fromQueue);
		if (!drawn) return;
		bench.frames++;
		const px = d._drawCtx.getImageData(MX, MY, 1, 1).data, c = cls(px[0], px[1], px[2]);
		if (c !== bench.cur) { bench.cur = c; bench.seen.push([Date.now(), c]); }
	};
	bench.connected = true;
});
rfb.addEventListener("disconnect", () => { bench.connected = false; bench.disconnected = true; });
</script></body></html>`

// --- the benchmark ---------------------------------------------------------------------------

type scene struct {
	name   string
	marker bool
	run    func(b *testing.B, ctx context.Context)
}

func BenchmarkDesktopCompare(b *testing.B) {
	for _, tool := range []string{"bwrap", "Xvfb", "openbox", "xterm", "xdotool", "x11vnc", "websockify", "chromium"} {
		testenv.LookPath(b, tool)
	}
	const novncDir = "/usr/share/novnc"
	if _, err := os.Stat(filepath.Join(novncDir, "core/rfb.js")); err != nil {
		testenv.Missing(b, "noVNC (Debian package novnc): %v", err)
	}
	g := startCmpGateway(b)
	var agent api.Agent
	apiCall(b, g.client, g.url, "POST", "/api/agents", api.CreateAgentRequest{
		Name: "bench-desktop", Backend: api.Backend{Type: api.BackendBwrap, Network: api.NetworkNone}, Share: api.LevelNone,
	}, http.StatusCreated, &agent)

	// The display: the first viewer starts it; the holder of control resizes it to 1080p.
	phProxy := startProxy(b, g.host)
	v := dialViewer(b, g, phProxy.addr(), agent.ID, true)
	waitFor(b, "the display's first Screen", 60*time.Second, func() bool { w, _ := v.size(); return w > 0 })
	if err := v.send(desktop.TakeControl{}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := v.send(desktop.ResizeRequest{W: cmpW, H: cmpH}); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "a 1920×1080 Screen", 30*time.Second, func() bool { w, h := v.size(); return w == cmpW && h == cmpH })
	v.send(desktop.ReleaseControl{})
	v.close()
	closedAt := time.Now()

	x := dialJailDisplay(b, g)
	p := newPainter(b, x)
	g.longExec(b, agent.ID, "xterm", `exec xterm -name benchterm -geometry 100x24+40+40`)
	home := bridges.AgentHome(g.dataDir, agent.ID)
	g.longExec(b, agent.ID, "x11vnc", `exec x11vnc -display :0 -unixsock "$HOME/vnc.sock" -rfbport 0 -forever -shared -nopw -quiet`)
	waitFor(b, "x11vnc's socket", 30*time.Second, func() bool { _, err := os.Stat(filepath.Join(home, "vnc.sock")); return err == nil })
	focusTerm := `xdotool search --classname benchterm windowactivate --sync`
	waitFor(b, "the xterm window", 30*time.Second, func() bool {
		var out api.ExecResult
		apiCall(b, g.client, g.url, "POST", "/api/agents/"+agent.ID+"/exec", api.ExecRequest{Command: []string{"sh", "-c", focusTerm}}, http.StatusOK, &out)
		return out.ExitCode == 0
	})

	wsAddr := freePort(b)
	ws := exec.Command("websockify", "--unix-target="+filepath.Join(home, "vnc.sock"), wsAddr)
	startChild(b, "websockify.log", ws)
	waitFor(b, "websockify", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", wsAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	vncProxy := startProxy(b, wsAddr)
	pal := fmt.Sprint(cmpPalette)
	pal = "[" + strings.ReplaceAll(strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(pal, "["), "]"), "] [", "],["), " ", ",") + "]"
	page := strings.NewReplacer("PALETTE", pal, "WSURL", "ws://"+vncProxy.addr()+"/websockify",
		"MX", strconv.Itoa(cmpMarkerX+cmpMarkerSize/2), "MY", strconv.Itoa(cmpMarkerY+cmpMarkerSize/2)).Replace(novncPage)
	mux := http.NewServeMux()
	mux.Handle("/novnc/", http.StripPrefix("/novnc/", http.FileServer(http.Dir(novncDir))))
	mux.HandleFunc("/bench.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})
	pageLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	pageSrv := &http.Server{Handler: mux}
	go pageSrv.Serve(pageLn) // owner: cleanup
	b.Cleanup(func() { pageSrv.Close() })

	x11vncPids := descendantsNamed(readProcs(), g.pid, "x11vnc")
	if len(x11vncPids) == 0 {
		b.Fatal("x11vnc is not running in the agent's jail")
	}

	drive := func(b *testing.B, cmd string) { g.exec(b, agent.ID, cmd) }
	var dragSteps atomic.Int64 // windows moves the drag scene made
	scenes := []scene{
		{name: "idle", run: func(b *testing.B, ctx context.Context) { time.Sleep(10 * time.Second) }},
		{name: "text", run: func(b *testing.B, ctx context.Context) {
			drive(b, focusTerm+` type --delay 100 `+shellQuote(cmpTypedLine))
			time.Sleep(time.Second)
		}},
		{name: "drag", marker: true, run: func(b *testing.B, ctx context.Context) {
			p.show(p.drag, true)
			end := time.Now().Add(8 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				// 8 px every 16 ms, there and back along the screen.
				x := i * 8 % (2 * (cmpW - 640))
				if x > cmpW-640 {
					x = 2*(cmpW-640) - x
				}
				xproto.ConfigureWindow(p.x, p.drag, xproto.ConfigWindowX|xproto.ConfigWindowY, []uint32{uint32(x), uint32(300 + (i/4)%40)})
				p.sync()
				dragSteps.Add(1)
				time.Sleep(16 * time.Millisecond)
			}
		}},
		{name: "motion", marker: true, run: func(b *testing.B, ctx context.Context) {
			p.show(p.motion, true)
			end := time.Now().Add(8 * time.Second)
			for i := 0; time.Now().Before(end); i++ { // 60 Hz
				xproto.CopyArea(p.x, xproto.Drawable(p.frames[i%3]), xproto.Drawable(p.motion), p.gc, 0, 0, 0, 0, cmpW, cmpH)
				p.sync()
				time.Sleep(16 * time.Millisecond)
			}
		}},
	}
	after := func(name string) { // back to the desktop, outside the measurement
		switch name {
		case "text":
			drive(b, focusTerm+` key ctrl+u`)
		case "drag":
			p.show(p.drag, false)
		case "motion":
			p.show(p.motion, false)
		}
	}

	runScenes := func(sysName string, s system, full float64, fullWhat string) {
		fmt.Printf("# desktop compare: %s: full-frame-%% is a scene's bytes against %s: %.0f bytes\n", sysName, fullWhat, full)
		for _, sc := range scenes {
			b.Run(sysName+"/"+sc.name, func(b *testing.B) {
				time.Sleep(cmpSettle)
				s.shown(b)
				p.takePaints()
				stop := make(chan struct{})
				var mwg sync.WaitGroup
				if sc.marker {
					p.show(p.marker, true)
					mwg.Add(1)
					go func() { // owner: this scene; ends at stop
						defer mwg.Done()
						t := time.NewTicker(cmpMarkerTick)
						defer t.Stop()
						for {
							select {
							case <-stop:
								return
							case <-t.C:
								p.tickMarker()
							}
						}
					}()
				}
				b.ResetTimer()
				var cp0 int64
				if ps, ok := s.(*portholeSys); ok {
					cp0 = ps.v.copies.Load()
				}
				b0, f0 := s.bytes(), s.frames(b)
				c0, a0 := s.cpu()
				t0 := time.Now()
				sc.run(b, context.Background())
				close(stop)
				mwg.Wait()
				if sc.marker {
					time.Sleep(500 * time.Millisecond) // the last marker reaches the viewer
				}
				el := time.Since(t0).Seconds()
				c1, a1 := s.cpu()
				by, fr := s.bytes()-b0, s.frames(b)-f0
				b.StopTimer()
				lat := latencies(p.takePaints(), s.shown(b))
				if sc.marker {
					p.show(p.marker, false)
				}
				after(sc.name)
				b.ReportMetric(float64(by)/el, "B/s")
				b.ReportMetric(float64(by), "bytes")
				b.ReportMetric(float64(fr)/el, "fps")
				b.ReportMetric((c1-c0)*1000/el, "ms-cpu/s")
				b.ReportMetric((a1-a0)*1000/el, "aux-ms-cpu/s")
				if fr > 0 {
					b.ReportMetric((c1-c0)*1000/float64(fr), "ms-cpu/frame")
				}
				if full > 0 {
					b.ReportMetric(100*float64(by)/full, "full-frame-%")
				}
				if sc.name == "text" {
					b.ReportMetric(full, "full-frame-bytes")
				}
				if ps, ok := s.(*portholeSys); ok && sc.name == "drag" {
					b.ReportMetric(float64(ps.v.copies.Load()-cp0), "copies")
				}
				if len(lat) > 0 {
					b.ReportMetric(pct(lat, 0.5), "ms-p50")
					b.ReportMetric(pct(lat, 0.99), "ms-p99")
					b.ReportMetric(float64(len(lat)), "markers")
				}
			})
		}
	}

	// x11vnc first: Porthole's helper stream lingers 30 s after its last viewer left
	// (desktop.DefaultGrace) and would capture x11vnc's scenes too.
	time.Sleep(time.Until(closedAt.Add(desktop.DefaultGrace + 2*time.Second)))
	ctx := launchChromium(b)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	pageURL := "http://" + pageLn.Addr().String() + "/bench.html"
	err = chromedp.Do(tctx, chromedp.Navigate(pageURL))
	if err == nil {
		_, err = chromedp.Run(tctx, chromedp.Poll[bool](`window.bench && bench.connected && bench.frames > 0`, chromedp.WithPollingInterval(50*time.Millisecond)))
	}
	if err != nil {
		cancel()
		b.Fatalf("noVNC: connect to x11vnc: %v", err)
	}
	cancel()
	time.Sleep(2 * time.Second)
	vnc := &vncSys{proxy: vncProxy, ctx: ctx, x11vnc: x11vncPids[0], websockfy: ws.Process.Pid}
	vncFull := float64(vnc.bytes())
	runScenes("x11vnc", vnc, vncFull, "what noVNC received connecting to x11vnc (its first full update of the 1920×1080 screen)")
	chromedp.Do(ctx, chromedp.Navigate("about:blank"))

	phProxy.down.Store(0)
	v = dialViewer(b, g, phProxy.addr(), agent.ID, true)
	waitFor(b, "Porthole's keyframe", 30*time.Second, func() bool { return v.frames.Load() > 0 })
	time.Sleep(time.Second)
	ph := &portholeSys{g: g, proxy: phProxy, v: v}
	v.mu.Lock()
	kf := fmt.Sprintf("JPEG %d, PNG %d, palette %d bytes", v.kf[desktop.EncJPEG], v.kf[desktop.EncPNG], v.kf[desktop.EncPalette])
	v.mu.Unlock()
	runScenes("porthole", ph, float64(ph.bytes()), "what a viewer received connecting to Porthole's gateway: the keyframe of the "+
		"whole 1920×1080 screen (black root, openbox, a 100×24 xterm; "+kf+") with Hello, Control, Viewers and the cursor")

	// Gateway CPU with 1 and with 20 viewers, the drag scene (viewers 2–20 only ack).
	drag := scenes[2]
	measure := func() (gw, total, fps, steps float64) {
		time.Sleep(cmpSettle)
		c0, g0 := ph.cpu()
		f0, s0 := v.frames.Load(), dragSteps.Load()
		t0 := time.Now()
		drag.run(b, context.Background())
		el := time.Since(t0).Seconds()
		c1, g1 := ph.cpu()
		after(drag.name)
		return (g1 - g0) * 1000 / el, (c1 - c0) * 1000 / el, float64(v.frames.Load()-f0) / el, float64(dragSteps.Load()-s0) / el
	}
	b.Run("porthole/viewers", func(b *testing.B) {
		gw1, tot1, fps1, steps1 := measure()
		for range 19 {
			dialViewer(b, g, phProxy.addr(), agent.ID, false)
		}
		time.Sleep(time.Second)
		gw20, tot20, fps20, steps20 := measure()
		b.ReportMetric(steps1, "moves/s-1v")
		b.ReportMetric(steps20, "moves/s-20v")
		b.ReportMetric(gw1, "gw-ms-cpu/s-1v")
		b.ReportMetric(gw20, "gw-ms-cpu/s-20v")
		b.ReportMetric(gw20/gw1, "x-gw-cpu-20v")
		b.ReportMetric(tot1, "ms-cpu/s-1v")
		b.ReportMetric(tot20, "ms-cpu/s-20v")
		b.ReportMetric(tot20/tot1, "x-cpu-20v")
		b.ReportMetric(fps1, "fps-1v")
		b.ReportMetric(fps20, "fps-20v")
	})
	v.mu.Lock()
	if len(v.errs) > 0 {
		b.Errorf("viewer errors: %v", v.errs)
	}
	v.mu.Unlock()
}

func waitFor(b *testing.B, what string, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
