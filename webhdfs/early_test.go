package webhdfs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// sendRaw writes req on a new connection to addr and reads the answer.
func sendRaw(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: reading the answer: %v", req, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%q: reading the body: %v", req, err)
	}
	return resp, body
}

// TestEarlyErrorsShaped: requests net/http refuses before any handler runs
// (a bad percent-escape, a raw space or a control character in the request
// line, a missing Host) are answered in WebHDFS's shape, on a keep-alive
// connection's later request too; a handler's own plain-text 400 is left
// as it is.
func TestEarlyErrorsShaped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "handler says no", http.StatusBadRequest)
	})}
	go hs.Serve(ShapeEarlyErrors(ln))
	defer hs.Close()
	addr := ln.Addr().String()

	for _, req := range []string{
		"GET /webhdfs/v1/a%zz?op=GETFILESTATUS HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /webhdfs/v1/a b?op=GETFILESTATUS HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /webhdfs/v1/a\x01b?op=GETFILESTATUS HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /webhdfs/v1/a?op=GETFILESTATUS HTTP/1.1\r\n\r\n",
		// A good request, then a bad one on the same connection.
		"GET /webhdfs/v1/a?op=GETFILESTATUS HTTP/1.1\r\nHost: x\r\n\r\nGET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if strings.Count(req, "HTTP/1.1\r\n") == 2 {
			// The handler's own answer comes first, unchanged.
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || !bytes.Contains(body, []byte("handler says no")) {
				t.Fatalf("a handler's 400 was rewritten: %s %q", ct, body)
			}
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatalf("%q, second answer: %v", req, err)
			}
			body, _ = io.ReadAll(resp.Body)
		}
		c.Close()
		var re wire.RemoteException
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &re) != nil ||
			re.RemoteException.Exception != "IllegalArgumentException" || !strings.Contains(re.RemoteException.Message, "malformed HTTP request") {
			t.Fatalf("%q: answered %d %s %q, want 400 with a RemoteException", req, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// FuzzShapeEarly: whatever is written, shapeEarly either leaves it alone or
// makes an HTTP answer with the same status and a RemoteException body.
func FuzzShapeEarly(f *testing.F) {
	f.Add([]byte("HTTP/1.1 400 Bad Request" + earlyHeaders + "400 Bad Request"))
	f.Add([]byte("HTTP/1.1 400 Bad Request: missing required Host header" + earlyHeaders + "400 Bad Request: missing required Host header"))
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + earlyHeaders + "431 Request Header Fields Too Large"))
	f.Add([]byte("HTTP/1.1 501 Not Implemented" + earlyHeaders + "Unsupported transfer encoding"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := shapeEarly(b)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("shapeEarly(%q) = %q: not an HTTP answer: %v", b, out, err)
		}
		body, err := io.ReadAll(resp.Body)
		var re wire.RemoteException
		if err != nil || json.Unmarshal(body, &re) != nil || re.RemoteException.Exception == "" {
			t.Fatalf("shapeEarly(%q): body %q is not a RemoteException (%v)", b, body, err)
		}
		if want := string(b[len("HTTP/1.1 "):][:3]); resp.Status[:3] != want {
			t.Fatalf("shapeEarly(%q): status %q, want %s", b, resp.Status, want)
		}
	})
}
