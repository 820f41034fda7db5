package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/rpc"
)

// What an instance of the local platform serves to clients that reach it
// directly, not through the gateway (docs/OPERATIONS.md, "The platform's
// ports: who may call an instance").

// TestInstanceDirectLimits: an instance holds at most the client
// connections its platform's caps give it (--concurrency 2 + --max-queue
// 4 + 16 for the platform's own calls); a client holding connections
// straight to it past that is answered 503 with Retry-After, while calls
// through the gateway still succeed; once the direct connections close,
// direct calls are served again.
func TestInstanceDirectLimits(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process", "--deployments", "1",
		"--concurrency", "2", "--max-queue", "4", "--max-instances", "1", "--max-instances-per-deployment", "1", "--min-instances", "1")...)
	base := gw.URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stat := func() *api.Request {
		return rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}})
	}
	mustCall(t, base, 0, stat())
	var inst string
	waitFor(ctx, t, "an instance serving", func() bool {
		if in := serving(clusterStatus(t, base), 0); len(in) == 1 {
			inst = in[0].Address
		}
		return inst != ""
	})

	// Direct clients, each on a connection of its own that stays open
	// (keep-alive), one after the other so that the count is exact.
	const limit = 2 + 4 + 16
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	served, refused := 0, 0
	host := strings.TrimPrefix(inst, "http://")
	for range 4 * limit {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a direct client after %d served and %d refused: %v", served, refused, err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			served++
		case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
			refused++
		default:
			t.Fatalf("a direct client: %s", resp.Status)
		}
	}
	t.Logf("direct clients holding connections: %d served, %d refused with 503", served, refused)
	if refused == 0 || served > limit {
		t.Fatalf("%d direct connections served (limit %d), %d refused: the instance takes every client that reaches it", served, limit, refused)
	}
	// A direct RPC call now gets the server's retryable answer. (The 503
	// may reach a Go client before it has sent its request, which it then
	// reports as a broken connection: try again.)
	var se *rpc.StatusError
	for {
		_, _, err := rpc.Invoke(ctx, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, inst, stat(), 0, nil)
		if errors.As(err, &se) || err == nil || ctx.Err() != nil {
			break
		}
	}
	if se == nil || se.Status != http.StatusServiceUnavailable || se.RetryAfter <= 0 {
		t.Fatalf("a direct call past the limit: %v, want 503 with Retry-After", se)
	}
	// The gateway's call goes over the connection it keeps to the instance.
	mustCall(t, base, 0, stat())

	for _, c := range held {
		c.Close()
	}
	held = nil
	waitFor(ctx, t, "a direct call served once the connections closed", func() bool {
		_, _, err := rpc.Invoke(ctx, nil, inst, stat(), 0, nil)
		return err == nil
	})
}

// TestGatewayCallbackHost: a hybrid invocation through the gateway that
// names a callback endpoint on another host than the client's is
// connected back to on the client's own host, at the port it named, and
// never on the host it named.
func TestGatewayCallbackHost(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process", "--deployments", "1",
		"--max-instances", "1", "--max-instances-per-deployment", "1", "--min-instances", "1")...)
	// Two listeners on one port: 127.0.0.2 (the host named; all of
	// 127.0.0.0/8 is this machine's loopback) and 127.0.0.1 (the host this
	// client connects to the gateway from).
	var other, own net.Listener
	for own == nil {
		var err error
		if other, err = net.Listen("tcp", "127.0.0.2:0"); err != nil {
			t.Skipf("no 127.0.0.2 on this machine: %v", err)
		}
		_, port, _ := net.SplitHostPort(other.Addr().String())
		if own, err = net.Listen("tcp", "127.0.0.1:"+port); err != nil {
			other.Close()
			own = nil
		}
	}
	defer other.Close()
	defer own.Close()
	hellos := func(ln net.Listener) <-chan rpc.Hello {
		ch := make(chan rpc.Hello, 4)
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				if h, err := rpc.ReadHello(bufio.NewReader(nc)); err == nil {
					_ = rpc.AcceptHello(nc, false, "test")
					ch <- h
				}
			}
		}()
		return ch
	}
	toOther, toOwn := hellos(other), hellos(own)

	hdr := http.Header{}
	hdr.Set(rpc.HeaderDeployment, strconv.Itoa(0))
	hdr.Set(rpc.HeaderCallback, other.Addr().String())
	hdr.Set(rpc.HeaderCallbackToken, "elsewhere")
	req := rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := rpc.Invoke(ctx, nil, gw.URL(), req, 0, hdr); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-toOther:
		t.Fatalf("the instance connected back to the host the client named, %s (hello %+v)", other.Addr(), h)
	case h := <-toOwn:
		if h.Token != "elsewhere" {
			t.Fatalf("hello %+v", h)
		}
	case <-ctx.Done():
		t.Fatal("no connect-back to the client's own host")
	}
	// The instance dials once per endpoint and token: after the hello on
	// the client's host, none can come to the other.
	if len(toOther) != 0 {
		t.Fatal("the instance connected back to the host the client named too")
	}
}
