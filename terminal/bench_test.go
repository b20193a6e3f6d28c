//go:build !js

package terminal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"github.com/porthole/porthole/bridges"
)

// benchFileSize is the size of the file the throughput benchmarks cat (≥ 100 MB).
const benchFileSize = 100 << 20

var (
	benchFileOnce sync.Once
	benchFilePath string
	benchFileErr  error
)

// benchFile returns a ≥100 MB file of printable lines, made once per test binary run.
func benchFile(b *testing.B) string {
	benchFileOnce.Do(func() {
		dir, err := os.MkdirTemp("", "porthole-bench-")
		if err != nil {
			benchFileErr = err
			return
		}
		benchFilePath = filepath.Join(dir, "payload.txt")
		f, err := os.Create(benchFilePath)
		if err != nil {
			benchFileErr = err
			return
		}
		defer f.Close()
		r := rand.New(rand.NewSource(1))
		line := make([]byte, 100)
		var buf bytes.Buffer
		for n := 0; n < benchFileSize; n += len(line) {
			for i := range line[:99] {
				line[i] = byte(' ' + r.Intn(95))
			}
			line[99] = '\n'
			buf.Write(line)
			if buf.Len() > 1<<20 {
				f.Write(buf.Bytes())
				buf.Reset()
			}
		}
		_, benchFileErr = f.Write(buf.Bytes())
	})
	if benchFileErr != nil {
		b.Fatal(benchFileErr)
	}
	return benchFilePath
}

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rawCat cats path through a PTY read as fast as possible; it returns the bytes read,
// the wall time and this process's CPU time.
func rawCat(b *testing.B, path string) (int64, float64, float64) {
	cmd := exec.Command("cat", path)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		b.Fatal(err)
	}
	defer ptmx.Close()
	defer cmd.Wait()
	t0, cpu0 := time.Now(), cpuSeconds()
	var total int64
	buf := make([]byte, 32<<10)
	for {
		n, err := ptmx.Read(buf)
		total += int64(n)
		if err != nil {
			break
		}
	}
	return total, time.Since(t0).Seconds(), cpuSeconds() - cpu0
}

// BenchmarkRawPTY: cat of the file through a PTY, read as fast as possible.
func BenchmarkRawPTY(b *testing.B) {
	path := benchFile(b)
	var total int64
	var el, cpu float64
	b.ResetTimer()
	for range b.N {
		n, e, c := rawCat(b, path)
		total, el, cpu = total+n, el+e, cpu+c
	}
	b.SetBytes(total / int64(b.N))
	b.ReportMetric(float64(total)/1e6/el, "MB/s")
	b.ReportMetric(cpu/(float64(total)/1e6), "CPU-s/MB")
}

// benchClient is a lean WebSocket client for the benchmarks: one goroutine reads,
// acks and looks for markers.
type benchClient struct {
	ws    *websocket.Conn
	buf   []byte
	tail  []byte // last bytes of output, to find markers across frames
	bytes int64
}

func benchDial(b *testing.B, srv *testServer) *benchClient {
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/?agent=bench&user=bench&mode=drive"
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	return &benchClient{ws: ws}
}

// read reads one message into a reused buffer (valid until the next read).
func (c *benchClient) read() ([]byte, error) {
	return readInto(c.ws, &c.buf)
}

