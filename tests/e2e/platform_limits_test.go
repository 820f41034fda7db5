package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// The gateway's bounds end to end: a real `nimbus serve --platform local`
// with `nimbus namenode` children over PostgreSQL and etcd, driven over
// raw loopback connections.

// gatewayArgs are a process-hosted gateway's flags on db.
func gatewayArgs(t *testing.T, db string, extra ...string) []string {
	coord := fmt.Sprintf("etcd://%s/e2e-gwlim-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	return append([]string{"--superuser", "root", "--store", db, "--coordinator", coord, "--coordinator-ttl", "2s", "--cache-bytes", "4m",
		"--platform", "local", "--hosting", "process"}, extra...)
}

// rawRequest sends req on a new connection to addr and returns the
// connection, for the test to read the answer (readAnswer) or stall.
func rawRequest(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads one HTTP answer on c; the deadline guards against a
// hang, it does not measure anything.
func readAnswer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// remoteException reports whether an answer is in WebHDFS's error shape.
func remoteException(resp *http.Response, body string) bool {
	var re wire.RemoteException
	return resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal([]byte(body), &re) == nil && re.RemoteException.Exception != ""
}

// TestGatewayDeploymentsMismatch: on a store where a server with one
// deployment ran, a gateway of two cannot start instances (each exits with
// "--deployments differs from the cluster's", status 78). An invocation
// fails at once with that error (500, not a 503 after the invoke
// timeout), /readyz says not ready with it, the next invocation fails at
// once too, `nimbus fs ls /` fails with it, and no instance directory is
// left on disk. (--min-instances 0: every start is an invocation's, over
// when its call returns.)
func TestGatewayDeploymentsMismatch(t *testing.T) {
	db := pgtest.DB(t)
	srv := testproc.Start(t, binary, "", "", "--superuser", "root", "--store", db)
	if err := srv.Stop(); err != nil {
		t.Fatalf("the first server's exit: %v", err)
	}
	data := t.TempDir()
	gw := testproc.Start(t, binary, data, "", gatewayArgs(t, db, "--deployments", "2", "--invoke-timeout", "10m", "--min-instances", "0")...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for dep := range 2 {
		_, _, err := gatewayCall(ctx, gw.URL(), dep, rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}}))
		var se *rpc.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusInternalServerError || !strings.Contains(se.Msg, "differs from the cluster's") {
			t.Fatalf("deployment %d: %v, want 500 with the instance's error", dep, err)
		}
	}
	// `nimbus fs` (a hybrid client of the gateway) fails with the error
	// rather than waiting.
	ls := exec.CommandContext(ctx, binary, "fs", "ls", "/")
	ls.Env = append(os.Environ(), "NIMBUS_ADDR="+gw.URL(), "NIMBUS_USER=root")
	if out, err := ls.CombinedOutput(); err == nil || !strings.Contains(string(out), "differs from the cluster's") {
		t.Fatalf("nimbus fs ls /: %v\n%s\nwant a failure with the instances' error", err, out)
	}
	code, body := testproc.Get(t, gw.URL()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "differs from the cluster's") {
		t.Fatalf("/readyz: %d %q, want 503 with the instance's error", code, body)
	}
	left, _ := os.ReadDir(filepath.Join(data, "instances"))
	if len(left) != 0 {
		t.Fatalf("%d instance directories left by failed starts", len(left))
	}
}

