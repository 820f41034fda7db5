package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// The floor workload measures what a bare TCP round trip between two
// processes costs on this machine: a fixed-size message written and read back
// over loopback, with no framing, no dispatch and no work. It is the floor
// under the echo workload, whose no-op travels through the whole RPC stack
// (frames, a worker, the reply writer). Where echo and the floor are close,
// the RPC stack adds little, and what bounds one client is the machine's
// cost of waking a process, not Nimbus.
//
// The server is a separate process (`nimbus bench floor` starts its own
// binary with `floor-serve`), because two goroutines of one process hand a
// message over without sleeping, which is not what a client and a server pay.

// FloorMessageSize is the size of one ping and of its pong: about what a
// small RPC request frame carries.
const FloorMessageSize = 64

// FloorServe echoes every FloorMessageSize bytes read on each connection
// accepted from ln, until ln is closed or ctx is done.
func FloorServe(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("bench floor: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			closeOnDone := context.AfterFunc(ctx, func() { c.Close() })
			defer closeOnDone()
			buf := make([]byte, FloorMessageSize)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// Floor measures the round trip to a FloorServe at addr at each client
// count, each client on its own connection (workload "floor", system
// "tcp-loopback"). With spin 0 a client waits for each answer parked in Go's
// network poller, as Nimbus's client and server do (op "pingpong"); with
// spin > 0 it first retries a non-blocking read for up to spin ("pingpong-spin").
// On a VM whose idle vCPU halts, the parked waiter pays the hypervisor's
// wake-up on every answer and the spinning one mostly does not: the two
// together show what the machine charges for sleeping.
func Floor(ctx context.Context, addr string, run RunConfig, clients []int, spin time.Duration) ([]Result, error) {
	env := &Env{Target: "tcp://" + addr, System: "tcp-loopback"}
	var results []Result
	for _, n := range clients {
		run.Clients = n
		conns := make([]net.Conn, 0, n)
		closeAll := func() {
			for _, c := range conns {
				c.Close()
			}
		}
		var d net.Dialer
		for range n {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				closeAll()
				return results, fmt.Errorf("bench floor: dial %s: %w", addr, err)
			}
			conns = append(conns, c)
		}
		// A server that stops answering would hold a client in its read for
		// ever: closing the connections when ctx ends frees it.
		stop := context.AfterFunc(ctx, closeAll)
		m, err := Run(ctx, run, func(i int) Op { return pingPong(conns[i], spin) })
		stop()
		closeAll()
		if err != nil {
			return results, err
		}
		op := "pingpong"
		if spin > 0 {
			op = "pingpong-spin"
		}
		results = append(results, NewResult("floor", op, env, m))
	}
	return results, nil
}

// pingPong is one client's round trip on c, waiting as Floor describes.
func pingPong(c net.Conn, spin time.Duration) OpFunc {
	ping := make([]byte, FloorMessageSize)
	for i := range ping {
		ping[i] = byte(i)
	}
	pong := make([]byte, FloorMessageSize)
	var rc syscall.RawConn
	if tc, ok := c.(*net.TCPConn); ok && spin > 0 {
		rc, _ = tc.SyscallConn()
	}
	return func(context.Context) error {
		if _, err := c.Write(ping); err != nil {
			return fmt.Errorf("bench floor: write: %w", err)
		}
		var err error
		if rc != nil {
			err = spinRead(rc, pong, spin)
		} else {
			_, err = io.ReadFull(c, pong)
		}
		if err != nil {
			return fmt.Errorf("bench floor: read: %w", err)
		}
		if !bytes.Equal(pong, ping) {
			return errors.New("bench floor: the pong is not the ping")
		}
		return nil
	}
}

// spinRead fills buf, retrying a non-blocking read for up to spin before it
// lets the poller park the goroutine until the socket is readable.
func spinRead(rc syscall.RawConn, buf []byte, spin time.Duration) error {
	got := 0
	var rerr error
	for got < len(buf) && rerr == nil {
		err := rc.Read(func(fd uintptr) bool {
			deadline := time.Now().Add(spin)
			for {
				n, err := syscall.Read(int(fd), buf[got:])
				switch {
				case n > 0:
					got += n
					return true
				case n == 0 && err == nil:
					rerr = io.ErrUnexpectedEOF
					return true
				case !errors.Is(err, syscall.EAGAIN):
					rerr = err
					return true
				case time.Now().After(deadline):
					return false // park until readable
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return rerr
}
