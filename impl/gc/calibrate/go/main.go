// Command calibrate measures the Go runtime's collector under a KV-store
// workload: a live heap of map entries and a paced mutator that allocates
// request and reply buffers and overwrites values. It prints one JSON object
// with the runtime's metrics over a measured window; run it with
// GODEBUG=gctrace=1 to also get one line per cycle on stderr.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"
)

// processStart approximates the runtime's start, the origin of the "@t s"
// times in gctrace lines, so that cycles can be matched to the window.
var processStart = time.Now()

func since(t time.Time) float64 { return t.Sub(processStart).Seconds() }

func main() {
	mode := flag.String("mode", "steady", "steady: paced mutator over a window; forced: time forced full collections")
	liveMiB := flag.Float64("live-mib", 64, "live heap to build, MiB (marked bytes after a full collection)")
	valueSize := flag.Int("value", 500, "value size, bytes")
	update := flag.Float64("update", 0.5, "fraction of requests that overwrite a value (YCSB A: 0.5)")
	allocMiBs := flag.Float64("alloc-mib-s", 64, "steady: target allocation rate, MiB/s (sets the request rate)")
	warmup := flag.Duration("warmup", 4*time.Second, "steady: warm-up before the measured window")
	measure := flag.Duration("measure", 10*time.Second, "steady: measured window")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: leave the runtime's choice)")
	gogc := flag.Int("gogc", 100, "steady: GOGC during the run (-1: off)")
	limitRatio := flag.Float64("limit-ratio", 0, "steady: memory limit as a multiple of the live heap (0: none)")
	probeRate := flag.Float64("probe-rate", 0, "steady: tiny timed requests per second on a goroutine of their own (0: none)")
	cycles := flag.Int("cycles", 10, "forced: timed collections (after one untimed)")
	garbage := flag.Float64("garbage", 1, "forced: garbage allocated before each collection, as a multiple of the live heap")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()

	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	r := rand.New(rand.NewPCG(*seed, 0x5eed))
	s, live := buildStore(uint64(*liveMiB*(1<<20)), *valueSize, *update)
	config := map[string]any{
		"mode": *mode, "live_mib": *liveMiB, "value": *valueSize, "update": *update,
		"procs": runtime.GOMAXPROCS(0), "seed": *seed, "go": runtime.Version(),
	}
	var out map[string]any
	switch *mode {
	case "steady":
		config["alloc_mib_s"], config["warmup_s"], config["measure_s"] = *allocMiBs, warmup.Seconds(), measure.Seconds()
		config["gogc"], config["limit_ratio"], config["probe_rate"] = *gogc, *limitRatio, *probeRate
		out = runSteady(s, r, live, *gogc, *limitRatio, *allocMiBs, *warmup, *measure, *probeRate, *seed)
	case "forced":
		config["cycles"], config["garbage"] = *cycles, *garbage
		out = runForced(s, r, live, *cycles, *garbage)
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	out["config"] = config
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
}
