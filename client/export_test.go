package client

import (
	"time"

	"github.com/nimbus-fs/nimbus/rpc"
)

// HasTCP reports whether a hybrid client has a connection to an instance
// of deployment d.
func (c *Client) HasTCP(d int) bool { return c.tcpConn(d) != nil }

// DropTCP closes the connections to the instances this hybrid client
// knows, as a network failure would: calls in flight on them fail broken.
func (c *Client) DropTCP() int {
	ep := c.endpoint()
	c.hyb.mu.RLock()
	var urls []string
	for _, us := range c.hyb.mu.deps {
		urls = append(urls, us...)
	}
	c.hyb.mu.RUnlock()
	n := 0
	for _, u := range urls {
		ep.mu.Lock()
		cs := append([]*rpc.Conn(nil), ep.mu.conns[u]...)
		ep.mu.Unlock()
		for _, conn := range cs {
			conn.Close()
			n++
		}
	}
	return n
}

// Thrashing reports whether anti-thrashing is on.
func (c *Client) Thrashing() bool { return c.hyb.thrash.active() }

// Backoff is backoff, for its test.
func Backoff(n int, base, max time.Duration, u float64) time.Duration {
	return backoff(n, base, max, u)
}
