//go:build !js

package desktop

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkFanOut: the gateway fanning a window drag (a Copy, the uncovered strip and a
// FrameEnd per frame, 120 frames a second) out to 1 and to 20 viewers over real WebSockets.
// The viewers run in a child process (this test binary, see fanOutViewers), so this process's
// CPU is the gateway's (and the fake helper's, the same for both).
func BenchmarkFanOut(b *testing.B) {
	var per [2]float64
	for k, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("viewers=%d", n), func(b *testing.B) {
			e := newEnv(b, Config{})
			u := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/?mode=watch&id="
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "DESKTOP_FANOUT_VIEWERS="+strconv.Itoa(n), "DESKTOP_FANOUT_URL="+u)
			cmd.Stderr = os.Stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { stdin.Close(); cmd.Wait() }()
			lines := bufio.NewScanner(stdout)
			f := e.helper()
			tr := newTruth(1920, 1080)
			tr.sent = nil
			f.send(tr.screen)
			f.send(tr.rect(0, 0, 1920, 1080, 64<<10))
			f.send(FrameEnd{Seq: 1})
			if !lines.Scan() || lines.Text() != "ready" { // every viewer drew the keyframe
				b.Fatalf("the viewers process: %q %v", lines.Text(), lines.Err())
			}
			frames := max(b.N, 360)
			strip := Rect{Y: 300, W: 8, H: 400, Enc: EncPalette, Data: []byte{0, 0, 0, 0}}
			tick := time.NewTicker(time.Second / 120)
			defer tick.Stop()
			b.ResetTimer()
			cpu0, cs0 := cpuNow(), switchesNow()
			for i := range frames {
				<-tick.C
				x := 8 * (i % 150)
				strip.X = uint16(x)
				f.send(Copy{SrcX: uint16(x), SrcY: 300, X: uint16(x + 8), Y: 300, W: 640, H: 400})
				f.send(strip)
				f.send(FrameEnd{Seq: uint32(i + 2)})
			}
			time.Sleep(100 * time.Millisecond) // the last frames reach the viewers
			cpu, cs := cpuNow()-cpu0, switchesNow()-cs0
			b.StopTimer()
			stdin.Close()
			drawn := 0
			if lines.Scan() {
				drawn, _ = strconv.Atoi(lines.Text()) // frames viewer 0 drew
			}
			per[k] = float64(cpu.Microseconds()) / float64(frames)
			b.ReportMetric(per[k], "µs-cpu/frame")
			b.ReportMetric(float64(cs)/float64(frames), "switches/frame")
			b.ReportMetric(float64(drawn-1)/float64(frames), "drawn/sent")
			if k == 1 && per[0] > 0 {
				b.ReportMetric(per[1]/per[0], "x-cpu-vs-1")
			}
		})
	}
}

// fanOutViewers is the child process of BenchmarkFanOut: n viewers that ack every FrameEnd;
// it prints "ready" once each drew a frame and, when stdin closes, viewer 0's frame count.
func fanOutViewers(n int, u string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := make([]int, n)
	ready := make(chan struct{}, n)
	var conns []*websocket.Conn
	for i := range n {
		ws, _, err := websocket.DefaultDialer.Dial(u+"v"+strconv.Itoa(i), http.Header{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(1)
		}
		conns = append(conns, ws)
		wg.Add(1)
		go func() { // owner: fanOutViewers; ends when ws closes
			defer wg.Done()
			for {
				_, data, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if len(data) == 5 && Op(data[0]) == OpFrameEnd {
					mu.Lock()
					counts[i]++
					if counts[i] == 1 {
						ready <- struct{}{}
					}
					mu.Unlock()
					ws.WriteMessage(websocket.BinaryMessage, append([]byte{byte(OpAck)}, data[1:]...))
				}
			}
		}()
	}
	for range n {
		<-ready
	}
	fmt.Println("ready")
	os.Stdin.Read(make([]byte, 1))
	mu.Lock()
	fmt.Println(counts[0])
	mu.Unlock()
	for _, ws := range conns {
		ws.Close()
	}
	wg.Wait()
}

// switchesNow is how many times this process's threads gave up or lost the CPU.
func switchesNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Nvcsw + ru.Nivcsw
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