// TestGatewayConnectionLimit: with --max-connections 40, forty connections
// held open by clients that send nothing fill the gateway; the next one is
// answered 503 with Retry-After at once, and once they close the gateway
// answers again.
func TestGatewayConnectionLimit(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", gatewayArgs(t, pgtest.DB(t), "--max-connections", "40", "--http-header-timeout", "5m")...)
	var held []net.Conn
	for range 40 {
		c, err := net.Dial("tcp", gw.Addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The accept loop takes them in order: a request on a new connection
	// is turned away once all forty are counted.
	var resp *http.Response
	var body string
	for range 100 {
		resp, body = readAnswer(t, rawRequest(t, gw.Addr, "GET /readyz HTTP/1.1\r\nHost: gw\r\n\r\n"))
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many connections") {
		t.Fatalf("a connection past the limit: %d %q, want 503 too many connections", resp.StatusCode, body)
	}
	for _, c := range held {
		c.Close()
	}
	if err := gw.WaitReady(time.Minute); err != nil {
		t.Fatalf("after the connections closed: %v", err)
	}
}

// TestGatewayBodyBounds: a /rpc/call body that stalls is answered 400 at
// --rpc-frame-timeout; a frame over the instances' limit is answered 413
// by the gateway; with --rpc-server-max-mb 8, two slow 3 MiB bodies are
// taken and a third is answered 503 before its body is read.
func TestGatewayBodyBounds(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", gatewayArgs(t, pgtest.DB(t), "--rpc-frame-timeout", "10s", "--rpc-server-max-mb", "8")...)
	call := func(n, sent int) net.Conn {
		return rawRequest(t, gw.Addr, fmt.Sprintf("POST /rpc/call HTTP/1.1\r\nHost: gw\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
			rpc.ContentType, n, strings.Repeat("x", sent)))
	}
	if resp, body := readAnswer(t, call(100, 10)); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not arrive within 10s") {
		t.Fatalf("a stalled body: %d %q, want 400", resp.StatusCode, body)
	}
	if resp, body := readAnswer(t, call(5<<20, 0)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 5 MiB frame: %d %q, want 413", resp.StatusCode, body)
	}
	// Two slow bodies hold 6 MiB of the 8 (each answered 400 once its frame
	// timeout passes); a third, sent meanwhile, does not fit.
	slow := []net.Conn{call(3<<20, 1000), call(3<<20, 1000)}
	for {
		_, m := testproc.Get(t, gw.URL()+"/metrics")
		if strings.Contains(m, "\nnimbus_gateway_body_bytes 6.291456e+06\n") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, body := readAnswer(t, call(3<<20, 1000))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "budget") {
		t.Fatalf("a third 3 MiB body over an 8 MiB budget: %d %q, want 503", resp.StatusCode, body)
	}
	for _, c := range slow {
		if resp, body := readAnswer(t, c); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a slow body: %d %q, want 400 at the frame timeout", resp.StatusCode, body)
		}
	}
}

