package rpc_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
)

// callbackEndpoint is a client's callback endpoint, by hand.
func callbackEndpoint(t *testing.T) (net.Listener, chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 16)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			ch <- nc
		}
	}()
	return ln, ch
}

func invoke(t *testing.T, e *env, hdr http.Header) http.Header {
	t.Helper()
	req := &api.Request{RequestId: 1, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}
	resp, h, err := rpc.Invoke(context.Background(), nil, e.addr, req, 0, hdr)
	if err != nil || resp.GetError() != nil {
		t.Fatalf("invoke: %v %v", err, resp.GetError())
	}
	return h
}

// An invocation naming a callback endpoint is answered with the instance's
// id and URL, and the server connects back, says hello, and serves frames
// on the connection; further invocations do not dial again while it lives.
func TestConnectBack(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{InstanceID: "7"})
	ln, accepted := callbackEndpoint(t)
	hdr := http.Header{}
	hdr.Set(rpc.HeaderCallback, ln.Addr().String())
	hdr.Set(rpc.HeaderCallbackToken, "tok")
	h := invoke(t, e, hdr)
	if got, want := h.Get(rpc.HeaderInstance), "7 "+e.addr; got != want {
		t.Fatalf("%s: %q, want %q", rpc.HeaderInstance, got, want)
	}
	var nc net.Conn
	select {
	case nc = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connect-back within 10 s")
	}
	br := bufio.NewReader(nc)
	hello, err := rpc.ReadHello(br)
	if err != nil {
		t.Fatal(err)
	}
	if want := (rpc.Hello{Token: "tok", Instance: "7", URL: e.addr}); hello != want {
		t.Fatalf("hello %+v, want %+v", hello, want)
	}
	if err := rpc.AcceptHello(nc, true, ""); err != nil {
		t.Fatal(err)
	}
	conn := rpc.NewConn(nc, br, 0)
	resp, err := conn.Call(context.Background(), &api.Request{RequestId: 9, Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}})
	if err != nil || resp.GetError() != nil || resp.GetStatus() == nil {
		t.Fatalf("stat over the connect-back: %v %v", err, resp)
	}
	for range 5 {
		invoke(t, e, hdr)
	}
	// A round trip on the connection after the invocations: a dial they
	// started would have been accepted by now on loopback.
	if _, err := conn.Call(context.Background(), &api.Request{RequestId: 10, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := len(accepted); n != 0 {
		t.Fatalf("%d more connect-backs while one lives", n)
	}
	if got := mustCallbacks(t, e, "accepted"); got != 1 {
		t.Fatalf("accepted connect-backs %v, want 1", got)
	}
}

func mustCallbacks(t *testing.T, e *env, outcome string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_rpc_callbacks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A refused hello closes the connection, and the server does not dial that
// endpoint again for a while; NoConnectBack never dials.
func TestConnectBackRefusedAndOff(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{})
	ln, accepted := callbackEndpoint(t)
	hdr := http.Header{}
	hdr.Set(rpc.HeaderCallback, ln.Addr().String())
	hdr.Set(rpc.HeaderCallbackToken, "tok")
	if got := invoke(t, e, hdr).Get(rpc.HeaderInstance); !strings.HasPrefix(got, "0 http://") {
		t.Fatalf("%s of a plain server: %q", rpc.HeaderInstance, got)
	}
	nc := <-accepted
	br := bufio.NewReader(nc)
	if _, err := rpc.ReadHello(br); err != nil {
		t.Fatal(err)
	}
	rpc.AcceptHello(nc, false, "bad token")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the server kept a refused connection open")
	}
	for mustCallbacks(t, e, "refused") != 1 {
		time.Sleep(time.Millisecond)
	}
	invoke(t, e, hdr)
	time.Sleep(20 * time.Millisecond)
	if len(accepted) != 0 || mustCallbacks(t, e, "dialled") != 1 {
		t.Fatal("dialled again right after a refusal")
	}

	off := start(t, metatest.NewMemFS(), rpc.ServerOptions{NoConnectBack: true})
	invoke(t, off, hdr)
	time.Sleep(20 * time.Millisecond)
	if len(accepted) != 0 || mustCallbacks(t, off, "dialled") != 0 {
		t.Fatal("NoConnectBack connected back")
	}
}

// A busy gateway's 503 comes back as a StatusError with its Retry-After.
func TestInvokeStatusError(t *testing.T) {
	hs := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	_, _, err := rpc.Invoke(context.Background(), nil, hs, &api.Request{RequestId: 1, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}, 0, nil)
	var se *rpc.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || se.RetryAfter != 2*time.Second {
		t.Fatalf("%v, want a 503 with Retry-After 2s", err)
	}
}

func httpServer(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}
