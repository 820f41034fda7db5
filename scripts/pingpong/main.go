// Command pingpong measures this machine's loopback TCP round trip between
// two processes, the floor under every one-client figure of
// docs/BENCHMARKS.md, with the client waiting for each answer in one of two
// ways: parked in Go's network poller (what Nimbus's client and server do),
// or spinning on a non-blocking read for up to --spin before it parks.
//
//	go run ./scripts/pingpong [--n 20000] [--rounds 3] [--spin 100us]
//
// On a VM whose idle vCPU halts (docs/BENCHMARKS.md: this one has guest
// halt polling off), a parked waiter pays the hypervisor's wake-up on every
// answer, a spinning one does not. The server side always parks.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

const msgSize = 64

func main() {
	serve := flag.Bool("serve", false, "run as the echo server (the parent starts it)")
	n := flag.Int("n", 20000, "round trips per measurement")
	rounds := flag.Int("rounds", 3, "alternating rounds of both ways of waiting")
	spin := flag.Duration("spin", 100*time.Microsecond, "how long the spinning client spins before it parks")
	flag.Parse()
	if *serve {
		if err := runServer(); err != nil {
			fmt.Fprintln(os.Stderr, "pingpong server:", err)
			os.Exit(1)
		}
		return
	}
	if err := runClient(*n, *rounds, *spin); err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

// runServer echoes every 64-byte message on every connection; it prints its
// address first.
func runServer() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			buf := make([]byte, msgSize)
			for {
				if _, err := io.ReadFull(br, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

func runClient(n, rounds int, spin time.Duration) error {
	srv := exec.Command(os.Args[0], "--serve")
	out, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the server's address: %w", err)
	}
	addr = addr[:len(addr)-1]
	fmt.Printf("loopback round trip between two processes, %d round trips of %d bytes each way, mean:\n", n, msgSize)
	for r := 0; r < rounds; r++ {
		parked, err := measure(addr, n, 0)
		if err != nil {
			return err
		}
		spun, err := measure(addr, n, spin)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: parked %v, spinning up to %v %v\n", r+1, parked.Round(100*time.Nanosecond), spin, spun.Round(100*time.Nanosecond))
	}
	return nil
}

// measure runs n round trips on a new connection and returns their mean.
func measure(addr string, n int, spin time.Duration) (time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, msgSize)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
		if spin == 0 {
			_, err = io.ReadFull(c, buf)
		} else {
			err = spinRead(rc, buf, spin)
		}
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// spinRead fills buf, retrying a non-blocking read for up to spin before it
// lets the poller park the goroutine.
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
