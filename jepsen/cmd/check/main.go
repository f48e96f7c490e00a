// Command check runs the campaign checkers over a results folder's history
// and writes verdict.json (exit 0 if every checker passed, 1 if one failed,
// 2 on a usage or input error).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"stutter/jepsen/internal/checker"
	"stutter/jepsen/internal/hist"
)

var (
	dir       = flag.String("dir", ".", "results folder (history.ndjson, nemesis.ndjson, status.json)")
	timeout   = flag.Duration("timeout", 60*time.Second, "Porcupine time limit (Unknown counts as a failure)")
	recovery  = flag.Duration("recovery-bound", 15*time.Second, "bound for the cluster to serve again after the final heal")
	visualize = flag.String("visualize", "failure", "write porcupine.html: failure, always or never")
)

type nemEvent struct {
	Time   int64  `json:"time"`
	Event  string `json:"event"`
	Kind   string `json:"kind"`
	ID     int    `json:"id"`
	Detail string `json:"detail"`
}

func readNemesis(path string) ([]nemEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var evs []nemEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e nemEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "check:", err)
	os.Exit(2)
}

func main() {
	flag.Parse()
	ops, err := hist.Read(filepath.Join(*dir, "history.ndjson"))
	if err != nil {
		fail(err)
	}
	if f, err := os.Create(filepath.Join(*dir, "history.edn")); err == nil {
		hist.WriteEDN(f, ops)
		f.Close()
	}
	pairs, err := checker.Pairs(ops)
	if err != nil {
		fail(err)
	}
	nem, err := readNemesis(filepath.Join(*dir, "nemesis.ndjson"))
	if err != nil {
		fail(err)
	}
	results := map[string]checker.Result{}

	// Linearizability.
	pops := checker.Operations(pairs)
	t0 := time.Now()
	res, info := porcupine.CheckOperationsVerbose(checker.Model, pops, *timeout)
	el := time.Since(t0)
	lin := checker.Result{Valid: res == porcupine.Ok, TimeMS: float64(el.Microseconds()) / 1000,
		Summary: fmt.Sprintf("Porcupine: %s on %d operations in %d keys (%.3fs, limit %s)", res, len(pops), countKeys(pops), el.Seconds(), *timeout)}
	if res == porcupine.Unknown {
		lin.Errors = []string{"Porcupine timed out: Unknown counts as a failure"}
	}
	if res == porcupine.Illegal {
		lin.Errors = illegalKeys(pops, info)
	}
	if *visualize == "always" || (*visualize == "failure" && res != porcupine.Ok) {
		var ann []porcupine.Annotation
		open := map[int]nemEvent{}
		for _, e := range nem {
			switch e.Event {
			case "start":
				open[e.ID] = e
			case "stop":
				if s, ok := open[e.ID]; ok {
					ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: s.Time, End: e.Time, Description: s.Kind, Details: s.Detail, BackgroundColor: "#f4cccc"})
					delete(open, e.ID)
				}
			}
		}
		info.AddAnnotations(ann)
		if err := porcupine.VisualizePath(checker.Model, info, filepath.Join(*dir, "porcupine.html")); err != nil {
			fmt.Fprintln(os.Stderr, "visualize:", err)
		}
	}
	results["linearizable"] = lin
	keyVerdicts := perKey(pops, *timeout)
	results["lost_writes"] = checker.LostWrites(pairs)

	var healed int64
	for _, e := range nem {
		if e.Event == "heal-all" {
			healed = e.Time
		}
	}
	results["recovery"] = checker.Recovery(pairs, healed, *recovery)

	if b, err := os.ReadFile(filepath.Join(*dir, "status.json")); err == nil {
		var sts []checker.Status
		if err := json.Unmarshal(b, &sts); err != nil {
			results["log_agreement"] = checker.Result{Valid: false, Summary: "status.json unreadable: " + err.Error()}
		} else {
			results["log_agreement"] = checker.LogAgreement(sts)
		}
	} else {
		results["log_agreement"] = checker.Result{Valid: false, Summary: "no status.json (replica statuses were not collected)"}
	}

	valid := true
	names := make([]string, 0, len(results))
	for n, r := range results {
		names = append(names, n)
		valid = valid && r.Valid
	}
	sort.Strings(names)
	nemCount := 0
	for _, e := range nem {
		if e.Event == "start" {
			nemCount++
		}
	}
	verdict := map[string]any{
		"valid":          valid,
		"checkers":       results,
		"ops":            checker.Stats(pairs),
		"operations":     len(pairs),
		"nemesis_events": nemCount,
		// Porcupine's verdict on every key (Ok, Illegal, Unknown), for
		// re-checkers that compare key by key (jepsen/README.md: Knossos
		// on history.edn). A key missing here had no operation to check.
		"linearizable_keys": keyVerdicts,
	}
	b, _ := json.MarshalIndent(verdict, "", "  ")
	os.WriteFile(filepath.Join(*dir, "verdict.json"), append(b, '\n'), 0o644)
	for _, n := range names {
		r := results[n]
		mark := "PASS"
		if !r.Valid {
			mark = "FAIL"
		}
		fmt.Printf("%-14s %s  %s\n", n, mark, r.Summary)
		for i, e := range r.Errors {
			if i >= 10 {
				fmt.Printf("    ... (%d more in verdict.json)\n", len(r.Errors)-10)
				break
			}
			fmt.Printf("    %s\n", e)
		}
	}
	if !valid {
		os.Exit(1)
	}
}

