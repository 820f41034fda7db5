package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// chromium returns the browser to drive: $NIMBUS_CHROMIUM, else the first
// of Debian's and Chrome's names on PATH. Without one the test is skipped,
// unless NIMBUS_REQUIRE_CHROMIUM is set (scripts/test.sh sets it after
// installing Debian's chromium), when it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NIMBUS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("NIMBUS_REQUIRE_CHROMIUM") != "" {
		t.Fatal("NIMBUS_REQUIRE_CHROMIUM is set but no chromium is on PATH (apt-get install chromium, or set NIMBUS_CHROMIUM)")
	}
	t.Skip("no chromium on PATH: the status page's browser test needs Debian's chromium (apt-get install chromium; scripts/test.sh installs it as root)")
	return ""
}

// chartState is window.__nimbusCharts.charts as statuspage.js keeps it.
type chartState map[string]struct {
	Series map[string][]*float64 `json:"series"`
	Points int                   `json:"points"`
}

// lastValue is the newest non-null value of a chart's series, or false.
func (c chartState) lastValue(chart, series string) (float64, bool) {
	v := c[chart].Series[series]
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] != nil {
			return *v[i], true
		}
	}
	return 0, false
}

// TestStatusPageInBrowser loads the status page in headless chromium: it
// renders with no console errors or exceptions, and its charts change while
// a load runs against the server through the Go client (throughput and p99
// of the operations the load sends, the cache hit ratio). With
// NIMBUS_STATUS_SCREENSHOT=FILE it saves a screenshot taken under load.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Version = "test"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	cfg.CacheBytes = 16 << 20
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		chromedp.Flag("headless", "new"), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1300, 1100))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		t.Fatalf("starting %s: %v", bin, err)
	}

	// Console errors, exceptions and browser-log errors (a failed fetch, a
	// 404 of the page's script), all through the test.
	var mu sync.Mutex
	var problems []string
	cctx, stopConsole := context.WithCancel(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range chromedp.Console(cctx) {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleException:
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				mu.Unlock()
			case chromedp.ConsoleWarning:
				t.Logf("console: %s", m)
			}
		}
	}()

	run := func(name string, timeout time.Duration, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if _, err := chromedp.Run(rctx, a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	charts := func() chartState {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		js, err := chromedp.Run(rctx, chromedp.Evaluate[string](`JSON.stringify(window.__nimbusCharts.charts)`))
		if err != nil {
			t.Fatalf("reading the charts: %v", err)
		}
		var c chartState
		if err := json.Unmarshal([]byte(js), &c); err != nil {
			t.Fatalf("charts %s: %v", js, err)
		}
		return c
	}

	run("loading the page", 30*time.Second, chromedp.Navigate(s.Addr()+"/"))
	run("waiting for the charts", 30*time.Second,
		chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#chart-throughput")),
			chromedp.Poll[chromedp.Void](`window.__nimbusCharts && window.__nimbusCharts.updates >= 2`,
				chromedp.WithPollingTimeout(20*time.Second))))
	before := charts()
	for _, name := range []string{"instances", "throughput", "p99", "cache"} {
		if _, ok := before[name]; !ok {
			t.Errorf("chart %q missing: %+v", name, before)
		}
	}
	if n, ok := before.lastValue("instances", "deployment 0"); !ok || n != 1 {
		t.Errorf("instances of deployment 0 = %v (%v), want 1", n, ok)
	}
	if r, ok := before.lastValue("throughput", "rpc stat"); ok && r > 0 {
		t.Errorf("stats before any load: %v/s", r)
	}

	// The load: four clients stat and list a few directories, over and
	// over (cache hits after the first of each), until the charts show it.
	c, err := client.Dial(context.Background(), s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u := meta.User{Name: cfg.Namespace.Superuser}
	for i := range 8 {
		if err := c.Mkdirs(context.Background(), u, fmt.Sprintf("/load/d%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for w := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; lctx.Err() == nil; i++ {
				p := fmt.Sprintf("/load/d%d", (i+w)%8)
				if _, err := c.Stat(lctx, u, p); err != nil && lctx.Err() == nil {
					t.Errorf("stat %s: %v", p, err)
					return
				}
				if i%4 == 0 {
					if _, err := c.List(lctx, u, "/load", "", 100); err != nil && lctx.Err() == nil {
						t.Errorf("list /load: %v", err)
						return
					}
				}
			}
		}()
	}
	var during chartState
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		during = charts()
		rate, okRate := during.lastValue("throughput", "rpc stat")
		_, okP99 := during.lastValue("p99", "rpc stat")
		hit, okHit := during.lastValue("cache", "hit ratio")
		if okRate && rate > 0 && okP99 && okHit && hit > 0 {
			break
		}
		if time.Now().After(deadline) {
			stopLoad()
			load.Wait()
			t.Fatalf("the charts did not show the load within 30 s:\nbefore %+v\nduring %+v", before, during)
		}
	}
	if during["throughput"].Points <= before["throughput"].Points || during["p99"].Points <= before["p99"].Points {
		t.Errorf("points before %+v, during %+v: want more", before, during)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	stopLoad()
	load.Wait()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := os.Getenv("NIMBUS_STATUS_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "status-page.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot under load: %s", path)

	// The table's row for this server, filled in by the script.
	row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#instances tr.this").textContent`))
	if err != nil || row == "" {
		t.Errorf("this server's row: %q, %v", row, err)
	}

	// With JavaScript off (a second tab): the server-rendered totals and
	// table, and no charts.
	noJS, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	nctx, cancel := context.WithTimeout(noJS, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(nctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}), chromedp.Navigate(s.Addr()+"/")); err != nil {
		t.Fatalf("loading the page without JavaScript: %v", err)
	}
	row, err = chromedp.Run(nctx, chromedp.Text(chromedp.CSS("#instances tr.this")))
	if err != nil || !strings.Contains(row, s.Member().Member().ID) || !strings.Contains(row, "serving") {
		t.Errorf("without JavaScript, this server's row: %q, %v", row, err)
	}
	if live, err := chromedp.Run(nctx, chromedp.OuterHTML(chromedp.CSS("#live"))); err != nil || live != `<span id="live"></span>` {
		t.Errorf("without JavaScript the live marker is %q (%v): did a script run?", live, err)
	}

	stopConsole()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser console: %s", p)
	}
}
