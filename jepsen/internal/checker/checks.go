package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"stutter/jepsen/internal/hist"
)

// Result is one checker's verdict.
type Result struct {
	Valid   bool     `json:"valid"`
	Summary string   `json:"summary"`
	Errors  []string `json:"errors,omitempty"`
	TimeMS  float64  `json:"time_ms"`
}

func limit(errs []string) []string {
	if len(errs) > 50 {
		return append(errs[:50], fmt.Sprintf("... and %d more", len(errs)-50))
	}
	return errs
}

// LostWrites checks every key that had an acknowledged write against the
// final reads taken after the faults healed: the final value must exist, must
// have been written by some operation, and must not come from a write that
// completed before another acknowledged write (of the same key) was invoked
// — that later write would have been lost.
func LostWrites(pairs []Pair) Result {
	t0 := time.Now()
	type w struct {
		inv, ret int64 // ret: MaxInt64 if not known to have completed
		ok       bool
	}
	writes := map[string]map[int64]w{} // key -> value -> write
	acked := map[string][]w{}
	final := map[string]int64{}
	finalSeen := map[string]bool{}
	for _, p := range pairs {
		k := p.Inv.Key
		if p.Inv.Final {
			if p.Done != nil && p.Done.Type == "ok" && p.Inv.F == "read" {
				final[k] = p.Done.Value
				finalSeen[k] = true
			}
			continue
		}
		var v int64
		switch p.Inv.F {
		case "write":
			v = p.Inv.Value
		case "cas":
			v = p.Inv.To
		default:
			continue
		}
		if p.Done != nil && p.Done.Type == "fail" {
			continue
		}
		x := w{inv: p.Inv.Time, ret: 1<<63 - 1}
		if p.Done != nil && p.Done.Type == "ok" {
			x.ret = p.Done.Time
			x.ok = true
			acked[k] = append(acked[k], x)
		}
		if writes[k] == nil {
			writes[k] = map[int64]w{}
		}
		writes[k][v] = x
	}
	var errs []string
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	checked := 0
	for _, k := range keys {
		if !finalSeen[k] {
			errs = append(errs, fmt.Sprintf("%s: %d acknowledged writes but no final read succeeded", k, len(acked[k])))
			continue
		}
		checked++
		v := final[k]
		if v == 0 {
			errs = append(errs, fmt.Sprintf("%s: final read found nothing after %d acknowledged writes", k, len(acked[k])))
			continue
		}
		src, ok := writes[k][v]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: final value %d was never written", k, v))
			continue
		}
		lost := 0
		for _, a := range acked[k] {
			if a.inv > src.ret {
				lost++
			}
		}
		if lost > 0 {
			errs = append(errs, fmt.Sprintf("%s: final value %d, but %d acknowledged writes were invoked after its write completed (lost)", k, v, lost))
		}
	}
	return Result{Valid: len(errs) == 0, Summary: fmt.Sprintf("%d keys with acknowledged writes, %d final reads checked, %d problems", len(keys), checked, len(errs)),
		Errors: limit(errs), TimeMS: float64(time.Since(t0).Microseconds()) / 1000}
}

// Recovery checks that after the final heal (time healed, ns) some operation
// completed :ok within bound.
func Recovery(pairs []Pair, healed int64, bound time.Duration) Result {
	if healed == 0 {
		return Result{Valid: true, Summary: "no faults were injected"}
	}
	first := int64(0)
	for _, p := range pairs {
		if p.Done != nil && p.Done.Type == "ok" && p.Inv.F != "read" && p.Inv.Time >= healed {
			if first == 0 || p.Done.Time < first {
				first = p.Done.Time
			}
		}
	}
	if first == 0 {
		return Result{Valid: false, Summary: "no write succeeded after the faults healed"}
	}
	d := time.Duration(first - healed)
	r := Result{Valid: d <= bound, Summary: fmt.Sprintf("first acknowledged write %.2fs after the final heal (bound %s)", d.Seconds(), bound)}
	if !r.Valid {
		r.Errors = []string{r.Summary}
	}
	return r
}

// Status is what a replica's `status` reports (fields used here).
type Status struct {
	Node         string      `json:"node"`
	ID           int         `json:"id"`
	Role         string      `json:"role"`
	Ballot       uint64      `json:"ballot"`
	LastExecuted uint64      `json:"last_executed"`
	Digest       json.Number `json:"digest"` // the replica's executed_digest()
	Error        string      `json:"error,omitempty"`
}

// LogAgreement compares the replicas' executed digests: replicas that
// executed the same number of slots must hold the same digest, and all
// replicas must have converged to the same last_executed.
func LogAgreement(sts []Status) Result {
	var errs []string
	byLE := map[uint64]map[string][]string{}
	var maxLE uint64
	for _, s := range sts {
		if s.Error != "" {
			errs = append(errs, fmt.Sprintf("%s: no status: %s", s.Node, s.Error))
			continue
		}
		if s.Digest == "" {
			errs = append(errs, fmt.Sprintf("%s: status has no digest", s.Node))
			continue
		}
		if byLE[s.LastExecuted] == nil {
			byLE[s.LastExecuted] = map[string][]string{}
		}
		byLE[s.LastExecuted][string(s.Digest)] = append(byLE[s.LastExecuted][string(s.Digest)], s.Node)
		if s.LastExecuted > maxLE {
			maxLE = s.LastExecuted
		}
	}
	for le, ds := range byLE {
		if len(ds) > 1 {
			errs = append(errs, fmt.Sprintf("replicas disagree at last_executed=%d: %v", le, ds))
		}
	}
	if len(byLE) > 1 {
		errs = append(errs, fmt.Sprintf("replicas did not converge: last_executed values %v", keysOf(byLE)))
	}
	return Result{Valid: len(errs) == 0, Summary: fmt.Sprintf("%d replicas, highest last_executed %d", len(sts), maxLE), Errors: errs}
}

func keysOf(m map[uint64]map[string][]string) []uint64 {
	var ks []uint64
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// Stats counts operations by function and type.
func Stats(pairs []Pair) map[string]map[string]int {
	s := map[string]map[string]int{}
	for _, p := range pairs {
		typ := "info"
		if p.Done != nil {
			typ = p.Done.Type
		}
		f := p.Inv.F
		if p.Inv.Final {
			f = "final-read"
		}
		if s[f] == nil {
			s[f] = map[string]int{}
		}
		s[f][typ]++
	}
	return s
}

var _ = hist.Op{}
