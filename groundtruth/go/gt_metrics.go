// gt_metrics.go: added by stutter's groundtruth harness to the `main`
// package of a Go program it builds (Replicant go-tcp); never part of that
// program's own source. With STUTTER_GT_METRICS=FILE set, it appends one
// line of runtime/metrics counters to FILE every STUTTER_GT_METRICS_MS
// milliseconds (default 100), and on SIGUSR1 runs a full collection and
// writes a line marked "forced" with the live heap right after it. Without
// the variable it does nothing.
//
// Why runtime/metrics: gctrace gives cycles and pauses but not the bytes
// and objects allocated, which the simulator's profiles need per
// operation; these counters are exact and cumulative, so the harness can
// take the difference over any window.
//
// Line format (space separated): unix_ns tag alloc_bytes alloc_objects
// free_bytes gc_cycles gc_cpu_s gc_idle_cpu_s total_cpu_s live_bytes
// goal_bytes total_mem_bytes

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"
)

var gtNames = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
	"/gc/heap/frees:bytes",
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/gc/heap/live:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/total:bytes",
}

func init() {
	path := os.Getenv("STUTTER_GT_METRICS")
	if path == "" {
		return
	}
	period := 100 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("STUTTER_GT_METRICS_MS")); err == nil && ms > 0 {
		period = time.Duration(ms) * time.Millisecond
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gt_metrics:", err)
		return
	}
	w := bufio.NewWriter(f)
	samples := make([]metrics.Sample, len(gtNames))
	for i, n := range gtNames {
		samples[i].Name = n
	}
	var mu sync.Mutex
	write := func(tag string) {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(samples)
		fmt.Fprintf(w, "%d %s", time.Now().UnixNano(), tag)
		for _, s := range samples {
			switch s.Value.Kind() {
			case metrics.KindUint64:
				fmt.Fprintf(w, " %d", s.Value.Uint64())
			case metrics.KindFloat64:
				fmt.Fprintf(w, " %.6f", s.Value.Float64())
			default:
				fmt.Fprint(w, " -1")
			}
		}
		fmt.Fprintln(w)
		w.Flush()
	}
	go func() {
		for range time.Tick(period) {
			write("tick")
		}
	}()
	forced := make(chan os.Signal, 1)
	signal.Notify(forced, syscall.SIGUSR1)
	go func() {
		for range forced {
			runtime.GC()
			write("forced")
		}
	}()
	write("start")
}
