// Package soak runs the real server (TestSoak) and the local platform, its
// gateway and instance processes (TestSoakPlatform), under a mixed load of
// well-behaved and hostile clients and checks that the well-behaved ones do
// not notice (docs/OPERATIONS.md, "Checking it").
package soak

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
	"google.golang.org/protobuf/proto"
)

// Phase lengths: a baseline of well-behaved clients alone, then the same
// with the hostile share. NIMBUS_SOAK_SECONDS sets the hostile phase (the
// baseline is half of it); the default keeps the test near a minute.
func phases() (base, hostile time.Duration) {
	hostile = 30 * time.Second
	if v, err := strconv.Atoi(os.Getenv("NIMBUS_SOAK_SECONDS")); err == nil && v > 0 {
		hostile = time.Duration(v) * time.Second
	}
	return hostile / 2, hostile
}

const (
	rssBound    = 1536 << 20 // the server's resident memory, at every sample
	bigSize     = 1 << 20    // the file slow readers read
	slowReaders = 4          // connections pipelining reads they do not read
	slowReads   = 500        // reads each slow reader pipelines: 2 GiB of answers unless bounded
	goodRPC     = 3          // well-behaved workers over the RPC
	goodHTTP    = 3          // well-behaved workers over WebHDFS
	floodConns  = 200        // idle connections per flood wave
)

// latencies collects the duration of every well-behaved operation.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) p99() (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[len(s)*99/100], len(s)
}

func (l *latencies) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	return slices.Max(l.d)
}

// stallBound is the shortest protocol timeout the soak's server runs with
// (--rpc-frame-timeout): a well-behaved call that took this long waited for
// a hostile connection to time out, which is what the bounds must prevent.
// Below it, latency is measured and reported, not asserted: this 2-core
// machine's load moves a p99 by more than any ratio a test could hold.
const stallBound = 2 * time.Second

