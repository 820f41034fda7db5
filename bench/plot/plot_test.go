package plot_test

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/plot"
)

func result(sys, op string, clients int, thr float64) bench.Result {
	return bench.Result{Workload: "micro", Op: op, Target: "t", System: sys, Clients: clients, ThroughputOpsS: thr,
		CDF: []bench.CDFPoint{{Q: 0, Ms: 0.05}, {Q: 0.5, Ms: 0.2 * float64(clients)}, {Q: 0.99, Ms: 1.5 * float64(clients)}, {Q: 1, Ms: 4 * float64(clients)}}}
}

func TestWriteDrawsPNGs(t *testing.T) {
	var rs []bench.Result
	for _, c := range []int{1, 4, 16} {
		rs = append(rs, result("nimbus-rpc", "stat", c, 1000*float64(c)), result("hdfs-webhdfs", "stat", c, 300*float64(c)))
	}
	rs = append(rs, result("nimbus-rpc", "create", 4, 900))
	big := bench.Result{Workload: "bigdir", Op: "ls-bigdir", Target: "t", System: "nimbus-rpc", Clients: 1,
		Bigdir: &bench.BigdirStats{Entries: 10, MemSamples: []bench.MemSample{{TMs: 0, Bytes: 50 << 20}, {TMs: 100, Bytes: 60 << 20}}}}
	rs = append(rs, big)
	sp := bench.Result{Workload: "spotify", Op: "paper", Target: "t", System: "nimbus-rpc", Clients: 8,
		Series: []bench.SecondPoint{{T: 1, Ops: 900}, {T: 2, Ops: 2000}, {T: 3, Ops: 5}},
		PerOp: map[string]bench.OpStats{"read": {Ops: 10, Latency: bench.LatencyMs{P50: 0.2, P99: 2}},
			"create": {Ops: 1, Latency: bench.LatencyMs{P50: 1, P99: 9}}},
		Spotify: &bench.SpotifyStats{Mix: "paper", Seed: 1, Seconds: []bench.SpotifySecond{{T: 1, TargetOpsS: 1000}, {T: 2, TargetOpsS: 2100}}}}
	rs = append(rs, sp)
	el := bench.Result{Workload: "elastic", Op: "paper", Target: "t", System: "nimbus-hybrid", Clients: 8,
		Spotify: &bench.SpotifyStats{Mix: "paper", Seed: 1, Seconds: []bench.SpotifySecond{
			{T: 1, TargetOpsS: 100, Served: 100, P50Ms: 0.3, P99Ms: 2, ResponseP99Ms: 3},
			{T: 2, TargetOpsS: 800, Served: 500, P50Ms: 0.5, P99Ms: 9, ResponseP99Ms: 40},
			{T: 3, TargetOpsS: 800, Served: 790, P50Ms: 0.4, P99Ms: 4, ResponseP99Ms: 6}}},
		Elastic: &bench.ElasticStats{Step: 8, Samples: []bench.ElasticSample{
			{T: 0.5, Instances: map[string]int{"d0": 1, "d1": 1}}, {T: 1.5, Instances: map[string]int{"d0": 3, "d1": 2}},
			{T: 2.5, Instances: map[string]int{"d0": 4, "d1": 2}}}}}
	rs = append(rs, el)
	fl := el
	fl.Elastic = &bench.ElasticStats{Step: 1, Samples: el.Elastic.Samples, Faults: &bench.FaultStats{KillEveryS: 2,
		Kills: []bench.Kill{{T: 0.5, Deployment: 0, Instance: "1"}, {T: 2.5, Deployment: 1, Error: "409"}}}}
	rs = append(rs, fl)
	dir := t.TempDir()
	files, err := plot.Write(rs, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"throughput-stat.png": true, "latency-cdf-stat.png": true,
		"throughput-create.png": true, "latency-cdf-create.png": true,
		"throughput-ls-bigdir.png": false, "bigdir-memory.png": true,
		"spotify-paper-throughput.png": true, "spotify-paper-latency.png": true, "latency-cdf-paper.png": false, // no CDF in the fake result
		"elastic-throughput.png": true, "elastic-instances.png": true, "elastic-latency.png": true,
		"faults-throughput.png": true, "faults-instances.png": true,
	}
	for name, should := range want {
		_, err := os.Stat(filepath.Join(dir, name))
		if should && err != nil {
			t.Errorf("%s missing: %v", name, err)
		}
		if !should && err == nil {
			t.Errorf("%s drawn with nothing in it", name)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", f, err)
		}
		if img.Bounds().Dx() < 300 || img.Bounds().Dy() < 200 {
			t.Fatalf("%s: %v is too small", f, img.Bounds())
		}
	}
}

func TestWriteNothingToDraw(t *testing.T) {
	rs := []bench.Result{{Workload: "prepare", Op: "create-tree", System: "s", Clients: 1}}
	if _, err := plot.Write(rs, t.TempDir()); err == nil {
		t.Fatal("no error for a prepare-only result set")
	}
}
