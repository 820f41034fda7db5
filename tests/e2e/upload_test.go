package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// webhdfs sends one WebHDFS request to s (following no redirect) and
// returns the status and body.
func (s *server) webhdfs(method, path, query string, body []byte) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url()+"/webhdfs/v1"+path+"?"+query, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// cutUpload sends method path?query with Content-Length announced over a
// raw TCP connection, writes only body, and closes: a client cut off mid
// upload.
func (s *server) cutUpload(method, path, query string, announced int, body []byte) {
	s.t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	fmt.Fprintf(c, "%s /webhdfs/v1%s?%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		method, path, query, s.addr, announced)
	if _, err := c.Write(body); err != nil {
		s.t.Fatal(err)
	}
	// Half-close, so that the server reads the body's end, then wait for
	// its answer or its close: the upload's cleanup runs before either, so
	// the caller's next request sees what the failed upload left (nothing).
	// Waiting on GETFILESTATUS alone would race the handler, which may not
	// have created the file yet.
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		s.t.Fatalf("%s %s: waiting for the server's answer to a cut upload: %v", method, path, err)
	}
	c.Close()
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed + i*31 + i>>11)
	}
	return b
}

// TestWebHDFSCutUploadNotPublished: CREATE and APPEND bodies cut short by
// the client, against the real server, on the one-step small path, the
// streamed inline path and the block path: nothing new is published, an
// overwritten file survives, a retry succeeds at once, and nothing is
// logged as an error.
func TestWebHDFSCutUploadNotPublished(t *testing.T) {
	s := startServer(t, "", "")
	status := func(p string) (int, map[string]any) {
		code, b := s.webhdfs("GET", p, "op=GETFILESTATUS&user.name=alice", nil)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		fs, _ := m["FileStatus"].(map[string]any)
		return code, fs
	}
	create := func(p string, data []byte) {
		t.Helper()
		code, b := s.webhdfs("PUT", p, "op=CREATE&data=true&overwrite=true&user.name=alice", data)
		if code != 201 {
			t.Fatalf("CREATE %s: %d %s", p, code, b)
		}
	}
	if code, b := s.webhdfs("PUT", "/up", "op=MKDIRS&permission=777&user.name=root", nil); code != 200 {
		t.Fatalf("MKDIRS: %d %s", code, b)
	}
	for _, tc := range []struct {
		name           string
		announced, cut int
	}{
		{"small", 40000, 20000},                 // one CreateFile transaction
		{"inline", 100000, 70000},               // streamed into content rows
		{"block", 588895, 524288},               // the report's numbers: a block file
		{"large", 50000000, 6 << 20},            // a 50 MB upload cut at 6 MB
		{"chunk-edge", 2 << 20, 2<<20 - 1},      // one byte short
		{"header-only", 1 << 20, 0},             // no body at all
		{"whole-chunks", 1 << 20, 256 << 10},    // cut on a write-chunk boundary
		{"inline-edge", 128 << 10, 128<<10 - 1}, // one byte short of the inline threshold
	} {
		p := "/up/new-" + tc.name
		s.cutUpload("PUT", p, "op=CREATE&data=true&user.name=alice", tc.announced, pattern(1, tc.cut))
		deadline := time.Now().Add(15 * time.Second)
		for {
			code, fs := status(p)
			if code == 404 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: a cut upload is visible: %d %v", tc.name, code, fs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		full := pattern(2, tc.announced%(8<<20))
		create(p, full) // at once: no lease lingers

		// Over an existing file: the old contents survive.
		old := pattern(3, 1000+len(tc.name))
		o := "/up/old-" + tc.name
		create(o, old)
		s.cutUpload("PUT", o, "op=CREATE&data=true&overwrite=true&user.name=alice", tc.announced, pattern(4, tc.cut))
		deadline = time.Now().Add(15 * time.Second)
		for {
			code, b := s.webhdfs("GET", "/up", "op=LISTSTATUS&user.name=alice", nil)
			if code == 200 && !strings.Contains(string(b), "_UPLOADING_") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: staging file left: %d %s", tc.name, code, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		code, b := s.webhdfs("GET", o, "op=OPEN&data=true&user.name=alice", nil)
		if code != 200 || !bytes.Equal(b, old) {
			t.Fatalf("%s: the overwritten file after a cut upload: %d, %d bytes (want %d)", tc.name, code, len(b), len(old))
		}
		create(o, full)

		// A cut APPEND leaves the file as it was.
		s.cutUpload("POST", o, "op=APPEND&data=true&user.name=alice", tc.announced, pattern(5, tc.cut))
		deadline = time.Now().Add(15 * time.Second)
		for {
			code, fs := status(o)
			if l, _ := fs["length"].(float64); code == 200 && int(l) == len(full) {
				// and closed: a new append goes through at once
				if c, b := s.webhdfs("POST", o, "op=APPEND&data=true&user.name=alice", []byte("tail")); c == 200 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("%s: append after a cut append: %d %s", tc.name, c, b)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after a cut append: %d %v, want length %d", tc.name, code, fs, len(full))
			}
			time.Sleep(20 * time.Millisecond)
		}
		code, b = s.webhdfs("GET", o, "op=OPEN&data=true&user.name=alice", nil)
		if code != 200 || !bytes.Equal(b, append(full, "tail"...)) {
			t.Fatalf("%s: content after a cut append and an append: %d, %d bytes", tc.name, code, len(b))
		}
	}

	// Malformed queries and foreign permission errors are named as such.
	code, b := s.webhdfs("GET", "/", "%zz=1", nil)
	if code != 400 || !strings.Contains(string(b), `%zz`) {
		t.Errorf("?%%zz=1: %d %s", code, b)
	}
	// A raw path with dot segments is refused as HDFS refuses it, not
	// redirected to the cleaned path and acted on.
	for _, raw := range []string{"/webhdfs/v1/up/../dots", "/webhdfs/v1/up/./dots", "/webhdfs/v1//dots"} {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "PUT %s?op=MKDIRS&user.name=root HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", raw, s.addr)
		reply, _ := io.ReadAll(c)
		c.Close()
		if !bytes.HasPrefix(reply, []byte("HTTP/1.1 400")) || !bytes.Contains(reply, []byte(raw[len("/webhdfs/v1"):])) {
			t.Errorf("MKDIRS %s: want 400 naming the path, got %.200q", raw, reply)
		}
	}
	if code, _ := s.webhdfs("GET", "/dots", "op=GETFILESTATUS", nil); code != 404 {
		t.Errorf("a refused dot path made /dots: GETFILESTATUS %d", code)
	}
	code, b = s.webhdfs("PUT", "/x", "op=MKDIRS&user.name=alice", nil)
	if code != 403 || !strings.Contains(string(b), "mkdirs /x: permission denied (at /: ") {
		t.Errorf("MKDIRS /x as alice: %d %s", code, b)
	}

	// Readers that hang up mid-download are not errors either.
	for range 3 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /webhdfs/v1/up/new-large?op=OPEN&data=true&user.name=alice HTTP/1.1\r\nHost: %s\r\n\r\n", s.addr)
		if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}

	res, err := http.Get(s.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Contains(m, []byte("nimbus_webhdfs_client_disconnects_total")) || bytes.Contains(m, []byte("nimbus_webhdfs_client_disconnects_total 0")) {
		t.Errorf("no client disconnects counted")
	}
	s.stop()
	if log := s.log.String(); strings.Contains(log, "level=ERROR") {
		t.Errorf("cut uploads logged as errors:\n%s", log)
	}
}
