// Package checker holds the campaign's checkers: linearizability through
// Porcupine with a register/cas model partitioned by key, lost writes and
// recovery.
package checker

import (
	"fmt"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"

	"stutter/jepsen/internal/hist"
)

// Input is one operation's request.
type Input struct {
	F     string // read, write, cas
	Key   string
	Value int64 // write
	From  int64 // cas (0 = absent)
	To    int64 // cas
}

// Output is one operation's completion. Info means the outcome is unknown
// (open-ended operation): Step accepts it whether or not it took effect
// — taking no effect is the same as taking effect after everything else,
// since its return time is open.
type Output struct {
	Type    string // ok, fail (cas rejected by the state machine), info
	Value   int64  // read result
	Current int64  // cas fail: the value the state machine saw
}

// Model is a single register per key with read, write and compare-and-set;
// the state is the register's value, 0 meaning absent.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return int64(0) },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st := state.(int64)
		in := input.(Input)
		out := output.(Output)
		switch in.F {
		case "read":
			if out.Type == "info" {
				return true, st
			}
			return out.Value == st, st
		case "write":
			return true, in.Value
		case "cas":
			switch out.Type {
			case "ok":
				return st == in.From, in.To
			case "fail":
				return st != in.From && st == out.Current, st
			default: // info: either outcome
				if st == in.From {
					return true, in.To
				}
				return true, st
			}
		}
		return false, st
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	DescribeOperation: func(input, output interface{}) string {
		in := input.(Input)
		out := output.(Output)
		v := func(x int64) string {
			if x == 0 {
				return "nil"
			}
			return fmt.Sprint(x)
		}
		switch in.F {
		case "read":
			if out.Type == "info" {
				return fmt.Sprintf("get(%s) -> ?", in.Key)
			}
			return fmt.Sprintf("get(%s) -> %s", in.Key, v(out.Value))
		case "write":
			return fmt.Sprintf("put(%s, %d) %s", in.Key, in.Value, out.Type)
		default:
			r := out.Type
			if out.Type == "fail" {
				r = "fail, saw " + v(out.Current)
			}
			return fmt.Sprintf("cas(%s, %s -> %d) %s", in.Key, v(in.From), in.To, r)
		}
	},
	DescribeState: func(state interface{}) string {
		if state.(int64) == 0 {
			return "nil"
		}
		return fmt.Sprint(state.(int64))
	},
}

// Pair is an invocation with its completion (Done is nil if the history
// ended before the operation completed, which the checker treats as :info).
type Pair struct {
	Inv  hist.Op
	Done *hist.Op
}

// Pairs matches every invocation with its process's next completion.
func Pairs(ops []hist.Op) ([]Pair, error) {
	open := map[int]int{}
	var pairs []Pair
	for i := range ops {
		op := ops[i]
		if op.Type == "invoke" {
			if _, busy := open[op.Process]; busy {
				return nil, fmt.Errorf("process %d invoked twice without completing (index %d)", op.Process, op.Index)
			}
			open[op.Process] = len(pairs)
			pairs = append(pairs, Pair{Inv: op})
			continue
		}
		j, ok := open[op.Process]
		if !ok {
			return nil, fmt.Errorf("completion without invocation: process %d index %d", op.Process, op.Index)
		}
		delete(open, op.Process)
		pairs[j].Done = &ops[i]
	}
	return pairs, nil
}

// Operations converts pairs to Porcupine operations: :fail dropped (except a
// cas the state machine rejected, which reports the value it saw), :info
// reads dropped, :info writes and cas open-ended.
func Operations(pairs []Pair) []porcupine.Operation {
	var end int64
	for _, p := range pairs {
		if p.Done != nil && p.Done.Time > end {
			end = p.Done.Time
		}
	}
	var out []porcupine.Operation
	for _, p := range pairs {
		in := Input{F: p.Inv.F, Key: p.Inv.Key, Value: p.Inv.Value, From: p.Inv.From, To: p.Inv.To}
		typ := "info"
		if p.Done != nil {
			typ = p.Done.Type
		}
		var o Output
		ret := int64(math.MaxInt64 / 2)
		if end > 0 {
			ret = end + 1
		}
		switch typ {
		case "ok":
			o = Output{Type: "ok", Value: p.Done.Value}
			ret = p.Done.Time
		case "fail":
			if p.Inv.F != "cas" || !p.Done.CasSeen {
				continue
			}
			o = Output{Type: "fail", Current: p.Done.Current}
			ret = p.Done.Time
		case "info":
			if p.Inv.F == "read" {
				continue
			}
			o = Output{Type: "info"}
		}
		out = append(out, porcupine.Operation{ClientId: p.Inv.Process, Input: in, Call: p.Inv.Time, Output: o, Return: ret})
	}
	return out
}
