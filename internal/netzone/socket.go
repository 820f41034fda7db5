package netzone

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread of the test process that has entered the
// zone's network namespace, and returns fn's error. A socket fn makes
// belongs to the zone for its whole life, wherever it is used afterwards;
// that is what Listen and Dial rely on. The thread returns to the host's
// namespace afterwards (if it cannot, it stays locked and the runtime
// discards it with the goroutine). fn must not start goroutines that make
// sockets: they run on other threads, in the host's namespace.
func (z *Zone) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netzone: entering zone %s: %w", z.Name, err)
			return
		}
		defer home.Close()
		f, err := os.Open(filepath.Join("/run/netns", z.NS))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netzone: entering zone %s: %w", z.Name, err)
			return
		}
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netzone: entering zone %s: setns: %w", z.Name, err)
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Listen listens on address (host:port; ":0" for the zone's every address
// and a free port) inside the zone.
func (z *Zone) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := z.Do(func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// Dial connects from inside the zone to address; ctx bounds the connect.
func (z *Zone) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := z.Do(func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Forward listens on the host's bridge address (HostIP, a free port) and
// relays every connection to target, a host:port the host reaches (a
// PostgreSQL or etcd on 127.0.0.1): processes in the zones use the
// address it returns. It stops, closing its connections, when the test
// ends.
func (nt *Net) Forward(t testing.TB, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(nt.hostIP.String(), "0"))
	if err != nil {
		t.Fatalf("netzone: forwarding to %s: %v", target, err)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn, add bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			return false
		}
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
		return true
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				if !track(in, true) {
					return
				}
				defer track(in, false)
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				if !track(out, true) {
					return
				}
				defer track(out, false)
				done := make(chan struct{})
				go func() {
					_, _ = io.Copy(out, in)
					closeWrite(out)
					close(done)
				}()
				_, _ = io.Copy(in, out)
				closeWrite(in)
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = c.Close()
	}
}
