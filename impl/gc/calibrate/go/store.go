package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
)

// keyLen matches the keys of the project's benchmark and of YCSB
// ("user" and 19 digits).
const keyLen = 23

// frameHeader stands for the framing and fields a server decodes around a
// key and a value; it makes request and reply buffers a little larger than
// their payload, as they are on the wire.
const frameHeader = 32

// store is the live heap: a KV map of the kind a replicated KV store keeps.
// Values hold no pointers, so the collector marks them without scanning
// them; the map's groups and the key strings are what it traverses.
type store struct {
	m         map[string][]byte
	keys      []string // the map's keys, for uniform random picks without allocating
	valueSize int
	update    float64 // fraction of requests that overwrite a value
	sinkRing  [64][]byte
	sinkNext  int
}

func makeKey(i int) string {
	return fmt.Sprintf("user%019d", i)
}

func (s *store) insert(i int) {
	k := makeKey(i)
	v := make([]byte, s.valueSize)
	v[0] = byte(i)
	s.m[k] = v
	s.keys = append(s.keys, k)
}

// heapLive forces a full collection and returns the bytes it marked live.
func heapLive() uint64 {
	runtime.GC()
	return readUint("/gc/heap/live:bytes")
}

// buildStore fills a store until the marked live heap reaches about
// targetBytes: it inserts a sample first to learn what one entry costs in
// this runtime (value and key size classes, map groups, the keys slice).
func buildStore(targetBytes uint64, valueSize int, update float64) (*store, uint64) {
	s := &store{m: make(map[string][]byte), valueSize: valueSize, update: update}
	base := heapLive()
	const sample = 1 << 14
	for i := range sample {
		s.insert(i)
	}
	live := heapLive()
	perEntry := float64(live-base) / sample
	// Maps and the keys slice grow by doubling, so the sample's cost per
	// entry is only a first guess: correct towards the target a few times.
	for range 4 {
		if live >= targetBytes {
			break
		}
		more := int(float64(targetBytes-live) / perEntry)
		if more < sample/16 {
			break
		}
		for i := len(s.keys); len(s.keys) < i+more; {
			s.insert(len(s.keys))
		}
		live = heapLive()
	}
	return s, live
}

// sink keeps the last few buffers reachable, as requests in flight are,
// and makes sure the compiler cannot place them on the stack.
func (s *store) sink(b []byte) {
	s.sinkRing[s.sinkNext] = b
	s.sinkNext = (s.sinkNext + 1) % len(s.sinkRing)
}

// request is one KV operation as a server handles it: a decoded request
// frame, then either an update (a fresh value replaces the old one, which
// becomes garbage) or a read (a reply frame carrying a copy of the value).
func (s *store) request(r *rand.Rand) {
	i := r.IntN(len(s.keys))
	key := s.keys[i]
	req := make([]byte, frameHeader+len(key)+s.valueSize)
	req[0] = byte(i)
	copy(req[frameHeader:], key)
	if r.Float64() < s.update {
		v := make([]byte, s.valueSize)
		copy(v, req[frameHeader+len(key):])
		v[0] = byte(i)
		s.m[key] = v
		s.sink(make([]byte, frameHeader))
	} else {
		v := s.m[key]
		reply := make([]byte, frameHeader+len(v))
		copy(reply[frameHeader:], v)
		s.sink(reply)
	}
	s.sink(req)
}
