// Package hist is the campaign history: Jepsen-style operations, written one
// JSON object per line (ndjson) and convertible to Jepsen's EDN.
//
// Values are positive integers, unique per write in a run; 0 stands for
// "absent" (Jepsen's nil).
package hist

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Op is one history event. Type is "invoke", "ok", "fail" or "info"; F is
// "read", "write" or "cas". Time is wall-clock nanoseconds (Unix epoch) so
// that it lines up with the nemesis log written by the orchestrator.
type Op struct {
	Index   int    `json:"index"`
	Type    string `json:"type"`
	F       string `json:"f"`
	Process int    `json:"process"`
	Time    int64  `json:"time"`
	Key     string `json:"key"`
	// Value: the value written (write), the value read (read :ok, 0 = absent).
	Value int64 `json:"value"`
	// From/To: a compare-and-set from From (0 = absent) to To.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	// Current: on a cas :fail decided by the state machine, the value it saw
	// (0 = absent). Definite is true when that value is known.
	Current  int64  `json:"current,omitempty"`
	CasSeen  bool   `json:"cas_seen,omitempty"`
	Node     string `json:"node,omitempty"`
	Error    string `json:"error,omitempty"`
	Final    bool   `json:"final,omitempty"`
	Redirect int    `json:"redirects,omitempty"`
}

// Read loads an ndjson history.
func Read(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var op Op
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

func ednVal(v int64) string {
	if v == 0 {
		return "nil"
	}
	return fmt.Sprint(v)
}

// WriteEDN writes the history in Jepsen's form, with jepsen.independent
// tuples: :value [key v] where v is the register value or [from to] for a
// cas. Times are relative to the first event, in nanoseconds.
func WriteEDN(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	var t0 int64
	if len(ops) > 0 {
		t0 = ops[0].Time
	}
	for _, op := range ops {
		var v string
		switch op.F {
		case "read":
			if op.Type == "ok" {
				v = ednVal(op.Value)
			} else {
				v = "nil"
			}
		case "write":
			v = ednVal(op.Value)
		case "cas":
			v = "[" + ednVal(op.From) + " " + ednVal(op.To) + "]"
		}
		extra := ""
		if op.Error != "" {
			extra = fmt.Sprintf(", :error %q", op.Error)
		}
		if op.Node != "" {
			extra += fmt.Sprintf(", :node %q", op.Node)
		}
		fmt.Fprintf(bw, "{:type :%s, :f :%s, :value [%q %s], :process %d, :time %d, :index %d%s}\n",
			op.Type, op.F, op.Key, v, op.Process, op.Time-t0, op.Index, extra)
	}
	return bw.Flush()
}