func countKeys(ops []porcupine.Operation) int {
	k := map[string]bool{}
	for _, o := range ops {
		k[o.Input.(checker.Input).Key] = true
	}
	return len(k)
}

// perKey checks each key's partition on its own: key -> Ok, Illegal or
// Unknown.
func perKey(ops []porcupine.Operation, limit time.Duration) map[string]porcupine.CheckResult {
	out := map[string]porcupine.CheckResult{}
	for _, part := range checker.Model.Partition(ops) {
		out[part[0].Input.(checker.Input).Key] = porcupine.CheckOperationsTimeout(checker.Model, part, limit)
	}
	return out
}

// illegalKeys names the keys whose partition is not linearizable.
func illegalKeys(ops []porcupine.Operation, info porcupine.LinearizationInfo) []string {
	var out []string
	explained := 0
	t0 := int64(0)
	for _, o := range ops {
		if t0 == 0 || o.Call < t0 {
			t0 = o.Call
		}
	}
	for _, part := range checker.Model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(checker.Model, part, 5*time.Second) == porcupine.Ok {
			continue
		}
		out = append(out, fmt.Sprintf("key %s is not linearizable (%d operations); see porcupine.html", part[0].Input.(checker.Input).Key, len(part)))
		if explained < 3 {
			explained++
			out = append(out, explain(part, t0)...)
		}
		if len(out) >= 40 {
			break
		}
	}
	return out
}

// explain finds the shortest prefix (by invocation time) of one key's
// operations that is already not linearizable and lists its last operations:
// the last one cannot be placed after the others.
func explain(part []porcupine.Operation, t0 int64) []string {
	ops := append([]porcupine.Operation(nil), part...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	for n := 1; n <= len(ops); n++ {
		if porcupine.CheckOperationsTimeout(checker.Model, ops[:n], 2*time.Second) == porcupine.Ok {
			continue
		}
		out := []string{fmt.Sprintf("  shortest non-linearizable prefix: %d operations; its last ones ([invoke, return] in seconds since the history began, process):", n)}
		for i := n - 8; i < n; i++ {
			if i < 0 {
				continue
			}
			o := ops[i]
			ret := "open"
			if o.Output.(checker.Output).Type != "info" {
				ret = fmt.Sprintf("%.3f", float64(o.Return-t0)/1e9)
			}
			out = append(out, fmt.Sprintf("    [%.3f, %s] p%d %s", float64(o.Call-t0)/1e9, ret, o.ClientId, checker.Model.DescribeOperation(o.Input, o.Output)))
		}
		return out
	}
	return nil
}
