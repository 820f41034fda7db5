package netzone

import (
	"net/http"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// TestServeInZone runs the real nimbus binary in zone b, as the e2e tests
// of DataNodes and NameNodes do, reaches it from the host, cuts the zone
// off and heals it, and kills it with the zone.
func TestServeInZone(t *testing.T) {
	nt := New(t, Config{Zones: 2, Delay: time.Millisecond})
	binary, cleanup, err := testproc.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	b := nt.Zone("b")
	s := b.Serve(t, binary, "", 9870)
	if s.Addr != b.Addr(9870) {
		t.Fatalf("server address %s, want the zone's %s", s.Addr, b.Addr(9870))
	}
	if code, _ := testproc.Get(t, s.URL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz from the host: %d", code)
	}

	b.Cut()
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get(s.URL() + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatalf("/readyz answered %s across the cut", resp.Status)
	}
	b.Heal()
	if err := s.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("/readyz after the heal: %v", err)
	}

	if err := b.KillAll(); err != nil {
		t.Fatal(err)
	}
	if err := s.Cmd.Wait(); err == nil {
		t.Fatal("nimbus serve exited cleanly after KillAll, want killed")
	}
}
