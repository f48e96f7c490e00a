package main

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMetrics are the runtime's own CPU accounting. They are estimates from
// the time Ps spend in each state (GOMAXPROCS × wall time in total), not
// OS CPU time: a P whose thread the OS has descheduled still counts.
var cpuMetrics = []string{
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/gc/pause:cpu-seconds",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/scavenge/total:cpu-seconds",
	"/cpu/classes/user:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
}

var counterMetrics = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/cycles/forced:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
}

var gaugeMetrics = []string{
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
	"/gc/heap/objects:objects",
	"/gc/scan/heap:bytes",
	"/gc/scan/total:bytes",
	"/gc/gomemlimit:bytes",
	"/gc/limiter/last-enabled:gc-cycle",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/stacks:bytes",
}

const pauseHist = "/sched/pauses/total/gc:seconds"

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

type histogram struct {
	counts  []uint64
	buckets []float64
}

// snapshot is everything read at one instant, so that a window's figures
// are differences between two snapshots.
type snapshot struct {
	wall     time.Time
	values   map[string]float64
	pauses   histogram
	rusage   syscall.Rusage
	machBusy float64 // seconds of CPU busy on the whole machine, all cores
	runS     float64 // this process's threads: seconds on a CPU
	waitS    float64 // this process's threads: seconds runnable but waiting for a CPU
	loadavg  string
}

func takeSnapshot() snapshot {
	names := append(append(append([]string{}, cpuMetrics...), counterMetrics...), gaugeMetrics...)
	samples := make([]metrics.Sample, 0, len(names)+1)
	for _, n := range names {
		samples = append(samples, metrics.Sample{Name: n})
	}
	samples = append(samples, metrics.Sample{Name: pauseHist})
	metrics.Read(samples)
	s := snapshot{wall: time.Now(), values: map[string]float64{}}
	for _, sm := range samples {
		switch sm.Value.Kind() {
		case metrics.KindUint64:
			s.values[sm.Name] = float64(sm.Value.Uint64())
		case metrics.KindFloat64:
			s.values[sm.Name] = sm.Value.Float64()
		case metrics.KindFloat64Histogram:
			h := sm.Value.Float64Histogram()
			s.pauses = histogram{counts: append([]uint64{}, h.Counts...), buckets: append([]float64{}, h.Buckets...)}
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s.rusage)
	s.machBusy = machineBusySeconds()
	s.runS, s.waitS = schedstat()
	s.loadavg = loadavg()
	return s
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// machineBusySeconds reads the first line of /proc/stat: CPU time of every
// process on the machine, so that a window can report how busy the other
// work on this shared machine kept the cores.
func machineBusySeconds() float64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return -1
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return -1
	}
	var busy float64
	for i, f := range fields[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		busy += v
	}
	return busy / 100 // USER_HZ
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// quantiles of the pause histogram's increase between two snapshots, each
// reported as the upper bound of the bucket holding it.
func pauseQuantiles(a, b histogram, qs []float64) (uint64, []float64) {
	diff := make([]uint64, len(b.counts))
	var n uint64
	for i := range b.counts {
		diff[i] = b.counts[i]
		if i < len(a.counts) {
			diff[i] -= a.counts[i]
		}
		n += diff[i]
	}
	out := make([]float64, len(qs))
	for j, q := range qs {
		if n == 0 {
			out[j] = 0
			continue
		}
		rank := uint64(q*float64(n-1)) + 1
		var acc uint64
		for i, c := range diff {
			acc += c
			if acc >= rank {
				out[j] = b.buckets[i+1]
				break
			}
		}
	}
	return n, out
}

// footprint is what a memory limit is compared with: all memory the
// runtime has mapped, less what it has returned to the OS.
func footprint(s snapshot) float64 {
	return s.values["/memory/classes/total:bytes"] - s.values["/memory/classes/heap/released:bytes"]
}

// memoryClasses splits the footprint: live and dead objects, free slots in
// spans in use (fragmentation), free spans not yet returned, and the rest
// (stacks, runtime metadata, profiling buckets).
func memoryClasses(s snapshot) map[string]float64 {
	v := s.values
	objects, unused, free := v["/memory/classes/heap/objects:bytes"], v["/memory/classes/heap/unused:bytes"], v["/memory/classes/heap/free:bytes"]
	return map[string]float64{
		"objects": objects, "unused": unused, "free": free,
		"other": footprint(s) - objects - unused - free,
	}
}

// schedstat sums /proc/self/task/*/schedstat: nanoseconds each thread spent
// on a CPU and runnable on a run queue waiting for one. The second is how
// much the other work on the machine delayed this process.
func schedstat() (run, wait float64) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1, -1
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, _ := strconv.ParseFloat(f[0], 64)
		w, _ := strconv.ParseFloat(f[1], 64)
		run += r / 1e9
		wait += w / 1e9
	}
	return run, wait
}
