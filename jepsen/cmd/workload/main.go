// Command workload drives a Jepsen-style register/cas workload against the
// replicas' client ports and writes the history as ndjson.
//
// Semantics (Jepsen's): each logical process is single-threaded with one
// outstanding operation; :ok means the operation took effect, :fail that it
// certainly did not (a redirect, "retry", a refused connection, a cas
// rejected by the state machine), :info that it may or may not have (a
// timeout or a broken connection after the request was sent). A process
// whose operation ended :info never invokes again; a fresh process id
// replaces it. Every written value is unique. Reads go to random replicas,
// writes and cas to the believed leader, following "leader is" redirects.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"stutter/jepsen/internal/hist"
	tp "stutter/jepsen/internal/textproto"
)

var (
	addrsFlag  = flag.String("addrs", "", "comma-separated client addresses of the replicas")
	names      = flag.String("names", "", "comma-separated node names (same order as -addrs)")
	duration   = flag.Duration("time", 30*time.Second, "main phase duration")
	procs      = flag.Int("procs", 6, "concurrent logical processes")
	nkeys      = flag.Int("keys", 8, "keys active at a time")
	perKeySet  = flag.Int("ops-per-keyset", 1500, "operations before moving to a fresh key set")
	rate       = flag.Float64("rate", 250, "target total operations per second")
	opTimeout  = flag.Duration("op-timeout", 1500*time.Millisecond, "per-operation timeout (then :info)")
	finalLimit = flag.Duration("final-timeout", 30*time.Second, "bound for the final read phase")
	seed       = flag.Int64("seed", 1, "random seed")
	out        = flag.String("out", "history.ndjson", "history output")
	statusOut  = flag.String("stats", "", "write a JSON summary here")
)

type recorder struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
	n   int
}

func (r *recorder) log(op *hist.Op) {
	r.mu.Lock()
	op.Time = time.Now().UnixNano()
	op.Index = r.n
	r.n++
	r.enc.Encode(op)
	r.mu.Unlock()
}

type cluster struct {
	addrs   []string
	names   map[string]string
	leader  atomic.Value // string
	nextVal atomic.Int64
	nextPid atomic.Int64
	ops     atomic.Int64
	mu      sync.Mutex
	last    map[string]int64 // last value seen per key (for cas "from")
	keysMu  sync.Mutex
	keys    map[string]bool
	rec     *recorder
}

func (c *cluster) nodeName(addr string) string {
	if n, ok := c.names[addr]; ok {
		return n
	}
	return addr
}

// worker is one slot that runs a sequence of logical processes.
type worker struct {
	c     *cluster
	rng   *rand.Rand
	pid   int
	conns map[string]*tp.Conn
}

func (w *worker) retire() {
	for a, cn := range w.conns {
		cn.Close()
		delete(w.conns, a)
	}
	w.pid = int(w.c.nextPid.Add(1) - 1)
}

func (w *worker) conn(addr string) (*tp.Conn, error) {
	if cn, ok := w.conns[addr]; ok {
		return cn, nil
	}
	cn, err := tp.Dial(addr, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}
	w.conns[addr] = cn
	return cn, nil
}

