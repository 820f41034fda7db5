package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestInstanceMeterBillsHTTPOnly: on a platform instance only requests
// that arrived over HTTP (POST /rpc/call) are invocations; requests on a
// TCP connect-back and on a /rpc/conn connection count as active time
// only. A plain server counts every request. The server names itself in
// Nimbus-Instance with its member id and its address.
func TestInstanceMeterBillsHTTPOnly(t *testing.T) {
	for _, instance := range []bool{true, false} {
		name := "plain"
		if instance {
			name = "instance"
		}
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = filepath.Join(t.TempDir(), "data")
			cfg.Listen = "127.0.0.1:0"
			cfg.Store.CacheSize = 8 << 20
			cfg.Store.RowCacheEntries = 1024
			cfg.PlatformInstance = instance
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(ctx)
			u := meta.User{Name: cfg.Namespace.Superuser}

			// The name the server gives itself (task: member id and base URL).
			_, h, err := rpc.Invoke(ctx, nil, s.Addr(), &api.Request{RequestId: 1, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := s.memberID() + " " + s.Addr(); h.Get(rpc.HeaderInstance) != want {
				t.Fatalf("%s = %q, want %q (member id, address)", rpc.HeaderInstance, h.Get(rpc.HeaderInstance), want)
			}

			// More invocations, enough serving time to pass the meter's
			// 1 ms granularity on a platform instance, which bills only
			// these (a fast machine serves two in less).
			const invoked = 500
			for i := range invoked {
				if _, _, err := rpc.Invoke(ctx, nil, s.Addr(), &api.Request{RequestId: uint64(2 + i), Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}, 0, nil); err != nil {
					t.Fatal(err)
				}
			}

			// A hybrid client: one invocation, then the connect-back.
			hc, err := client.Dial(ctx, s.Addr(), client.Options{Hybrid: true, HTTPShare: -1, CallbackWait: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer hc.Close()
			deadline := time.Now().Add(5 * time.Second)
			for hc.HybridStats().TCP < 20 {
				if time.Now().After(deadline) {
					t.Fatalf("no connect-back: %+v", hc.HybridStats())
				}
				if _, err := hc.Stat(ctx, u, "/"); err != nil {
					t.Fatal(err)
				}
			}
			// A pooled client over /rpc/conn.
			pc, err := client.Dial(ctx, s.Addr(), client.Options{Conns: 1, StragglerFactor: -1}) // no straggler copies: each stat one request
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			const pooled = 3000 // enough serving time to pass the meter's 1 ms granularity
			for range pooled {
				if _, err := pc.Stat(ctx, u, "/"); err != nil {
					t.Fatal(err)
				}
			}
			hs := hc.HybridStats()
			us := s.meter.Usage()
			http := hs.HTTP + 1 + invoked // and the echoes
			conn := hs.TCP + pooled
			t.Logf("hybrid %+v; meter %+v", hs, us)
			if us.ConnRequests != conn {
				t.Fatalf("conn requests %d, want %d", us.ConnRequests, conn)
			}
			want := http + conn
			if instance {
				want = http
			}
			if us.Invocations != want {
				t.Fatalf("invocations %d, want %d (HTTP %d, on connections %d; platform instance %v)", us.Invocations, want, http, conn, instance)
			}
			if us.ConnInvocations == instance {
				t.Fatalf("usage says conn_invocations %v on a platform instance %v", us.ConnInvocations, instance)
			}
			if us.ActiveS <= 0 {
				t.Fatalf("no active time: %+v", us)
			}
			// What the platform polls: nothing in flight now, every request
			// on a connection counted.
			cl, err := platform.ReadConnLoad(ctx, nil, s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if cl != (platform.ConnLoad{InFlight: 0, Requests: conn}) {
				t.Fatalf("GET /status/load: %+v, want 0 in flight and %d requests on connections", cl, conn)
			}
		})
	}
}
