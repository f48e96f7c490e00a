// Command delayproxy forwards TCP connections from -listen to -target and
// delays the bytes flowing in both directions by the number of milliseconds
// in -delay-file (re-read every 100 ms; absent or empty means 0). This
// kernel has no `tc netem`, so the campaign's delay nemesis lives here, the
// way etcd's robustness tests inject it. Order within a connection is kept.
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var delayMS atomic.Int64

type chunk struct {
	at   time.Time
	data []byte
}

func pump(dst, src net.Conn) {
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32*1024)
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{time.Now(), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Duration(delayMS.Load()) * time.Millisecond; d > 0 {
			if w := time.Until(c.at.Add(d)); w > 0 {
				time.Sleep(w)
			}
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	for range ch {
	}
}

func main() {
	listen := flag.String("listen", "", "address to listen on")
	target := flag.String("target", "", "address to forward to")
	file := flag.String("delay-file", "", "file holding the delay in ms")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			b, err := os.ReadFile(*file)
			v := int64(0)
			if err == nil {
				v, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			}
			delayMS.Store(v)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func(c net.Conn) {
			t, err := net.DialTimeout("tcp", *target, time.Second)
			if err != nil {
				c.Close()
				return
			}
			go pump(t, c)
			pump(c, t)
		}(c)
	}
}

var _ = io.EOF
