package checker

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"stutter/jepsen/internal/hist"
)

// h builds a history from (type, f, process, key, value/from, to, time) rows.
type row struct {
	typ, f  string
	p       int
	key     string
	v, to   int64
	t       int64
	current int64
	seen    bool
	final   bool
}

func build(rows []row) []hist.Op {
	var ops []hist.Op
	for i, r := range rows {
		op := hist.Op{Index: i, Type: r.typ, F: r.f, Process: r.p, Key: r.key, Time: r.t, Final: r.final}
		switch r.f {
		case "cas":
			op.From, op.To = r.v, r.to
			op.Current, op.CasSeen = r.current, r.seen
		default:
			op.Value = r.v
		}
		ops = append(ops, op)
	}
	return ops
}

func check(t *testing.T, rows []row) porcupine.CheckResult {
	t.Helper()
	pairs, err := Pairs(build(rows))
	if err != nil {
		t.Fatal(err)
	}
	return porcupine.CheckOperationsTimeout(Model, Operations(pairs), 5*time.Second)
}

func TestLinearizableHistory(t *testing.T) {
	r := check(t, []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: 1},
		{typ: "ok", f: "write", p: 0, key: "a", v: 1, t: 2},
		{typ: "invoke", f: "read", p: 1, key: "a", t: 3},
		{typ: "ok", f: "read", p: 1, key: "a", v: 1, t: 4},
		{typ: "invoke", f: "cas", p: 0, key: "a", v: 1, to: 2, t: 5},
		{typ: "ok", f: "cas", p: 0, key: "a", v: 1, to: 2, t: 6},
		{typ: "invoke", f: "cas", p: 1, key: "a", v: 1, to: 3, t: 7},
		{typ: "fail", f: "cas", p: 1, key: "a", v: 1, to: 3, t: 8, current: 2, seen: true},
	})
	if r != porcupine.Ok {
		t.Fatalf("got %s", r)
	}
}

func TestStaleReadIsIllegal(t *testing.T) {
	r := check(t, []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: 1},
		{typ: "ok", f: "write", p: 0, key: "a", v: 1, t: 2},
		{typ: "invoke", f: "write", p: 0, key: "a", v: 2, t: 3},
		{typ: "ok", f: "write", p: 0, key: "a", v: 2, t: 4},
		{typ: "invoke", f: "read", p: 1, key: "a", t: 5},
		{typ: "ok", f: "read", p: 1, key: "a", v: 1, t: 6},
	})
	if r != porcupine.Illegal {
		t.Fatalf("got %s", r)
	}
}

func TestCasFailMustSeeCurrent(t *testing.T) {
	// the cas claims the register held 5, which nobody wrote
	r := check(t, []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: 1},
		{typ: "ok", f: "write", p: 0, key: "a", v: 1, t: 2},
		{typ: "invoke", f: "cas", p: 1, key: "a", v: 7, to: 8, t: 3},
		{typ: "fail", f: "cas", p: 1, key: "a", v: 7, to: 8, t: 4, current: 5, seen: true},
	})
	if r != porcupine.Illegal {
		t.Fatalf("got %s", r)
	}
}

func TestInfoWriteIsOpenEnded(t *testing.T) {
	// an :info write may take effect long after it was invoked, or never
	rows := []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: 1},
		{typ: "info", f: "write", p: 0, key: "a", v: 1, t: 2},
		{typ: "invoke", f: "read", p: 1, key: "a", t: 3},
		{typ: "ok", f: "read", p: 1, key: "a", v: 0, t: 4},
		{typ: "invoke", f: "read", p: 1, key: "a", t: 5},
		{typ: "ok", f: "read", p: 1, key: "a", v: 1, t: 6},
	}
	if r := check(t, rows); r != porcupine.Ok {
		t.Fatalf("got %s", r)
	}
	// but a :fail write never takes effect
	rows[1].typ = "fail"
	if r := check(t, rows); r != porcupine.Illegal {
		t.Fatalf("got %s", r)
	}
}

func TestLostWrites(t *testing.T) {
	rows := []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: 1},
		{typ: "ok", f: "write", p: 0, key: "a", v: 1, t: 2},
		{typ: "invoke", f: "write", p: 0, key: "a", v: 2, t: 3},
		{typ: "ok", f: "write", p: 0, key: "a", v: 2, t: 4},
		{typ: "invoke", f: "read", p: 5, key: "a", t: 10, final: true},
		{typ: "ok", f: "read", p: 5, key: "a", v: 2, t: 11, final: true},
	}
	pairs, _ := Pairs(build(rows))
	if r := LostWrites(pairs); !r.Valid {
		t.Fatalf("unexpected: %+v", r)
	}
	rows[5].v = 1 // the acknowledged write of 2 is gone
	pairs, _ = Pairs(build(rows))
	if r := LostWrites(pairs); r.Valid {
		t.Fatalf("lost write not found: %+v", r)
	}
	rows[5].v = 0 // everything gone
	pairs, _ = Pairs(build(rows))
	if r := LostWrites(pairs); r.Valid {
		t.Fatalf("lost write not found: %+v", r)
	}
}

func TestRecoveryAndAgreement(t *testing.T) {
	rows := []row{
		{typ: "invoke", f: "write", p: 0, key: "a", v: 1, t: int64(10 * time.Second)},
		{typ: "ok", f: "write", p: 0, key: "a", v: 1, t: int64(12 * time.Second)},
	}
	pairs, _ := Pairs(build(rows))
	if r := Recovery(pairs, int64(9*time.Second), 5*time.Second); !r.Valid {
		t.Fatalf("%+v", r)
	}
	if r := Recovery(pairs, int64(9*time.Second), 2*time.Second); r.Valid {
		t.Fatalf("%+v", r)
	}
	ok := []Status{{Node: "n1", LastExecuted: 5, Digest: "1"}, {Node: "n2", LastExecuted: 5, Digest: "1"}}
	if r := LogAgreement(ok); !r.Valid {
		t.Fatalf("%+v", r)
	}
	bad := []Status{{Node: "n1", LastExecuted: 5, Digest: "1"}, {Node: "n2", LastExecuted: 5, Digest: "2"}}
	if r := LogAgreement(bad); r.Valid {
		t.Fatalf("%+v", r)
	}
}

// A real history from a campaign against the replica before its text client
// ids were made unique across restarts: after n2 restarted, a new connection
// reused an old (client, seq) and got an old "ok" for a put that was never
// executed; a read right after it saw the previous value.
func TestRealViolationClientIDReuse(t *testing.T) {
	ops, err := hist.Read("../../testdata/client-id-reuse-k12.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	if r := porcupine.CheckOperationsTimeout(Model, Operations(pairs), 10*time.Second); r != porcupine.Illegal {
		t.Fatalf("got %s", r)
	}
}
