// Package textproto is a client for the replica's line-oriented client port:
// one request line, one reply line.
package textproto

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"time"
)

// Conn is one connection to one replica's client port.
type Conn struct {
	Addr string
	c    net.Conn
	r    *bufio.Reader
}

// ErrNotSent means the request certainly did not reach the replica (dial
// failed): the outcome is a definite non-execution.
var ErrNotSent = errors.New("not sent")

// Dial connects with a timeout.
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &Conn{Addr: addr, c: c, r: bufio.NewReader(c)}, nil
}

// Do sends one request line and reads one reply line before the deadline.
// The returned error is nil, or an error after which the connection must be
// closed (the request may or may not have been executed).
func (c *Conn) Do(line string, deadline time.Time) (string, error) {
	c.c.SetDeadline(deadline)
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	reply, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(reply, "\r\n"), nil
}

// Close closes the connection.
func (c *Conn) Close() { c.c.Close() }

// Kind classifies a reply line.
type Kind int

const (
	Value    Kind = iota // a plain reply (get's value, ok, ...)
	Redirect             // "leader is ADDR"
	Retry                // "retry"
	Fail                 // "fail CURRENT"
	Error                // "error ..."
)

// Classify returns the kind of a reply and its argument (the leader address
// for Redirect, the current value for Fail, the line otherwise).
func Classify(reply string) (Kind, string) {
	switch {
	case strings.HasPrefix(reply, "leader is "):
		return Redirect, strings.TrimSpace(strings.TrimPrefix(reply, "leader is "))
	case reply == "retry":
		return Retry, ""
	case strings.HasPrefix(reply, "fail"):
		return Fail, strings.TrimSpace(strings.TrimPrefix(reply, "fail"))
	case strings.HasPrefix(reply, "error"):
		return Error, reply
	}
	return Value, reply
}
