// Command benchtable reads `go test -bench` output and prints Porthole's figures against the targets and same-run baselines of DESIGN.md.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// target is one line of the table: a figure compared with a constant or with another figure of the same run.
type target struct {
	what        string  // what the row shows
	bench       string  // benchmark name without the -N suffix
	unit        string  // metric unit as reported by b.ReportMetric
	op          string  // "<=" or ">="
	limit       float64 // constant limit, or the factor when base is set
	base, bunit string  // baseline figure measured in the same run (optional)
}

var targets = []target{
	{what: "terminal payload rate vs raw PTY", bench: "BenchmarkPortholeWS", unit: "MB/s", op: ">=", limit: 0.9, base: "BenchmarkRawPTY", bunit: "MB/s"},
	{what: "terminal CPU per MB vs gotty-style", bench: "BenchmarkPortholeWS", unit: "cpu-s/MB", op: "<=", limit: 0.5, base: "BenchmarkGottyBaseline", bunit: "cpu-s/MB"},
	{what: "keystroke echo p50", bench: "BenchmarkEchoLatency", unit: "ms-p50", op: "<=", limit: 5},
	{what: "keystroke echo p99", bench: "BenchmarkEchoLatency", unit: "ms-p99", op: "<=", limit: 50},
	{what: "Ctrl-C under a yes flood", bench: "BenchmarkCtrlCFlood", unit: "ms", op: "<=", limit: 250},
	{what: "helper cold start, bwrap", bench: "BenchmarkHelperColdStart/bwrap", unit: "ms", op: "<=", limit: 150},
	{what: "helper cold start, container exec", bench: "BenchmarkHelperColdStart/container", unit: "ms", op: "<=", limit: 500},
	{what: "exec round trip p50, bwrap", bench: "BenchmarkExecRoundTrip/bwrap", unit: "ms-p50", op: "<=", limit: 5},
	{what: "app.wasm transferred (brotli)", bench: "BenchmarkAppWasmSize", unit: "MB-br", op: "<=", limit: 2},
	{what: "app.wasm transferred (gzip)", bench: "BenchmarkAppWasmSize", unit: "MB-gz", op: "<=", limit: 2},
	{what: "app cold first render", bench: "BenchmarkAppRender", unit: "ms-cold", op: "<=", limit: 400},
	{what: "app warm render", bench: "BenchmarkAppRender", unit: "ms-warm", op: "<=", limit: 150},
}

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse collects figures by benchmark and unit; a benchmark run twice keeps its last figures.
func parse(r io.Reader) (map[string]map[string]float64, []string) {
	figs := map[string]map[string]float64{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		if figs[m[1]] == nil {
			figs[m[1]] = map[string]float64{}
			order = append(order, m[1])
		}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				figs[m[1]][f[i+1]] = v
			}
		}
	}
	return figs, order
}

func main() {
	figs, order := parse(os.Stdin)
	fmt.Println()
	fmt.Printf("%-38s %14s %-10s %-26s %s\n", "target", "measured", "unit", "against", "verdict")
	fmt.Println(strings.Repeat("-", 100))
	failed := 0
	for _, t := range targets {
		v, ok := figs[t.bench][t.unit]
		if !ok {
			fmt.Printf("%-38s %14s %-10s %-26s %s\n", t.what, "-", t.unit, "", "NOT MEASURED ("+t.bench+")")
			failed++
			continue
		}
		limit, against := t.limit, fmt.Sprintf("%s %g", t.op, t.limit)
		if t.base != "" {
			b, ok := figs[t.base][t.bunit]
			if !ok {
				fmt.Printf("%-38s %14.3f %-10s %-26s %s\n", t.what, v, t.unit, "", "NO BASELINE ("+t.base+")")
				failed++
				continue
			}
			limit = t.limit * b
			against = fmt.Sprintf("%s %g× %.3f", t.op, t.limit, b)
		}
		pass := (t.op == "<=" && v <= limit) || (t.op == ">=" && v >= limit)
		verdict := "ok"
		if !pass {
			verdict = "MISSED"
			failed++
		}
		fmt.Printf("%-38s %14.3f %-10s %-26s %s\n", t.what, v, t.unit, against, verdict)
	}
	fmt.Println()
	fmt.Println("all figures of this run:")
	for _, name := range order {
		var units []string
		for u := range figs[name] {
			units = append(units, u)
		}
		sort.Strings(units)
		var parts []string
		for _, u := range units {
			parts = append(parts, fmt.Sprintf("%g %s", figs[name][u], u))
		}
		fmt.Printf("  %-40s %s\n", name, strings.Join(parts, ", "))
	}
	if failed > 0 {
		fmt.Printf("\n%d target(s) missed or not measured\n", failed)
	}
}