// readInto reads one WebSocket message into *buf, reusing it (both benchmark clients use it).
func readInto(ws *websocket.Conn, buf *[]byte) ([]byte, error) {
	_, r, err := ws.NextReader()
	if err != nil {
		return nil, err
	}
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			*buf = b
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (c *benchClient) send(m Message) error {
	return c.ws.WriteMessage(websocket.BinaryMessage, Encode(m))
}

// until reads frames (acking output) until f returns true for a message.
func (c *benchClient) until(f func(Message) bool) error {
	for {
		c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		data, err := c.read()
		if err != nil {
			return fmt.Errorf("read (last output %q): %w", c.tail, err)
		}
		m, err := Decode(data)
		if err != nil {
			return err
		}
		if o, ok := m.(Output); ok {
			c.bytes += int64(len(o.Data))
			if err := c.send(Ack{ID: o.ID, N: uint32(len(o.Data))}); err != nil {
				return err
			}
		}
		if f(m) {
			return nil
		}
	}
}

// untilOutput reads until the output contains marker (also across frames).
func (c *benchClient) untilOutput(marker string) error {
	mk := []byte(marker)
	return c.until(func(m Message) bool {
		o, ok := m.(Output)
		if !ok {
			return false
		}
		d := o.Data
		found := bytes.Contains(d, mk)
		if !found && len(c.tail) > 0 {
			edge := append(c.tail, d[:min(len(d), len(mk)-1)]...)
			found = bytes.Contains(edge, mk)
		}
		if found {
			c.tail = c.tail[:0]
			return true
		}
		if len(d) >= len(mk)-1 {
			c.tail = append(c.tail[:0], d[len(d)-(len(mk)-1):]...)
		} else {
			c.tail = append(c.tail, d...)
			c.tail = c.tail[max(0, len(c.tail)-(len(mk)-1)):]
		}
		return false
	})
}

// benchTerminal opens a terminal on an in-process helper and waits for its prompt.
func benchTerminal(b *testing.B) (*benchClient, uint32) {
	b.Setenv("HOME", b.TempDir())
	return benchTerminalOn(b, newInProcessHelper(b).Open)
}

// benchTerminalOn opens a terminal through open and waits for its prompt.
func benchTerminalOn(b *testing.B, open OpenFunc) (*benchClient, uint32) {
	srv := newTestServer(b, Config{}, open)
	c := benchDial(b, srv)
	if err := c.send(Open{Tag: 1, Cols: 80, Rows: 24}); err != nil {
		b.Fatal(err)
	}
	var id uint32
	if err := c.until(func(m Message) bool {
		if o, ok := m.(Opened); ok {
			id = o.ID
			return true
		}
		return false
	}); err != nil {
		b.Fatal(err)
	}
	if err := c.send(Input{ID: id, Data: []byte("PS1='PROMPT''> '\r")}); err != nil {
		b.Fatal(err)
	}
	if err := c.untilOutput("PROMPT> "); err != nil {
		b.Fatal(err)
	}
	return c, id
}

// BenchmarkPortholeWS: the same cat, end to end: a shell in the agent's helper, the helper
// stream, the Service and a real WebSocket client that acks as xterm.js does.
//
//   - jail: the deployed architecture: the helper runs in a bwrap jail through bridges.Manager;
//     CPU counts this process (gateway and client) plus the helper process.
//   - inprocess: the helper runs in this process (yamux over a socketpair); CPU counts all of it.
//
// Each iteration also runs the raw PTY cat and the gotty-style path, so that the ratios
// (x-raw: throughput over the raw PTY rate; x-gotty-CPU: CPU per MB over the baseline's)
// compare runs made under the same machine load.
func BenchmarkPortholeWS(b *testing.B) {
	path := benchFile(b)
	gotty := gottyServer(b, path)
	for _, mode := range []string{"jail", "inprocess"} {
		b.Run(mode, func(b *testing.B) {
			var c *benchClient
			var id uint32
			var helperCPU func() float64
			catPath := path
			if mode == "jail" {
				j := newJail(b)
				dataDir := j.dataDir
				c, id = benchTerminalOn(b, j.Open)
				home := bridges.AgentHome(dataDir, "bench")
				// A hard link, or a copy where the home is a filesystem of its own (a root
				// gateway mounts each home from a size-limited image).
				if err := os.Link(path, filepath.Join(home, "payload.txt")); err != nil {
					if !errors.Is(err, syscall.EXDEV) {
						b.Fatal(err)
					}
					copyPayload(b, path, filepath.Join(home, "payload.txt"))
				}
				catPath = "/home/agent/payload.txt"
				helperCPU = descendantsCPU("porthole")
			} else {
				b.Setenv("HOME", b.TempDir())
				c, id = benchTerminalOn(b, newInProcessHelper(b).Open)
				helperCPU = func() float64 { return 0 }
			}
			var pBytes, rBytes, gBytes int64
			var pTime, rTime, gTime, pCPU, gCPU, hCPU float64
			b.ResetTimer()
			for range b.N {
				n, el, _ := rawCat(b, path)
				rBytes, rTime = rBytes+n, rTime+el

				c.bytes = 0
				t0, cpu0, h0 := time.Now(), cpuSeconds(), helperCPU()
				if err := c.send(Input{ID: id, Data: []byte("cat " + catPath + "; echo END''MARK\r")}); err != nil {
					b.Fatal(err)
				}
				if err := c.untilOutput("ENDMARK"); err != nil {
					b.Fatal(err)
				}
				pTime += time.Since(t0).Seconds()
				hCPU += helperCPU() - h0
				pCPU += cpuSeconds() - cpu0 + helperCPU() - h0
				pBytes += c.bytes

				n, el, cpu := gottyCat(b, gotty)
				gBytes, gTime, gCPU = gBytes+n, gTime+el, gCPU+cpu
			}
			b.StopTimer()
			rate, raw := float64(pBytes)/1e6/pTime, float64(rBytes)/1e6/rTime
			cpuMB, gottyMB := pCPU/(float64(pBytes)/1e6), gCPU/(float64(gBytes)/1e6)
			b.SetBytes(pBytes / int64(b.N))
			b.ReportMetric(rate, "MB/s")
			b.ReportMetric(raw, "raw-MB/s")
			b.ReportMetric(rate/raw, "x-raw")
			b.ReportMetric(cpuMB, "CPU-s/MB")
			if mode == "jail" {
				b.ReportMetric(hCPU/(float64(pBytes)/1e6), "helper-CPU-s/MB")
			}
			b.ReportMetric(gottyMB, "gotty-CPU-s/MB")
			b.ReportMetric(cpuMB/gottyMB, "x-gotty-CPU")
		})
	}
}

// descendantsCPU returns a function giving the CPU seconds of this process's live
// descendants named comm (the jailed helper), from /proc.
func descendantsCPU(comm string) func() float64 {
	return func() float64 {
		ents, _ := os.ReadDir("/proc")
		type proc struct {
			ppid int
			comm string
			cpu  float64
		}
		procs := map[int]proc{}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if l < 0 || r < l {
				continue
			}
			f := strings.Fields(s[r+1:])
			if len(f) < 13 {
				continue
			}
			ppid, _ := strconv.Atoi(f[1])
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			procs[pid] = proc{ppid: ppid, comm: s[l+1 : r], cpu: (ut + st) / 100}
		}
		self := os.Getpid()
		var total float64
		for pid, p := range procs {
			if p.comm != comm {
				continue
			}
			for q := p.ppid; q > 1; q = procs[q].ppid {
				if q == self {
					total += p.cpu
					break
				}
				if _, ok := procs[q]; !ok {
					break
				}
			}
			_ = pid
		}
		return total
	}
}

