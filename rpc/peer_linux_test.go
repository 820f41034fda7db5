package rpc

import (
	"net"
	"testing"
	"time"
)

// wrapped is a listener's connection wrapper that names the connection
// underneath, as the server's connection limit and WebHDFS's early answers
// do.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

// TestPeerClosedThroughWrappers: the server's connections reach the RPC
// server wrapped twice (server.LimitListener, webhdfs.ShapeEarlyErrors); a
// peer that closed must show through both, or a request that waited for a
// slot starts on a connection whose client is gone.
func TestPeerClosedThroughWrappers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	nc := wrapped{wrapped{sc}}
	if peerClosed(nc) {
		t.Fatal("peerClosed before the peer closed")
	}
	client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !peerClosed(nc) {
		if time.Now().After(deadline) {
			t.Fatal("peerClosed never saw the peer's close through two wrappers")
		}
		time.Sleep(time.Millisecond)
	}
}
