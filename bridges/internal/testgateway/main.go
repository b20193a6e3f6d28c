// Command testgateway is a minimal gateway for the bridges kill -9 test: it starts a bwrap agent and
// a container agent through a bridges.Manager, runs a marked `sleep 1000` in each, prints the host
// pids of its helpers and READY, then waits to be killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/bridges"
)

func main() {
	// The gateway's startup path (cmd/porthole): nothing inherited reaches a sandbox.
	if err := bridges.CloseInheritedFDs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	data := flag.String("data", "", "data dir")
	helper := flag.String("helper", "", "helper binary")
	engine := flag.String("engine", "", "container engine")
	image := flag.String("image", "", "agent image")
	marker := flag.String("marker", "", "argv[0] of the marked sleeps")
	backends := flag.String("backends", "bwrap,container", "backends to start")
	script := flag.String("exec", "", "run this sh script in each agent, print its output as EXEC lines, and exit")
	containerNet := flag.String("container-network", api.NetworkNone, "network of the container agent")
	flag.Parse()
	m, err := bridges.NewManager(bridges.Config{
		DataDir: *data, HelperPath: *helper, ContainerEngine: *engine, DefaultImage: *image,
		IdleTimeout: time.Hour, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	for _, typ := range strings.Split(*backends, ",") {
		a := api.Agent{ID: "k9" + typ, Backend: api.Backend{Type: typ, Network: api.NetworkNone}}
		if typ == api.BackendContainer {
			a.Backend.Network = *containerNet
		}
		c, err := m.Conn(ctx, a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("HELPER %s %s\n", typ, c.Process().Desc)
		if *script != "" {
			res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"sh", "-c", *script}})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			for _, line := range strings.Split(strings.TrimSpace(res.Stdout+res.Stderr), "\n") {
				fmt.Printf("EXEC %s %s\n", typ, line)
			}
			continue
		}
		mark := *marker + "-" + typ
		go m.Exec(ctx, a, api.ExecRequest{Command: []string{"bash", "-c", "exec -a " + mark + " sleep 1000"}, TimeoutS: 3600})
		for i := 0; ; i++ {
			res, err := m.Exec(ctx, a, api.ExecRequest{Command: []string{"pgrep", "-f", "^" + mark}})
			if err == nil && res.ExitCode == 0 {
				break
			}
			if i > 200 {
				fmt.Fprintln(os.Stderr, "marked sleep did not start in", typ, err)
				os.Exit(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if *script != "" {
		m.Close()
		return
	}
	fmt.Println("READY")
	select {}
}
