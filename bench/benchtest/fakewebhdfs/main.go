// Command fakewebhdfs serves Nimbus's WebHDFS gateway over benchtest.MemFS
// (with a Prometheus /metrics), so that the benchmark driver and
// bench/smoke.sh can be exercised against a webhdfs:// target without a
// server or HDFS:
//
//	go run ./bench/benchtest/fakewebhdfs -listen 127.0.0.1:9999 &
//	TARGET=webhdfs://127.0.0.1:9999 bench/smoke.sh
//
// Its figures measure nothing but the driver and the gateway.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nimbus-fs/nimbus/bench/benchtest"
	gateway "github.com/nimbus-fs/nimbus/webhdfs"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := gateway.DefaultConfig()
	cfg.Registerer = reg
	h, err := gateway.New(benchtest.NewMemFS(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(gateway.PathPrefix+"/", h)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, "http://"+ln.Addr().String())
	log.Fatal(http.Serve(ln, mux))
}