// gottyServer serves a gotty-style path: cat on a PTY read 1 KiB at a time, each read sent
// as a base64 text frame ("1" + base64, as gotty does).
func gottyServer(b *testing.B, path string) string {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		cmd := exec.Command("cat", path)
		ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
		if err != nil {
			return
		}
		defer cmd.Wait()
		defer ptmx.Close()
		buf := make([]byte, 1024)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				msg := "1" + base64.StdEncoding.EncodeToString(buf[:n])
				if ws.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
					return
				}
			}
			if err != nil {
				ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// gottyCat runs the file once through the gotty-style server with a client that decodes it.
func gottyCat(b *testing.B, url string) (int64, float64, float64) {
	t0, cpu0 := time.Now(), cpuSeconds()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	var total int64
	var buf, dec []byte
	for {
		data, err := readInto(ws, &buf)
		if err != nil {
			break
		}
		n := base64.StdEncoding.DecodedLen(len(data) - 1)
		dec = slices.Grow(dec[:0], n)[:n]
		n, err = base64.StdEncoding.Decode(dec, data[1:])
		if err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	return total, time.Since(t0).Seconds(), cpuSeconds() - cpu0
}

// BenchmarkGottyBaseline: the gotty-style path alone (1 KiB PTY reads, base64 text frames).
func BenchmarkGottyBaseline(b *testing.B) {
	url := gottyServer(b, benchFile(b))
	var total int64
	var el, cpu float64
	b.ResetTimer()
	for range b.N {
		n, e, c := gottyCat(b, url)
		total, el, cpu = total+n, el+e, cpu+c
	}
	b.SetBytes(total / int64(b.N))
	b.ReportMetric(float64(total)/1e6/el, "MB/s")
	b.ReportMetric(cpu/(float64(total)/1e6), "CPU-s/MB")
}

// Latency benchmarks take at least this many samples whatever -benchtime says, so that
// their percentiles mean something.
const (
	minEchoSamples  = 300
	minCtrlCSamples = 10
)

func percentile(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(float64(len(s))*p))].Microseconds()) / 1000
}

