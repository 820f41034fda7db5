package rpc_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
)

// refusedAddr returns a loopback address nothing listens on: a dial to it
// is refused at once.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A flood of invocations naming endpoints that refuse the connection
// (more distinct endpoints than the server keeps) does not stop the
// server from connecting back to a good client afterwards: refusals are
// remembered in a bounded cache that forgets the oldest, not in a table
// that fills up for good.
func TestConnectBackAfterRefusedFlood(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{InstanceID: "3"})
	bad := refusedAddr(t)
	// Until the server has dialled more refusing endpoints than it
	// remembers (it dials at most maxDialsPerHost at once to one host,
	// and skips the endpoints past that), or until twice as many were sent.
	const flood = rpc.MaxRefusedCallbacks + 100
	sent := 0
	for mustCallbacks(t, e, "dialled") < flood && sent < 2*flood {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					hdr := http.Header{}
					hdr.Set(rpc.HeaderCallback, bad)
					hdr.Set(rpc.HeaderCallbackToken, fmt.Sprintf("flood%d", i))
					invoke(t, e, hdr)
				}
			}()
		}
		for range flood - int(mustCallbacks(t, e, "dialled")) {
			next <- sent
			sent++
		}
		close(next)
		wg.Wait()
	}
	// Every dial the flood started has failed.
	for mustCallbacks(t, e, "unreachable") != mustCallbacks(t, e, "dialled") {
		time.Sleep(time.Millisecond)
	}
	t.Logf("flood: %v dialled, %v unreachable", mustCallbacks(t, e, "dialled"), mustCallbacks(t, e, "unreachable"))
	if got := gauge(t, e, "nimbus_rpc_callback_endpoints", "refused"); got != rpc.MaxRefusedCallbacks {
		t.Fatalf("refusals remembered after the flood: %v, want %d", got, rpc.MaxRefusedCallbacks)
	}

	ln, accepted := callbackEndpoint(t)
	hdr := http.Header{}
	hdr.Set(rpc.HeaderCallback, ln.Addr().String())
	hdr.Set(rpc.HeaderCallbackToken, "good")
	invoke(t, e, hdr)
	var nc net.Conn
	select {
	case nc = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatalf("a good client was not connected back to after a flood of %d refused endpoints", flood)
	}
	h, err := rpc.ReadHello(bufio.NewReader(nc))
	if err != nil || h.Token != "good" {
		t.Fatalf("hello %+v, %v", h, err)
	}
}

// gauge reads the gauge name whose one label has value label.
func gauge(t *testing.T, e *env, name, label string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, label)
	return 0
}
