// Command fakeserver serves a metatest.MemFS the way `nimbus serve` lays out
// its port: the Nimbus RPC (rpc.Server: connection upgrade and HTTP calls),
// Nimbus's WebHDFS gateway at /webhdfs/v1 and Prometheus /metrics with the
// process collector. It lets the benchmark driver and bench/smoke.sh run
// against nimbus:// and webhdfs:// targets without a server or HDFS:
//
//	go run ./bench/benchtest/fakeserver -listen 127.0.0.1:9999 &
//	TARGET=nimbus://127.0.0.1:9999 bench/smoke.sh
//	TARGET=webhdfs://127.0.0.1:9999 bench/smoke.sh
//
// Its figures measure the driver and the transports over an in-memory map,
// nothing of Nimbus's engine or store.
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

	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
	gateway "github.com/nimbus-fs/nimbus/webhdfs"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fs := metatest.NewMemFS()
	cfg := gateway.DefaultConfig()
	cfg.Registerer = reg
	h, err := gateway.New(fs, cfg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(gateway.PathPrefix+"/", h)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", rpc.NewServer(fs, rpc.DefaultServerOptions()).Handler())
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, "http://"+ln.Addr().String())
	log.Fatal(http.Serve(ln, mux))
}