func fmtVal(v int64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

func parseVal(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "-" {
		return 0, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// attempt outcome
type outcome int

const (
	definite outcome = iota // got a reply
	notSent                 // certainly not executed (dial failed)
	unknown                 // sent, no reply: indefinite
)

func (w *worker) send(addr, line string, deadline time.Time) (string, outcome, error) {
	cn, err := w.conn(addr)
	if err != nil {
		return "", notSent, err
	}
	reply, err := cn.Do(line, deadline)
	if err != nil {
		cn.Close()
		delete(w.conns, addr)
		return "", unknown, err
	}
	return reply, definite, nil
}

// invoke runs one operation and records invoke + completion.
func (w *worker) invoke(op hist.Op, toLeader bool) string {
	c := w.c
	op.Process = w.pid
	op.Type = "invoke"
	inv := op
	c.rec.log(&inv)
	c.ops.Add(1)
	deadline := time.Now().Add(*opTimeout)
	var line string
	switch op.F {
	case "read":
		line = "get " + op.Key
	case "write":
		line = fmt.Sprintf("put %s %d", op.Key, op.Value)
	case "cas":
		line = fmt.Sprintf("cas %s %s %d", op.Key, fmtVal(op.From), op.To)
	}
	done := op
	var target string
	if toLeader {
		target, _ = c.leader.Load().(string)
		if target == "" {
			target = c.addrs[w.rng.Intn(len(c.addrs))]
		}
	} else {
		target = c.addrs[w.rng.Intn(len(c.addrs))]
	}
	lastErr := ""
	for hop := 0; ; hop++ {
		if time.Now().After(deadline) {
			done.Type = "fail"
			done.Error = "unavailable: " + lastErr
			break
		}
		done.Node = c.nodeName(target)
		reply, oc, err := w.send(target, line, deadline)
		if oc == unknown {
			done.Type = "info"
			done.Error = err.Error()
			break
		}
		if oc == notSent {
			lastErr = "connect " + done.Node + ": " + err.Error()
			if !toLeader {
				done.Type = "fail"
				done.Error = lastErr
				break
			}
			target = c.addrs[w.rng.Intn(len(c.addrs))]
			time.Sleep(20 * time.Millisecond)
			continue
		}
		kind, arg := tp.Classify(reply)
		switch kind {
		case tp.Redirect:
			if !toLeader || hop >= 4 {
				done.Type = "fail"
				done.Error = "redirect to " + arg
				break
			}
			if arg != "" && arg != target {
				c.leader.Store(arg)
				target = arg
			} else {
				target = c.addrs[w.rng.Intn(len(c.addrs))]
				time.Sleep(20 * time.Millisecond)
			}
			done.Redirect++
			continue
		case tp.Retry:
			if !toLeader {
				done.Type = "fail"
				done.Error = "retry"
				break
			}
			lastErr = "retry from " + done.Node
			target = c.addrs[w.rng.Intn(len(c.addrs))]
			time.Sleep(30 * time.Millisecond)
			continue
		case tp.Error:
			done.Type = "fail"
			done.Error = arg
			if arg == "error session expired" {
				// The replica evicted this connection's session (bounded
				// table, docs/protocol-sessions.md "Session expiry"): an earlier
				// attempt may have executed, so the outcome is unknown. The
				// replica closes the connection; the next one is a new client.
				done.Type = "info"
			}
		case tp.Fail:
			if op.F != "cas" {
				done.Type = "fail"
				done.Error = reply
				break
			}
			cur, ok := parseVal(arg)
			done.Type = "fail"
			if ok {
				done.Current = cur
				done.CasSeen = true
				c.mu.Lock()
				c.last[op.Key] = cur
				c.mu.Unlock()
			}
		case tp.Value:
			switch op.F {
			case "read":
				v, ok := parseVal(reply)
				if !ok {
					done.Type = "fail"
					done.Error = "bad reply: " + reply
					break
				}
				done.Type = "ok"
				done.Value = v
				c.mu.Lock()
				c.last[op.Key] = v
				c.mu.Unlock()
			default:
				if reply != "ok" {
					done.Type = "fail"
					done.Error = "bad reply: " + reply
					break
				}
				done.Type = "ok"
				v := op.Value
				if op.F == "cas" {
					v = op.To
				}
				c.mu.Lock()
				c.last[op.Key] = v
				c.mu.Unlock()
				if toLeader {
					c.leader.Store(target)
				}
			}
		}
		break
	}
	c.rec.log(&done)
	if done.Type == "info" {
		w.retire()
	}
	return done.Type
}

func (c *cluster) keyFor(rng *rand.Rand) string {
	set := c.ops.Load() / int64(*perKeySet)
	k := fmt.Sprintf("k%d", set*int64(*nkeys)+int64(rng.Intn(*nkeys)))
	c.keysMu.Lock()
	c.keys[k] = true
	c.keysMu.Unlock()
	return k
}

func (w *worker) run(stop <-chan struct{}) {
	c := w.c
	interval := time.Duration(float64(*procs) / *rate * float64(time.Second))
	for {
		select {
		case <-stop:
			return
		default:
		}
		start := time.Now()
		key := c.keyFor(w.rng)
		r := w.rng.Intn(100)
		switch {
		case r < 50:
			w.invoke(hist.Op{F: "read", Key: key}, false)
		case r < 80:
			w.invoke(hist.Op{F: "write", Key: key, Value: c.nextVal.Add(1)}, true)
		default:
			c.mu.Lock()
			from := c.last[key]
			c.mu.Unlock()
			w.invoke(hist.Op{F: "cas", Key: key, From: from, To: c.nextVal.Add(1)}, true)
		}
		// pace, with jitter
		sl := time.Duration(float64(interval)*(0.5+w.rng.Float64())) - time.Since(start)
		if sl > 0 {
			select {
			case <-stop:
				return
			case <-time.After(sl):
			}
		}
	}
}

func main() {
	flag.Parse()
	addrs := strings.Split(*addrsFlag, ",")
	c := &cluster{addrs: addrs, names: map[string]string{}, last: map[string]int64{}, keys: map[string]bool{}}
	if *names != "" {
		for i, n := range strings.Split(*names, ",") {
			if i < len(addrs) {
				c.names[addrs[i]] = n
			}
		}
	}
	c.leader.Store("")
	c.nextVal.Store(1)
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c.rec = &recorder{f: f, enc: json.NewEncoder(f)}
	c.nextPid.Store(int64(*procs))

	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-sigs:
		case <-time.After(*duration):
		}
		close(stop)
	}()
	var wg sync.WaitGroup
	for i := 0; i < *procs; i++ {
		w := &worker{c: c, rng: rand.New(rand.NewSource(*seed*1000 + int64(i))), pid: i, conns: map[string]*tp.Conn{}}
		wg.Add(1)
		go func() { defer wg.Done(); w.run(stop) }()
	}
	wg.Wait()
	mainOps := c.rec.n / 2

	// Final phase: read every key ever used through the leader, retrying
	// until one read of each key is :ok or the bound expires.
	finalDeadline := time.Now().Add(*finalLimit)
	c.keysMu.Lock()
	var keys []string
	for k := range c.keys {
		keys = append(keys, k)
	}
	c.keysMu.Unlock()
	w := &worker{c: c, rng: rand.New(rand.NewSource(*seed*1000 + 999)), conns: map[string]*tp.Conn{}}
	w.retire()
	missing := 0
	for _, k := range keys {
		got := false
		for !got && time.Now().Before(finalDeadline) {
			// A read sent to the believed leader, following redirects.
			got = w.invoke(hist.Op{F: "read", Key: k, Final: true}, true) == "ok"
			if !got {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !got {
			missing++
		}
	}
	f.Close()
	if *statusOut != "" {
		s, _ := json.Marshal(map[string]any{"events": c.rec.n, "main_ops": mainOps, "keys": len(keys), "final_missing": missing})
		os.WriteFile(*statusOut, s, 0o644)
	}
	fmt.Printf("workload: %d events, %d main ops, %d keys, %d keys without a final read\n", c.rec.n, mainOps, len(keys), missing)
}
