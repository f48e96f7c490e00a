package main

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"
)

// runForced times whole collections with the mutator stopped: the process's
// CPU time (getrusage) across runtime.GC(), which marks the live heap and
// then sweeps every span before it returns. OS CPU time only counts while a
// thread really runs, so unlike the runtime's own CPU estimates this figure
// does not grow when other work on the machine takes the cores. Before each
// collection the request path allocates garbage-ratio × live bytes, so that
// the heap holds as much garbage as an automatic cycle with GOGC=100 finds.
func runForced(s *store, r *rand.Rand, live uint64, cycles int, garbageRatio float64) map[string]any {
	debug.SetGCPercent(-1)
	var cpu, wall []float64
	var allocated uint64
	for i := range cycles + 1 {
		a0 := readUint("/gc/heap/allocs:bytes")
		for {
			a := readUint("/gc/heap/allocs:bytes") - a0
			if float64(a) >= garbageRatio*float64(live) {
				allocated += a
				break
			}
			for range 1024 {
				s.request(r)
			}
		}
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		t0 := time.Now()
		runtime.GC()
		w := time.Since(t0).Seconds()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		if i == 0 {
			continue // the first also pays for sweeping the build's leftovers
		}
		cpu = append(cpu, tv(ru1.Utime)-tv(ru0.Utime)+tv(ru1.Stime)-tv(ru0.Stime))
		wall = append(wall, w)
	}
	liveEnd := readUint("/gc/heap/live:bytes")
	return map[string]any{
		"heap": map[string]any{
			"entries":        len(s.keys),
			"raw_data_bytes": len(s.keys) * (keyLen + s.valueSize),
			"live_bytes":     live,
			"live_end_bytes": liveEnd,
			"objects_end":    readUint("/gc/heap/objects:objects"),
		},
		"forced": map[string]any{
			"cpu_s":         cpu,
			"wall_s":        wall,
			"cpu_median_s":  median(cpu),
			"wall_median_s": median(wall),
			"garbage_bytes": float64(allocated) / float64(cycles+1),
		},
		"machine": map[string]any{"loadavg_end": loadavg(), "nproc": runtime.NumCPU()},
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
