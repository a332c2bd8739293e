// Command benchratio reads `go test -bench` output on stdin and prints a
// markdown table comparing each agentproc benchmark with its baseline in
// the same run.
//
// Benchmarks are paired by name: BenchmarkX/agentproc/... against
// BenchmarkX/<baseline>/... where baseline is os_exec, discard, idle,
// regexp_strip or in_process.
// Every metric is summarised by its median over -count runs, and the
// ratio is agentproc / baseline.
//
// Benchmarks with a size element "n=K" in their name are also compared
// across sizes: for each variant, the largest n against the smallest, so
// that a cost that grows faster than n shows as a ratio above n_max/n_min.
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

var baselines = []string{"os_exec", "discard", "idle", "regexp_strip", "in_process"}

func main() {
	samples := map[string]map[string][]float64{} // name -> unit -> values
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := stripProcs(fields[0])
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			order = append(order, name)
		}
		// fields[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			unit := fields[i+1]
			samples[name][unit] = append(samples[name][unit], v)
		}
	}
	fmt.Println("| benchmark | metric | agentproc (median) | baseline (median) | ratio |")
	fmt.Println("|---|---|---|---|---|")
	printed := false
	for _, name := range order {
		parts := strings.Split(name, "/")
		idx := slices.Index(parts, "agentproc")
		if idx < 0 {
			continue
		}
		for _, base := range baselines {
			bparts := slices.Clone(parts)
			bparts[idx] = base
			bname := strings.Join(bparts, "/")
			bs, ok := samples[bname]
			if !ok {
				continue
			}
			for _, unit := range units(samples[name]) {
				bv, ok := bs[unit]
				if !ok {
					continue
				}
				a, b := median(samples[name][unit]), median(bv)
				ratio := "n/a"
				if b != 0 {
					ratio = fmt.Sprintf("%.2f", a/b)
				}
				fmt.Printf("| %s | %s | %s | %s (%s) | %s |\n",
					strings.Join(slices.Delete(slices.Clone(parts), idx, idx+1), "/"), unit,
					fmtNum(a), fmtNum(b), base, ratio)
				printed = true
			}
		}
	}
	// Benchmarks without a baseline (absolute figures) are listed too.
	for _, name := range order {
		if strings.Contains(name, "/agentproc") || hasBaseline(name) {
			continue
		}
		for _, unit := range units(samples[name]) {
			fmt.Printf("| %s | %s | %s | | |\n", name, unit, fmtNum(median(samples[name][unit])))
			printed = true
		}
	}
	printed = printScaling(order, samples) || printed
	if !printed {
		fmt.Fprintln(os.Stderr, "benchratio: no benchmark lines on stdin")
		os.Exit(1)
	}
}

func hasBaseline(name string) bool {
	for _, b := range baselines {
		if strings.Contains(name, "/"+b) {
			return true
		}
	}
	return false
}

func units(m map[string][]float64) []string {
	var us []string
	for u := range m {
		us = append(us, u)
	}
	slices.Sort(us)
	return us
}

// stripProcs removes the -GOMAXPROCS suffix go test appends to names.
func stripProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtNum(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// printScaling prints, for every benchmark family with an "n=K" element,
// the median ns/op at the largest n against the smallest, and reports
// whether it printed anything.
func printScaling(order []string, samples map[string]map[string][]float64) bool {
	type size struct {
		n    int
		name string
	}
	families := map[string][]size{}
	var keys []string
	for _, name := range order {
		parts := strings.Split(name, "/")
		for i, p := range parts {
			v, ok := strings.CutPrefix(p, "n=")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				continue
			}
			parts[i] = "n=*"
			key := strings.Join(parts, "/")
			if families[key] == nil {
				keys = append(keys, key)
			}
			families[key] = append(families[key], size{n, name})
			break
		}
	}
	printed := false
	for _, key := range keys {
		sizes := families[key]
		if len(sizes) < 2 {
			continue
		}
		slices.SortFunc(sizes, func(a, b size) int { return a.n - b.n })
		lo, hi := sizes[0], sizes[len(sizes)-1]
		a, b := samples[hi.name]["ns/op"], samples[lo.name]["ns/op"]
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		if !printed {
			fmt.Println()
			fmt.Println("| benchmark | n | median ns/op | vs smallest n | n ratio |")
			fmt.Println("|---|---|---|---|---|")
			printed = true
		}
		fmt.Printf("| %s | %d : %d | %s : %s | %.2f | %.0f |\n", key, hi.n, lo.n,
			fmtNum(median(a)), fmtNum(median(b)), median(a)/median(b), float64(hi.n)/float64(lo.n))
	}
	return printed
}