// TestSoak: with the hostile share, well-behaved clients see no error and no
// call of theirs waits as long as a hostile connection's timeout
// (stallBound); their p99 beside the baseline measured in the same run is
// reported. The server's RSS stays under rssBound, the slow readers get
// every answer, no failed upload leaves a file and fsck is clean at the end.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: a minute of load; run without -short")
	}
	baseDur, hostileDur := phases()
	// Short protocol timeouts so that hostile connections come and go
	// within the phase; the byte bounds are the defaults. The soft memory
	// limit keeps the collector from letting the heap grow towards its
	// default of 2 GiB and more, so that the RSS bound measures what the
	// server retains, not how lazily it collects.
	s := startServer(t, "--rpc-frame-timeout", stallBound.String(), "--http-header-timeout", "3s", "--log-level", "warn",
		"--memory-limit-mb", "1024")
	ctx := context.Background()
	root := meta.User{Name: "root"}
	cl, err := client.Dial(ctx, s.url(), client.Options{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, d := range []string{"/good", "/hostile"} {
		if err := cl.Mkdirs(ctx, root, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, bigSize)
	rand.Read(big)
	w, err := cl.CreateWriter(ctx, root, "/slow/big", meta.CreateOptions{Perm: 0o644, CreateParent: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	var maxRSS atomic.Int64
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := s.rssBytes(); err == nil && n > maxRSS.Load() {
				maxRSS.Store(n)
			}
			select {
			case <-tick.C:
			case <-stopRSS:
				return
			}
		}
	}()

	var goodErrs atomic.Int64
	fail := func(format string, args ...any) {
		if goodErrs.Add(1) <= 10 {
			t.Errorf("well-behaved client: "+format, args...)
		}
	}
	// The phase's end stops the workers between operations: an operation
	// under way finishes with its own context, so an error is the server's.
	runGood := func(phase string, d time.Duration, lat *latencies) {
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for i := range goodRPC {
			wg.Add(1)
			go func() { defer wg.Done(); goodRPCWorker(end, cl, fmt.Sprintf("/good/%s-rpc%d", phase, i), lat, fail) }()
		}
		for i := range goodHTTP {
			wg.Add(1)
			go func() {
				defer wg.Done()
				goodHTTPWorker(end, s.url(), fmt.Sprintf("/good/%s-http%d", phase, i), lat, fail, nil)
			}()
		}
		wg.Wait()
	}

	// Baseline.
	var base latencies
	runGood("alone", baseDur, &base)
	baseP99, baseN := base.p99()

	// The same with the hostile share.
	hctx, hcancel := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	var hostileStats struct{ slowAnswers, floodWaves, cut, garbage, stalled atomic.Int64 }
	slowErr := make(chan error, slowReaders)
	for i := range slowReaders {
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			n, err := slowReader(hctx, s.addr, big, uint64(i+1)<<32)
			hostileStats.slowAnswers.Add(int64(n))
			slowErr <- err
		}()
	}
	hostileLoop := func(every time.Duration, f func(ctx context.Context, i int)) {
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			for i := 0; hctx.Err() == nil; i++ {
				f(hctx, i)
				select {
				case <-hctx.Done():
				case <-time.After(every):
				}
			}
		}()
	}
	hostileLoop(time.Second, func(ctx context.Context, i int) {
		floodWave(ctx, s.addr, floodConns)
		hostileStats.floodWaves.Add(1)
	})
	hostileLoop(100*time.Millisecond, func(ctx context.Context, i int) {
		cutUpload(s.addr, fmt.Sprintf("/hostile/cut-%d", i))
		hostileStats.cut.Add(1)
	})
	hostileLoop(50*time.Millisecond, func(ctx context.Context, i int) {
		garbageAfterUpgrade(s.addr, i)
		hostileStats.garbage.Add(1)
	})
	for i := range 2 {
		hostileLoop(0, func(ctx context.Context, j int) {
			stalledUpload(ctx, s.addr, fmt.Sprintf("/hostile/stall-%d-%d", i, j))
			hostileStats.stalled.Add(1)
		})
	}
	time.Sleep(500 * time.Millisecond) // let the hostile share set in
	var withHostile latencies
	runGood("hostile", hostileDur, &withHostile)
	hcancel()
	hwg.Wait()
	close(stopRSS)
	<-rssDone
	hostP99, hostN := withHostile.p99()
	t.Logf("p99 alone %v (%d ops), with the hostile share %v (%d ops); server RSS peak %d MiB; hostile: %d slow answers read, %d flood waves, %d cut-off uploads, %d garbage connections, %d stalled uploads",
		baseP99, baseN, hostP99, hostN, maxRSS.Load()>>20, hostileStats.slowAnswers.Load(), hostileStats.floodWaves.Load(),
		hostileStats.cut.Load(), hostileStats.garbage.Load(), hostileStats.stalled.Load())

	if n := goodErrs.Load(); n > 0 {
		t.Errorf("%d errors seen by well-behaved clients", n)
	}
	if baseN == 0 || hostN == 0 {
		t.Fatalf("no operations measured (%d alone, %d with the hostile share)", baseN, hostN)
	}
	if m := withHostile.max(); m >= stallBound {
		t.Errorf("a well-behaved call took %v with the hostile share (%v alone): as long as a hostile connection's timeout (%v), so it waited for one", m, base.max(), stallBound)
	}
	if m := maxRSS.Load(); m > rssBound {
		t.Errorf("server RSS reached %d MiB, bound %d MiB", m>>20, rssBound>>20)
	}
	for range slowReaders {
		if err := <-slowErr; err != nil {
			t.Errorf("slow reader: %v", err)
		}
	}
	if n := hostileStats.slowAnswers.Load(); n != slowReaders*slowReads {
		t.Errorf("slow readers got %d answers, want %d", n, slowReaders*slowReads)
	}

	// Nothing a failed upload sent is published (the cut-off and stalled
	// uploads never completed). This depends on WebHDFS discarding a
	// create whose body did not arrive whole.
	var leftovers []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := cl.List(ctx, root, "/hostile", "", 1000)
		if err != nil {
			t.Fatalf("listing /hostile: %v", err)
		}
		leftovers = leftovers[:0]
		for _, e := range l.Entries {
			leftovers = append(leftovers, fmt.Sprintf("%s (%d bytes, under construction %v)", e.Name(), e.Length, e.UnderConstruction))
		}
		if len(leftovers) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(leftovers) > 0 {
		t.Errorf("failed uploads left %d files in /hostile, e.g. %q; the server's warnings about uploads:\n%s", len(leftovers),
			leftovers[:min(5, len(leftovers))], grepLines(s.log.String(), "upload"))
	}

	if out, err := s.nimbus("fsck"); err != nil || !strings.Contains(out, "HEALTHY") {
		t.Errorf("fsck on the running server: %v\n%s", err, out)
	}
	cl.Close()
	s.stop()
	if out, err := s.nimbus("fsck", "--data", s.data); err != nil || !strings.Contains(out, "HEALTHY") {
		t.Errorf("fsck of the stopped server's store: %v\n%s", err, out)
	}
	if strings.Contains(strings.ToLower(s.log.String()), "too many open files") || strings.Contains(s.log.String(), "panic:") {
		t.Errorf("server log:\n%s", s.log.String())
	}
}

