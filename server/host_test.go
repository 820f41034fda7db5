package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestInProcessHost: the local platform over in-process servers on
// PostgreSQL and etcd: each deployment's invocations reach an instance of
// it, a write through one is seen through the other, a killed instance is
// replaced, Close stops them all. The embedded store is refused.
func TestInProcessHost(t *testing.T) {
	if err := CheckInProcess(testConfig(t)); err == nil {
		t.Fatal("in-process hosting on the embedded store was not refused")
	}
	base := testConfig(t)
	base.StoreURL = pgtest.DB(t)
	base.Coordinator = fmt.Sprintf("etcd://%s/inproc-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	base.CacheBytes = 1 << 20
	base.Namespace.Superuser = "root"
	h := &InProcessHost{Base: base, DataDir: t.TempDir()}
	cfg := platform.Config{Deployments: 2, Concurrency: 2, MaxInstances: 4, MaxPerDeployment: 2, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 10}
	l, err := platform.NewLocal(cfg, h, platform.LocalOptions{Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	call := func(dep int, req *api.Request) (*api.Response, platform.InstanceID) {
		t.Helper()
		le, err := l.Invoke(ctx, dep)
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release()
		req.User, req.RequestId = "root", uint64(time.Now().UnixNano())
		resp, err := rpc.CallHTTP(ctx, nil, le.Addr(), req, 0)
		if err != nil || resp.GetError() != nil {
			t.Fatalf("deployment %d: %v %v", dep, err, resp.GetError())
		}
		return resp, le.ID()
	}
	_, i0 := call(0, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/x/y", Perm: 0o755}}})
	_, i1 := call(1, &api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/x/y"}}})
	if i0 == i1 {
		t.Fatalf("both deployments on instance %d", i0)
	}
	var killed platform.Instance
	for _, st := range l.Instances() {
		if st.ID == i0 {
			le, err := l.Invoke(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			killed = le.Instance()
			le.Release()
		}
	}
	killedAt := time.Now()
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.Done()
	t.Logf("killed instance done after %v", time.Since(killedAt))
	// Until the platform has seen the instance go, an invocation may still
	// be given to it, and fail: the gateway would answer 502.
	for {
		le, err := l.Invoke(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rpc.CallHTTP(ctx, nil, le.Addr(), &api.Request{User: "root", RequestId: 1, Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/x"}}}, 0)
		le.Release()
		if le.ID() != i0 {
			if err != nil || resp.GetError() != nil {
				t.Fatalf("the replacement: %v %v", err, resp.GetError())
			}
			break
		}
		if err == nil {
			t.Fatalf("the killed instance %d answered", i0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("replaced, answering %v after the kill", time.Since(killedAt))
	for _, st := range l.Instances() {
		t.Logf("instance %d of deployment %d: in-process cold start %v", st.ID, st.Deployment, st.ColdStart)
	}
	closing := time.Now()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %v", time.Since(closing))
	if n := len(l.Instances()); n != 0 {
		t.Fatalf("%d instances after Close", n)
	}
}

// TestClusterStatusPlain: a plain server's /status/cluster lists itself as
// the one instance of deployment 0.
func TestClusterStatusPlain(t *testing.T) {
	s, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	resp, err := http.Get(s.Addr() + "/status/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cs platform.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil {
		t.Fatal(err)
	}
	if len(cs.Deployments) != 1 || len(cs.Deployments[0].Instances) != 1 || cs.Totals.Instances != 1 {
		t.Fatalf("%+v", cs)
	}
	in := cs.Deployments[0].Instances[0]
	if in.Address != s.Addr() || in.State != platform.StateServing || in.AgeSeconds == nil || in.Inflight == nil || in.ID != s.Member().Member().ID {
		t.Fatalf("%+v", in)
	}
}
