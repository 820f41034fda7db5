package etcdtest

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestShared(t *testing.T) {
	eps := Endpoints(t)
	if len(eps) != 1 || !healthy(eps[0]) {
		t.Fatalf("shared server %v not healthy", eps)
	}
	if again := Endpoints(t); again[0] != eps[0] {
		t.Fatalf("second call started another server: %v, then %v", eps, again)
	}
}

// A 3-member cluster elects a new leader when its leader is killed, and
// the killed member rejoins on restart.
func TestClusterKillRestart(t *testing.T) {
	c := NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	leader := c.Leader(ctx)
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Kill(leader)
	next := c.Leader(ctx)
	if next < 0 || next == leader {
		t.Fatalf("leader after killing %d: %d", leader, next)
	}
	c.Restart(leader)
	for i, ep := range c.Endpoints() {
		if !healthy(ep) {
			t.Errorf("member %d (%s) not healthy after the restart", i, ep)
		}
	}
}