// opTimeout bounds one well-behaved operation.
const opTimeout = 30 * time.Second

// goodRPCWorker cycles through mkdir, create, stat, list, read, rename and
// delete over the Go client until end, timing each operation.
func goodRPCWorker(end time.Time, cl *client.Client, dir string, lat *latencies, fail func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(end)+opTimeout)
	defer cancel()
	u := meta.User{Name: "root"}
	data := bytes.Repeat([]byte("good"), 512)
	timed := func(op string, f func() error) bool {
		start := time.Now()
		err := f()
		lat.add(time.Since(start))
		if err != nil {
			fail("rpc %s: %v", op, err)
		}
		return err == nil
	}
	for i := 0; time.Now().Before(end); i++ {
		d := fmt.Sprintf("%s/%d", dir, i)
		f, g := d+"/f", d+"/g"
		_ = timed("mkdirs "+d, func() error { return cl.Mkdirs(ctx, u, d, 0o755) }) &&
			timed("create "+f, func() error { return cl.WriteFile(ctx, u, f, data, meta.CreateOptions{Perm: 0o644}) }) &&
			timed("stat "+f, func() error {
				st, err := cl.Stat(ctx, u, f)
				if err == nil && st.Length != int64(len(data)) {
					err = fmt.Errorf("length %d, want %d", st.Length, len(data))
				}
				return err
			}) &&
			timed("list "+d, func() error {
				l, err := cl.List(ctx, u, d, "", 100)
				if err == nil && len(l.Entries) != 1 {
					err = fmt.Errorf("%d entries, want 1", len(l.Entries))
				}
				return err
			}) &&
			timed("read "+f, func() error {
				got, err := cl.ReadFile(ctx, u, f)
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("wrong content")
				}
				return err
			}) &&
			timed("rename "+f, func() error { return cl.Rename(ctx, u, f, g, meta.RenameOptions{}) }) &&
			timed("delete "+d, func() error { return cl.Delete(ctx, u, d, true) })
	}
}

// goodHTTPWorker does the same over WebHDFS with net/http. With busy
// non-nil it honours a 503 with Retry-After as a well-behaved client does
// (the request was not executed: a gateway or instance at its limits
// answers so before it runs anything), waiting and sending it again
// within opTimeout, and counts the retries in busy; with busy nil a 503
// is an error.
func goodHTTPWorker(end time.Time, base, dir string, lat *latencies, fail func(string, ...any), busy *atomic.Int64) {
	hc := &http.Client{Timeout: opTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	data := bytes.Repeat([]byte("http"), 512)
	do := func(method, path, query string, body []byte, want int) ([]byte, bool) {
		start := time.Now()
		for {
			var rd io.Reader
			if body != nil {
				rd = bytes.NewReader(body)
			}
			req, _ := http.NewRequest(method, base+"/webhdfs/v1"+path+"?user.name=root&"+query, rd)
			if body != nil {
				req.Header.Set("Content-Type", "application/octet-stream")
			}
			resp, err := hc.Do(req)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil && busy != nil && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
				time.Since(start) < opTimeout {
				busy.Add(1)
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(wait, 1)) * time.Second)
				continue
			}
			lat.add(time.Since(start))
			if err != nil {
				fail("webhdfs %s %s %s: %v", method, path, query, err)
				return nil, false
			}
			if resp.StatusCode != want {
				fail("webhdfs %s %s %s: %s %s", method, path, query, resp.Status, got)
				return nil, false
			}
			return got, true
		}
	}
	for i := 0; time.Now().Before(end); i++ {
		d := fmt.Sprintf("%s/%d", dir, i)
		f, g := d+"/f", d+"/g"
		if _, ok := do("PUT", d, "op=MKDIRS", nil, 200); !ok {
			continue
		}
		if _, ok := do("PUT", f, "op=CREATE&data=true", data, 201); !ok {
			continue
		}
		if st, ok := do("GET", f, "op=GETFILESTATUS", nil, 200); !ok || !bytes.Contains(st, []byte(`"length":2048`)) {
			if ok {
				fail("webhdfs GETFILESTATUS %s: %s", f, st)
			}
			continue
		}
		if ls, ok := do("GET", d, "op=LISTSTATUS", nil, 200); !ok || !json.Valid(ls) || !bytes.Contains(ls, []byte(`"pathSuffix":"f"`)) {
			if ok {
				fail("webhdfs LISTSTATUS %s: %s", d, ls)
			}
			continue
		}
		if got, ok := do("GET", f, "op=OPEN", nil, 200); !ok || !bytes.Equal(got, data) {
			if ok {
				fail("webhdfs OPEN %s: %d bytes, wrong content", f, len(got))
			}
			continue
		}
		do("PUT", f, "op=RENAME&destination="+g, nil, 200)
		do("DELETE", d, "op=DELETE&recursive=true", nil, 200)
	}
}

