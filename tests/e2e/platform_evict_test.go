package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/etcdcoord"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestPlatformEvictsKilledInstance: with the default 10 s coordinator
// TTL, the gateway (two deployments, one instance each; process hosting,
// and in process) evicts the member of an instance it saw exit after a
// kill (POST /platform/kill: SIGKILL, or the in-process equivalent), so the
// member leaves the membership at once instead of at its lease's expiry
// (7.5-10 s after the kill: the lease runs TTL from its last renewal,
// renewed every TTL/4), and the writes of the others, which would wait
// for the dead instance's acknowledgement until then, go on.
//
// It asserts that the member left less than TTL/2 after the kill (an
// expiry cannot be that early; an eviction takes milliseconds) and logs
// the writes' stall: the longest wait of one write through each deployment
// after the kill, and the writes done in the first TTL.
//
// NIMBUS_E2E_EVICT_BINARY runs the same test against another nimbus
// binary (one built before eviction, for the "before" figures): it then
// only logs.
func TestPlatformEvictsKilledInstance(t *testing.T) {
	for _, hosting := range []string{"process", "inprocess"} {
		t.Run(hosting, func(t *testing.T) { evictKilled(t, hosting) })
	}
}

func evictKilled(t *testing.T, hosting string) {
	const ttl = 10 * time.Second
	bin, compare := binary, os.Getenv("NIMBUS_E2E_EVICT_BINARY")
	if compare != "" {
		bin = compare
	}
	coordURL := fmt.Sprintf("etcd://%s/e2e-evict-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	gw := testproc.Start(t, bin, "", "", platformArgs(t, "--coordinator", coordURL, "--coordinator-ttl", ttl.String(),
		"--platform", "local", "--hosting", hosting, "--deployments", "2", "--min-instances", "1", "--keep-alive", "60s", "--fault-injection")...)
	base := gw.URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ec, err := etcdcoord.ParseURL(coordURL)
	if err != nil {
		t.Fatal(err)
	}
	coord, err := etcdcoord.New(ctx, ec)
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	var victim coordinator.Member
	waitFor(ctx, t, "a member of each deployment", func() bool {
		v, err := coord.Members(ctx, coordinator.All)
		if err != nil || len(v.Members) != 2 || v.Members[0].Deployment != 0 || v.Members[1].Deployment != 1 {
			return false
		}
		victim = v.Members[1]
		return true
	})

	// Fill both instances' caches with the directory the writes go to.
	mustCall(t, base, 0, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/ev", Perm: 0o755}}})
	create := func(ctx context.Context, dep int, name string) error {
		resp, _, err := gatewayCall(ctx, base, dep, rootReq(&api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
			Path: "/ev/" + name, Client: "e2e", Perm: 0o644, Complete: true}}}))
		if err == nil && resp.GetError() != nil {
			err = rpc.ErrorFromProto(resp.GetError())
		}
		return err
	}
	for i := range 4 {
		for dep := range 2 {
			if err := create(ctx, dep, fmt.Sprintf("warm-%d-%d", dep, i)); err != nil {
				t.Fatalf("deployment %d: %v", dep, err)
			}
			mustCall(t, base, dep, &api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: "/ev"}}})
		}
	}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := coord.Watch(wctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Kind == coordinator.Left && ev.Member.ID == victim.ID {
				left <- time.Now()
				return
			}
		}
	}()

	killed := time.Now()
	resp, err := http.Post(base+"/platform/kill?deployment=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /platform/kill: %d %s", resp.StatusCode, body)
	}
	// One sequential writer per deployment, for a little more than a TTL.
	type stats struct {
		ok, failed int
		inTTL      int
		longest    time.Duration // the longest one write took
		firstOK    time.Duration // after the kill
	}
	var (
		mu  sync.Mutex
		st  [2]stats
		wg  sync.WaitGroup
		end = killed.Add(ttl + 2*time.Second)
	)
	for dep := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				begun := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := create(cctx, dep, fmt.Sprintf("w-%d-%d", dep, i))
				cancel()
				took := time.Since(begun)
				mu.Lock()
				s := &st[dep]
				s.longest = max(s.longest, took)
				if err != nil {
					s.failed++
				} else {
					if s.ok == 0 {
						s.firstOK = time.Since(killed)
					}
					s.ok++
					if time.Since(killed) < ttl {
						s.inTTL++
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	var leftAfter time.Duration = -1
	select {
	case at := <-left:
		leftAfter = at.Sub(killed)
	case <-time.After(2 * ttl):
	}
	wg.Wait()
	for dep := range 2 {
		s := st[dep]
		t.Logf("deployment %d after the kill: first write done after %v, the longest write %v; %d writes done in the first %v, %d in all, %d failed",
			dep, s.firstOK.Round(time.Millisecond), s.longest.Round(time.Millisecond), s.inTTL, ttl, s.ok, s.failed)
	}
	t.Logf("%s hosting: the killed instance's member %s left the membership %v after the kill (TTL %v; binary %s)", hosting, victim.ID, leftAfter.Round(time.Millisecond), ttl, bin)
	if compare != "" {
		return
	}
	if leftAfter < 0 || leftAfter >= ttl/2 {
		t.Fatalf("the killed instance's member left %v after the kill: not evicted (TTL %v)\n%s", leftAfter, ttl, gw.Log.String())
	}
	if st[0].ok == 0 || st[1].ok == 0 {
		t.Fatalf("writes after the kill: %+v", st)
	}
}
