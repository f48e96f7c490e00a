package main

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"time"
)

// runSteady builds the scene a server lives in: the collector's settings
// applied after the live heap is built, a warm-up, then a measured window
// of paced requests (and of timed probes, if asked).
func runSteady(s *store, r *rand.Rand, live uint64, gogc int, limitRatio, allocMiBs float64,
	warmup, measure time.Duration, probeRate float64, seed uint64) map[string]any {
	afterBuild := takeSnapshot()
	debug.SetGCPercent(gogc)
	var limit int64 = -1
	if limitRatio > 0 {
		limit = int64(limitRatio * float64(live))
		debug.SetMemoryLimit(limit)
	}
	var p *prober
	if probeRate > 0 {
		p = newProber(s.valueSize)
	}

	// Warm-up, first half: learn the bytes one request allocates at a
	// provisional rate; second half: settle at the rate that gives the
	// target allocation rate.
	const guessBytesPerRequest = 1200.0
	rate := allocMiBs * (1 << 20) / guessBytesPerRequest
	half := warmup / 2
	t := time.Now()
	if p != nil {
		go p.run(rand.New(rand.NewPCG(seed, 2)), probeRate, t, t.Add(warmup), false)
	}
	a0 := readUint("/gc/heap/allocs:bytes")
	n := paceRequests(s, r, rate, t, t.Add(half))
	bytesPerRequest := float64(readUint("/gc/heap/allocs:bytes")-a0) / float64(max(n, 1))
	rate = allocMiBs * (1 << 20) / bytesPerRequest
	t = time.Now()
	paceRequests(s, r, rate, t, t.Add(warmup-half))

	begin := takeSnapshot()
	end := begin.wall.Add(measure)
	done := make(chan struct{})
	if p != nil {
		go func() {
			p.run(rand.New(rand.NewPCG(seed, 3)), probeRate, begin.wall, end, true)
			close(done)
		}()
	} else {
		close(done)
	}
	requests := paceRequests(s, r, rate, begin.wall, end)
	<-done
	fin := takeSnapshot()
	return report(s, live, afterBuild, limit, rate, requests, bytesPerRequest, begin, fin, p)
}

func report(s *store, live uint64, afterBuild snapshot, limit int64, rate float64, requests int64,
	bytesPerRequest float64, a, b snapshot, p *prober) map[string]any {
	wall := b.wall.Sub(a.wall).Seconds()
	d := func(name string) float64 { return b.values[name] - a.values[name] }
	cpu := map[string]float64{}
	for _, name := range cpuMetrics {
		cpu[name] = d(name)
	}
	ru := map[string]float64{
		"user_s":       tv(b.rusage.Utime) - tv(a.rusage.Utime),
		"sys_s":        tv(b.rusage.Stime) - tv(a.rusage.Stime),
		"sched_run_s":  b.runS - a.runS,
		"sched_wait_s": b.waitS - a.waitS,
	}
	own := ru["user_s"] + ru["sys_s"]
	nPauses, pq := pauseQuantiles(a.pauses, b.pauses, []float64{0.5, 0.9, 0.99, 1})
	out := map[string]any{
		"heap": map[string]any{
			"entries":             len(s.keys),
			"raw_data_bytes":      len(s.keys) * (keyLen + s.valueSize),
			"live_bytes":          live,
			"footprint_after_gc":  footprint(afterBuild),
			"memory_classes_end":  memoryClasses(b),
			"limit_bytes":         limit,
			"goal_end_bytes":      b.values["/gc/heap/goal:bytes"],
			"live_end_bytes":      b.values["/gc/heap/live:bytes"],
			"footprint_end_bytes": footprint(b),
		},
		"window": map[string]float64{"start_s": since(a.wall), "end_s": since(b.wall), "wall_s": wall},
		"load": map[string]any{
			"target_rate":       rate,
			"requests":          requests,
			"achieved_rate":     float64(requests) / wall,
			"bytes_per_request": bytesPerRequest,
			"alloc_bytes":       d("/gc/heap/allocs:bytes"),
			"alloc_objects":     d("/gc/heap/allocs:objects"),
			"alloc_mib_s":       d("/gc/heap/allocs:bytes") / wall / (1 << 20),
		},
		"cpu_metrics": cpu,
		"rusage":      ru,
		"machine": map[string]any{
			"busy_cores":        (b.machBusy - a.machBusy) / wall,
			"others_busy_cores": (b.machBusy - a.machBusy - own) / wall,
			"loadavg_start":     a.loadavg,
			"loadavg_end":       b.loadavg,
			"nproc":             runtime.NumCPU(),
		},
		"gc": map[string]any{
			"cycles":                d("/gc/cycles/total:gc-cycles"),
			"forced_cycles":         d("/gc/cycles/forced:gc-cycles"),
			"scannable_heap_bytes":  b.values["/gc/scan/heap:bytes"],
			"scannable_total_bytes": b.values["/gc/scan/total:bytes"],
			"limiter_last_enabled":  b.values["/gc/limiter/last-enabled:gc-cycle"],
			"cycles_end":            b.values["/gc/cycles/total:gc-cycles"],
			"pauses":                nPauses,
			"pause_p50_s":           pq[0],
			"pause_p90_s":           pq[1],
			"pause_p99_s":           pq[2],
			"pause_max_s":           pq[3],
		},
	}
	if p != nil {
		lat := slices.Clone(p.latencies)
		slices.Sort(lat)
		q := func(f float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return lat[int(f*float64(len(lat)-1))].Seconds()
		}
		out["probe"] = map[string]any{
			"n": len(lat), "p50_s": q(0.5), "p90_s": q(0.9), "p99_s": q(0.99), "p999_s": q(0.999), "max_s": q(1),
		}
	}
	return out
}
