package webhdfs

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkGetFileStatusHandler measures the gateway alone (no network): one
// GETFILESTATUS through ServeHTTP over the real engine.
func BenchmarkGetFileStatusHandler(b *testing.B) {
	e := newEnv(b, nil, nil)
	e.put("u", "/a/b/c/d/e/f/file", "x", "")
	h, err := New(e.fs, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", PathPrefix+"/a/b/c/d/e/f/file?op=GETFILESTATUS&user.name=u", nil))
			if rec.Code != 200 {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
}

// BenchmarkGetFileStatusHTTP measures GETFILESTATUS over loopback HTTP with
// keep-alive connections, b.SetParallelism(16) clients per core.
func BenchmarkGetFileStatusHTTP(b *testing.B) {
	e := newEnv(b, nil, nil)
	e.put("u", "/a/b/c/d/e/f/file", "x", "")
	url := e.srv.URL + PathPrefix + "/a/b/c/d/e/f/file?op=GETFILESTATUS&user.name=u"
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	})
}

// BenchmarkListStatusBatchHandler measures the gateway alone: one page of
// 1,000 entries of LISTSTATUS_BATCH through ServeHTTP over the real engine.
func BenchmarkListStatusBatchHandler(b *testing.B) {
	e := newEnv(b, nil, nil)
	for i := 0; i < 1000; i++ {
		e.put("u", fmt.Sprintf("/big/f%04d", i), "", "")
	}
	h, err := New(e.fs, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", PathPrefix+"/big?op=LISTSTATUS_BATCH&user.name=u", nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"remainingEntries":0`) {
			b.Fatalf("status %d: %.200s", rec.Code, rec.Body)
		}
	}
}
