// Command jctl asks every replica for its `status` line and prints them as
// one JSON array (an entry with "error" for a replica that did not answer).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	tp "stutter/jepsen/internal/textproto"
)

func main() {
	addrs := flag.String("addrs", "", "comma-separated client addresses")
	names := flag.String("names", "", "comma-separated node names")
	timeout := flag.Duration("timeout", 700*time.Millisecond, "per-replica timeout")
	flag.Parse()
	as := strings.Split(*addrs, ",")
	ns := strings.Split(*names, ",")
	out := make([]map[string]any, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func(i int, a string) {
			defer wg.Done()
			m := map[string]any{}
			name := a
			if i < len(ns) {
				name = ns[i]
			}
			c, err := tp.Dial(a, *timeout)
			if err == nil {
				var line string
				line, err = c.Do("status", time.Now().Add(*timeout))
				c.Close()
				if err == nil {
					dec := json.NewDecoder(strings.NewReader(line))
					dec.UseNumber() // the digest is a u64
					if jerr := dec.Decode(&m); jerr != nil {
						m = map[string]any{"error": "bad status: " + line}
					}
				}
			}
			if err != nil {
				m["error"] = err.Error()
			}
			m["node"] = name
			m["addr"] = a
			out[i] = m
		}(i, a)
	}
	wg.Wait()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	os.Exit(0)
}