// BenchmarkEchoLatency: one keystroke to its echo by the shell (readline), over the WebSocket.
func BenchmarkEchoLatency(b *testing.B) { benchBoth(b, benchEchoLatency) }

func benchEchoLatency(b *testing.B, c *benchClient, id uint32) {
	var lat []time.Duration
	b.ResetTimer()
	for i := range max(b.N, minEchoSamples) {
		t0 := time.Now()
		if err := c.send(Input{ID: id, Data: []byte("a")}); err != nil {
			b.Fatal(err)
		}
		if err := c.until(func(m Message) bool {
			o, ok := m.(Output)
			return ok && bytes.Contains(o.Data, []byte("a"))
		}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if i%64 == 63 { // clear the line (^U) so it does not grow without bound
			c.send(Input{ID: id, Data: []byte{0x15}})
			c.until(func(m Message) bool { _, ok := m.(Output); return ok })
		}
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 0.5), "ms-p50")
	b.ReportMetric(percentile(lat, 0.99), "ms-p99")
}

// BenchmarkCtrlCFlood: from sending ^C during a `yes` flood to the shell's next prompt.
func BenchmarkCtrlCFlood(b *testing.B) { benchBoth(b, benchCtrlCFlood) }

func benchCtrlCFlood(b *testing.B, c *benchClient, id uint32) {
	var lat []time.Duration
	b.ResetTimer()
	for range max(b.N, minCtrlCSamples) {
		if err := c.send(Input{ID: id, Data: []byte("yes\r")}); err != nil {
			b.Fatal(err)
		}
		c.bytes = 0
		if err := c.until(func(Message) bool { return c.bytes > 4<<20 }); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := c.send(Input{ID: id, Data: []byte{0x03}}); err != nil {
			b.Fatal(err)
		}
		if err := c.untilOutput("PROMPT> "); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 0.5), "ms-p50")
	b.ReportMetric(percentile(lat, 1), "ms-max")
}

// benchBoth runs f on a terminal in a bwrap jail (the deployed path) and on an in-process helper.
func benchBoth(b *testing.B, f func(b *testing.B, c *benchClient, id uint32)) {
	b.Run("jail", func(b *testing.B) {
		c, id := benchTerminalOn(b, newJail(b).Open)
		f(b, c, id)
	})
	b.Run("inprocess", func(b *testing.B) {
		c, id := benchTerminal(b)
		f(b, c, id)
	})
}

// copyPayload copies the bench's payload file into an agent's home.
func copyPayload(b *testing.B, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}