// TestGatewayStalledUpload: a WebHDFS CREATE through the gateway whose
// body stalls is answered 400 (a RemoteException, nothing kept) at
// --upload-idle-timeout, as the server answers it, and the file is not
// there afterwards.
func TestGatewayStalledUpload(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", gatewayArgs(t, pgtest.DB(t), "--upload-idle-timeout", "1s")...)
	resp, body := readAnswer(t, rawRequest(t, gw.Addr, "PUT /webhdfs/v1/stalled?op=CREATE&user.name=root HTTP/1.1\r\nHost: "+gw.Addr+"\r\nContent-Length: 0\r\n\r\n"))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusTemporaryRedirect || loc == "" {
		t.Fatalf("CREATE: %d %q, want a redirect", resp.StatusCode, body)
	}
	i := strings.Index(loc, "/webhdfs/v1/")
	if i < 0 {
		t.Fatalf("CREATE redirected to %q", loc)
	}
	c := rawRequest(t, gw.Addr, "PUT "+loc[i:]+" HTTP/1.1\r\nHost: "+gw.Addr+"\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("x", 10))
	resp, body = readAnswer(t, c)
	if resp.StatusCode != http.StatusBadRequest || !remoteException(resp, body) {
		t.Fatalf("a stalled upload: %d %q, want 400 with a RemoteException", resp.StatusCode, body)
	}
	if code, body := testproc.Get(t, gw.URL()+"/webhdfs/v1/stalled?op=GETFILESTATUS&user.name=root"); code != http.StatusNotFound {
		t.Fatalf("the stalled upload's file: %d %q, want 404", code, body)
	}
}

// TestMalformedRequestShaped: a request line net/http refuses before any
// handler (a bad percent-escape, a raw space) is answered 400 in WebHDFS's
// shape by the server and by the gateway.
func TestMalformedRequestShaped(t *testing.T) {
	db := pgtest.DB(t)
	srv := testproc.Start(t, binary, "", "", "--superuser", "root", "--store", db)
	gw := testproc.Start(t, binary, "", "", gatewayArgs(t, pgtest.DB(t))...)
	for _, s := range []*testproc.Server{srv, gw} {
		for _, line := range []string{"GET /webhdfs/v1/a%zz?op=GETFILESTATUS HTTP/1.1", "GET /webhdfs/v1/a b?op=GETFILESTATUS HTTP/1.1"} {
			resp, body := readAnswer(t, rawRequest(t, s.Addr, line+"\r\nHost: x\r\n\r\n"))
			if resp.StatusCode != http.StatusBadRequest || !remoteException(resp, body) {
				t.Fatalf("%s: %q: %d %s %q, want 400 with a RemoteException", s.Addr, line, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		}
	}
}

// TestGatewayReservedSlots: with direct clients holding every client slot
// of an instance process (--instance-max-connections), calls through the
// gateway, which need new connections to it, are still served: the
// gateway's credential admits them to the slots the instance reserves for
// it. A client that sends the credential header itself is not: the
// gateway replaces it, and straight at the instance a wrong one is
// answered 503 like any client past the limit.
func TestGatewayReservedSlots(t *testing.T) {
	const instanceConns, concurrency = 4, 8
	gw := testproc.Start(t, binary, "", "", gatewayArgs(t, pgtest.DB(t), "--deployments", "1", "--concurrency", strconv.Itoa(concurrency),
		"--min-instances", "1", "--max-instances", "1", "--instance-max-connections", strconv.Itoa(instanceConns))...)
	base := "http://" + gw.Addr
	var inst string
	for inst == "" {
		if in := serving(clusterStatus(t, base), 0); len(in) == 1 {
			inst = strings.TrimPrefix(in[0].Address, "http://")
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Kept-alive direct connections until the instance turns one away:
	// every client slot is then held (the gateway's own connections, if
	// any, hold the rest).
	held := 0
	for {
		resp, body := readAnswer(t, rawRequest(t, inst, "GET /readyz HTTP/1.1\r\nHost: inst\r\n\r\n"))
		if resp.StatusCode == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many connections") {
				t.Fatalf("a direct connection past the limit: %d %q", resp.StatusCode, body)
			}
			break
		}
		if resp.StatusCode != http.StatusOK || held > instanceConns {
			t.Fatalf("direct connection %d: %d %q, with --instance-max-connections %d", held+1, resp.StatusCode, body, instanceConns)
		}
		held++
	}
	resp, body := readAnswer(t, rawRequest(t, inst, "GET /readyz HTTP/1.1\r\nHost: inst\r\n"+platform.HeaderGatewayCredential+": guess\r\n\r\n"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a direct connection past the limit with a made-up credential: %d %q, want 503", resp.StatusCode, body)
	}
	// Rounds of twice the instance's concurrency through the gateway, each
	// client on connections of its own: the gateway holds up to
	// --concurrency requests at the instance at once, more connections
	// than it had.
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan string, 2*concurrency)
		for i := range 2 * concurrency {
			wg.Go(func() {
				hc := &http.Client{Transport: &http.Transport{}}
				defer hc.CloseIdleConnections()
				req, _ := http.NewRequest(http.MethodGet, base+"/webhdfs/v1/?op=GETFILESTATUS&user.name=root", nil)
				if i%2 == 1 {
					req.Header.Set(platform.HeaderGatewayCredential, "guess") // replaced by the gateway's
				}
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Sprintf("%s %s", resp.Status, b)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("round %d through the gateway, %d direct connections holding the instance's client slots: %s", round, held, e)
		}
	}
}