// upgrade opens a raw RPC connection.
func upgrade(addr string) (net.Conn, *bufio.Reader, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", rpc.ConnPath, rpc.UpgradeToken)
	br := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		nc.Close()
		return nil, nil, fmt.Errorf("upgrade: %v %v", resp, err)
	}
	nc.SetReadDeadline(time.Time{})
	return nc, br, nil
}

// slowReader pipelines slowReads reads of the big file without reading the
// answers until ctx ends, then reads and checks them all. It returns the
// number of correct answers.
func slowReader(ctx context.Context, addr string, big []byte, idBase uint64) (int, error) {
	nc, br, err := upgrade(addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	var out []byte
	for i := range uint64(slowReads) {
		out, _ = rpc.AppendFrame(out, &api.Request{RequestId: idBase + i, User: "root",
			Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/slow/big", Length: bigSize}}}, 0)
	}
	if _, err := nc.Write(out); err != nil {
		return 0, err
	}
	<-ctx.Done()
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	n := 0
	for n < slowReads {
		frame, err := rpc.ReadFrame(br, nil, 0)
		if err != nil {
			return n, fmt.Errorf("after %d answers: %w", n, err)
		}
		resp := &api.Response{}
		if err := proto.Unmarshal(frame, resp); err != nil {
			return n, err
		}
		if resp.GetError() != nil || !bytes.Equal(resp.GetRead().GetData(), big) {
			return n, fmt.Errorf("answer %d: %v", resp.GetRequestId(), resp.GetError())
		}
		n++
	}
	return n, nil
}

// floodWave opens n idle connections, holds them a second and closes
// them.
func floodWave(ctx context.Context, addr string, n int) {
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	for _, c := range conns {
		c.Close()
	}
}

func putHeader(path string, length int) string {
	return fmt.Sprintf("PUT /webhdfs/v1%s?op=CREATE&data=true&user.name=root HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", path, length)
}

// cutUpload announces 256 KiB, sends 100 KiB and closes.
func cutUpload(addr, path string) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, putHeader(path, 256<<10))
	c.Write(make([]byte, 100<<10))
}

// stalledUpload announces 1 MiB, sends 64 KiB and stops sending until the
// server gives up on it or ctx ends. It reports whether the server ended
// it (answered or closed) before ctx did.
func stalledUpload(ctx context.Context, addr, path string) bool {
	return stalledBody(ctx, addr, putHeader(path, 1<<20), 64<<10)
}

// stalledBody sends head (a request's headers, announcing a longer body)
// and sent bytes of body, then sends nothing more until the server
// answers or closes, or ctx ends. It reports whether the server ended it
// before ctx did.
func stalledBody(ctx context.Context, addr, head string, sent int) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, head)
	c.Write(make([]byte, sent))
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c) // until the server answers and closes, or we close
		close(done)
	}()
	select {
	case <-ctx.Done():
		return false
	case <-done:
		return true
	}
}

// garbageAfterUpgrade upgrades and sends bytes that are not a frame: random
// bytes, a length with too little body, or text, then leaves the
// connection for the server to close.
func garbageAfterUpgrade(addr string, i int) {
	nc, br, err := upgrade(addr)
	if err != nil {
		return
	}
	defer nc.Close()
	var junk []byte
	switch i % 3 {
	case 0:
		junk = make([]byte, 64)
		rand.Read(junk)
	case 1:
		junk = []byte{0xe8, 0x07, 1, 2, 3} // 1000 bytes announced, 3 sent
	case 2:
		junk = []byte("GET / HTTP/1.1\r\n")
	}
	nc.Write(junk)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, br) // the server answers an error or closes
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
