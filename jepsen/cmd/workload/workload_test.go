package main

// Harness test: the workload and the checker against an in-process stand-in
// that speaks the replica's text protocol (node 0 serves, the others
// redirect). A correct stand-in must pass; one whose followers answer reads
// from a lagging copy must be caught. The stand-in is only a test double of
// the harness, never the system under test.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"stutter/jepsen/internal/checker"
	"stutter/jepsen/internal/hist"
)

type standin struct {
	mu    sync.Mutex
	kv    map[string]string
	stale map[string]string
	ls    []net.Listener
}

func startStandin(t *testing.T, staleReads bool) (*standin, []string) {
	s := &standin{kv: map[string]string{}, stale: map[string]string{}}
	var addrs []string
	for i := 0; i < 3; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.ls = append(s.ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		for _, l := range s.ls {
			l.Close()
		}
	})
	go func() { // the lagging copy
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			s.mu.Lock()
			for k, v := range s.kv {
				s.stale[k] = v
			}
			s.mu.Unlock()
		}
	}()
	for i, l := range s.ls {
		go func(i int, l net.Listener) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go s.serve(c, i, addrs[0], staleReads)
			}
		}(i, l)
	}
	return s, addrs
}

func (s *standin) serve(c net.Conn, id int, leader string, staleReads bool) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		var rep string
		s.mu.Lock()
		switch {
		case len(f) == 2 && f[0] == "get" && id != 0 && staleReads:
			rep = s.stale[f[1]]
		case id != 0:
			rep = "leader is " + leader
		case len(f) == 2 && f[0] == "get":
			rep = s.kv[f[1]]
		case len(f) == 3 && f[0] == "put":
			s.kv[f[1]] = f[2]
			rep = "ok"
		case len(f) == 4 && f[0] == "cas":
			cur, ok := s.kv[f[1]]
			if (f[2] == "-" && !ok) || (ok && cur == f[2]) {
				s.kv[f[1]] = f[3]
				rep = "ok"
			} else if ok {
				rep = "fail " + cur
			} else {
				rep = "fail -"
			}
		default:
			rep = "error bad request"
		}
		s.mu.Unlock()
		fmt.Fprintln(c, rep)
	}
}

func runWorkload(t *testing.T, addrs []string) []hist.Op {
	dir := t.TempDir()
	bin := filepath.Join(dir, "workload")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "history.ndjson")
	cmd := exec.Command(bin, "-addrs", strings.Join(addrs, ","), "-names", "n1,n2,n3", "-time", "2s",
		"-procs", "4", "-rate", "300", "-out", out)
	cmd.Stderr = os.Stderr
	if b, err := cmd.Output(); err != nil {
		t.Fatalf("workload: %v\n%s", err, b)
	}
	ops, err := hist.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func verdict(t *testing.T, ops []hist.Op) (porcupine.CheckResult, checker.Result) {
	pairs, err := checker.Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	return porcupine.CheckOperationsTimeout(checker.Model, checker.Operations(pairs), 10*time.Second), checker.LostWrites(pairs)
}

func TestWorkloadAgainstCorrectStandin(t *testing.T) {
	_, addrs := startStandin(t, false)
	ops := runWorkload(t, addrs)
	if len(ops) < 200 {
		t.Fatalf("only %d events", len(ops))
	}
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.F+":"+op.Type]++
	}
	if counts["read:ok"] == 0 || counts["write:ok"] == 0 || counts["cas:ok"] == 0 || counts["read:fail"] == 0 {
		t.Fatalf("unexpected mix: %v", counts)
	}
	lin, lost := verdict(t, ops)
	if lin != porcupine.Ok || !lost.Valid {
		t.Fatalf("correct stand-in rejected: %s %+v", lin, lost)
	}
}

func TestWorkloadCatchesStaleReads(t *testing.T) {
	_, addrs := startStandin(t, true)
	ops := runWorkload(t, addrs)
	if lin, _ := verdict(t, ops); lin != porcupine.Illegal {
		t.Fatalf("stale reads not caught: %s", lin)
	}
}
