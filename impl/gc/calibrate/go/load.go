package main

import (
	"math/rand/v2"
	"time"
)

// paceRequests runs the mutator open loop: by any instant t it has issued
// rate × (t − start) requests, catching up in a burst when it fell behind
// (a server's backlog) rather than skipping, until end. It returns how many
// requests it issued.
func paceRequests(s *store, r *rand.Rand, rate float64, start, end time.Time) int64 {
	var n int64
	for {
		now := time.Now()
		if !now.Before(end) {
			return n
		}
		due := int64(rate * now.Sub(start).Seconds())
		for n < due {
			s.request(r)
			n++
			if n%512 == 0 && !time.Now().Before(end) {
				return n
			}
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// prober issues tiny requests on a goroutine of its own at a fixed rate and
// times each from its intended start (no coordinated omission): a late
// request delays the next ones, which then count their own wait.
type prober struct {
	m         map[string][]byte
	keys      []string
	valueSize int
	sinkReq   []byte
	sinkReply []byte
	latencies []time.Duration
}

func newProber(valueSize int) *prober {
	p := &prober{m: map[string][]byte{}, valueSize: valueSize}
	for i := range 1024 {
		k := makeKey(i)
		p.m[k] = make([]byte, valueSize)
		p.keys = append(p.keys, k)
	}
	return p
}

func (p *prober) run(r *rand.Rand, rate float64, start, end time.Time, record bool) {
	period := time.Duration(float64(time.Second) / rate)
	for k := 0; ; k++ {
		intended := start.Add(time.Duration(k) * period)
		if !intended.Before(end) {
			return
		}
		if d := time.Until(intended); d > 0 {
			time.Sleep(d)
		}
		key := p.keys[r.IntN(len(p.keys))]
		req := make([]byte, frameHeader+len(key)+p.valueSize)
		copy(req[frameHeader:], key)
		v := p.m[key]
		reply := make([]byte, frameHeader+len(v))
		copy(reply[frameHeader:], v)
		p.sinkReq, p.sinkReply = req, reply
		if record {
			p.latencies = append(p.latencies, time.Since(intended))
		}
	}
}
