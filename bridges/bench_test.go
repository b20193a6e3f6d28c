package bridges

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/internal/testenv"
)

func reportMs(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(sum/time.Duration(len(ds))), name+"-ms-mean")
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-ms-p50")
	b.ReportMetric(ms(ds[min(len(ds)-1, len(ds)*99/100)]), name+"-ms-p99")
	b.ReportMetric(0, "ns/op") // the per-op time includes the stops between starts; the ms metrics are what counts
}

// BenchmarkHelperColdStart: from nothing running to a helper that answered the handshake.
// bwrap: a new jail (target < 150 ms). bwrap_full: a new jail with network "full", its
// slirp4netns attached and ready before the helper runs (target < 300 ms). container: start the
// stopped container, exec the helper. container_exec: exec a new helper into the running
// container (target < 500 ms).
func BenchmarkHelperColdStart(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct{ name, typ, network string }{
		{api.BackendBwrap, api.BackendBwrap, api.NetworkNone},
		{"bwrap_full", api.BackendBwrap, api.NetworkFull},
		{api.BackendContainer, api.BackendContainer, api.NetworkNone},
	} {
		typ := c.typ
		b.Run(c.name, func(b *testing.B) {
			requireBackend(b, typ)
			m, _ := newTestManager(b, nil)
			a := agent("bench1", typ, c.network, api.Limits{})
			if _, err := m.Conn(ctx, a); err != nil { // image/container created once
				b.Fatal(err)
			}
			m.Stop(ctx, a.ID)
			var ds []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := m.Conn(ctx, a); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
				b.StopTimer()
				if err := m.Stop(ctx, a.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportMs(b, "start", ds)
		})
	}
	b.Run("container_exec", func(b *testing.B) {
		requireBackend(b, api.BackendContainer)
		m, _ := newTestManager(b, nil)
		a := agent("bench2", api.BackendContainer, api.NetworkNone, api.Limits{})
		// The container runs from here on, with no helper of the Manager in it (a helper's exit
		// kills every other process of the container).
		spec := AgentSpec{ID: a.ID, Home: AgentHome(m.cfg.DataDir, a.ID), Backend: a.Backend, Limits: m.limits(a.Backend.Limits)}
		os.MkdirAll(spec.Home, 0o700)
		cli, err := m.container.ping(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.container.ensure(ctx, cli, spec); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.container.Forget(context.Background(), a.ID) })
		var ds []time.Duration
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			p, err := m.container.Launch(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			sess, err := yamux.Client(p.Pipe, yamuxConfig())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := handshake(ctx, sess); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			sess.Close()
			p.Pipe.Close()
			<-p.Done()
			b.StartTimer()
		}
		reportMs(b, "start", ds)
	})
}

// BenchmarkExecRoundTrip: Exec of `true` through a running helper (target for bwrap: p50 < 5 ms).
func BenchmarkExecRoundTrip(b *testing.B) {
	ctx := context.Background()
	for _, typ := range []string{api.BackendBwrap, api.BackendContainer} {
		b.Run(typ, func(b *testing.B) {
			requireBackend(b, typ)
			m, _ := newTestManager(b, nil)
			a := agent("bench3", typ, api.NetworkNone, api.Limits{})
			req := api.ExecRequest{Command: []string{"true"}}
			if _, err := m.Exec(ctx, a, req); err != nil {
				b.Fatal(err)
			}
			var ds []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				res, err := m.Exec(ctx, a, req)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("exec: %+v %v", res, err)
				}
				ds = append(ds, time.Since(start))
			}
			b.StopTimer()
			reportMs(b, "exec", ds)
			// Baseline in the same run: the gateway itself spawning `true` (no helper, no jail).
			// On a loaded machine process creation dominates both.
			var base []time.Duration
			for range min(len(ds), 50) {
				start := time.Now()
				if err := exec.Command("true").Run(); err != nil {
					b.Fatal(err)
				}
				base = append(base, time.Since(start))
			}
			slices.Sort(base)
			b.ReportMetric(float64(base[len(base)/2])/float64(time.Millisecond), "local-spawn-ms-p50")
		})
	}
}

// BenchmarkNetworkFullDownload: a "full" bwrap agent downloads 64 MiB over HTTP from a server on
// the host's non-loopback address (through slirp4netns), against the host itself running the same
// client (the test helper's `nettest get`) in the same run. Reports both rates and their ratio.
func BenchmarkNetworkFullDownload(b *testing.B) {
	requireBackend(b, api.BackendBwrap)
	testenv.LookPath(b, "slirp4netns")
	const size = 64 << 20
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(outsideIP(b), "0"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(payload)
	})}
	go srv.Serve(ln) // owner: this benchmark; ends at srv.Close
	b.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String() + "/blob"
	ctx := context.Background()
	m, _ := newTestManager(b, nil)
	a := agent("benchdl", api.BackendBwrap, api.NetworkFull, api.Limits{})
	get := func() time.Duration {
		start := time.Now()
		res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{HelperPathInJail, "nettest", "get", url}, TimeoutS: 120})
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != strconv.Itoa(size) {
			b.Fatalf("download in the agent: %+v %v", res, err)
		}
		return time.Since(start)
	}
	get() // the helper is up, the connection path warm
	var agentD, hostD time.Duration
	n := 0
	b.ResetTimer()
	for b.Loop() {
		agentD += get()
		b.StopTimer()
		start := time.Now()
		if out, err := exec.Command(helperBin, "nettest", "get", url).Output(); err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(size) {
			b.Fatalf("download on the host: %q %v", out, err)
		}
		hostD += time.Since(start)
		n++
		b.StartTimer()
	}
	mb := float64(size) / 1e6 * float64(n)
	agentRate, hostRate := mb/agentD.Seconds(), mb/hostD.Seconds()
	b.ReportMetric(agentRate, "MB/s")
	b.ReportMetric(hostRate, "host-MB/s")
	b.ReportMetric(agentRate/hostRate, "full/host-ratio")
	b.ReportMetric(0, "ns/op")
}
