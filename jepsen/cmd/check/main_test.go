package main

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"stutter/jepsen/internal/checker"
)

// perKey gives each key its own verdict: a stale read on one key leaves
// the other Ok (verdict.json's linearizable_keys, which the Knossos
// recheck compares with key by key).
func TestPerKey(t *testing.T) {
	op := func(client int, call, ret int64, in checker.Input, out checker.Output) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	ops := []porcupine.Operation{
		op(0, 1, 2, checker.Input{F: "write", Key: "k1", Value: 1}, checker.Output{Type: "ok"}),
		op(1, 3, 4, checker.Input{F: "read", Key: "k1"}, checker.Output{Type: "ok", Value: 1}),
		op(0, 5, 6, checker.Input{F: "write", Key: "k2", Value: 1}, checker.Output{Type: "ok"}),
		op(0, 7, 8, checker.Input{F: "write", Key: "k2", Value: 2}, checker.Output{Type: "ok"}),
		op(1, 9, 10, checker.Input{F: "read", Key: "k2"}, checker.Output{Type: "ok", Value: 1}),
	}
	got := perKey(ops, 5*time.Second)
	want := map[string]porcupine.CheckResult{"k1": porcupine.Ok, "k2": porcupine.Illegal}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: got %s, want %s", k, got[k], v)
		}
	}
}
