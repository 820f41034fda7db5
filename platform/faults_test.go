package platform

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayKill: POST /platform/kill is refused with fault injection
// off; on, it kills the deployment's serving instance, which the platform
// sees crash and replaces (its minimum), and the next call is served by
// the replacement.
func TestGatewayKill(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	cfg := Config{Deployments: 2, Concurrency: 2, MaxInstances: 4, MaxPerDeployment: 2, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 8}
	l, reg := newTestLocal(t, cfg, h)
	defer func() {
		for _, s := range h.servers {
			s.Close()
		}
	}()
	off, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gwOff := httptest.NewServer(off)
	defer gwOff.Close()
	if resp, body := post(t, gwOff.URL+"/platform/kill?deployment=0", "", nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "--fault-injection") {
		t.Fatalf("kill with fault injection off: %d %q, want 403", resp.StatusCode, body)
	}

	on, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second, FaultInjection: true, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(on)
	defer gw.Close()
	for _, bad := range []string{"", "2", "-1", "x"} {
		if resp, _ := post(t, gw.URL+"/platform/kill?deployment="+bad, "", nil); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("kill deployment %q: %d, want 400", bad, resp.StatusCode)
		}
	}
	resp, _ := post(t, gw.URL+"/rpc/call", "x", map[string]string{HeaderDeployment: "1"})
	before := resp.Header.Get(HeaderInstance)
	if resp.StatusCode != 200 || before == "" {
		t.Fatalf("call: %d %q", resp.StatusCode, before)
	}
	resp, body := post(t, gw.URL+"/platform/kill?deployment=1", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("kill: %d %q", resp.StatusCode, body)
	}
	var k Killed
	if err := json.Unmarshal([]byte(body), &k); err != nil {
		t.Fatal(err)
	}
	if k.Deployment != 1 || !k.Exited || before != instanceHeaderOf(k) {
		t.Fatalf("killed %+v, the call was answered by %q", k, before)
	}
	// The replacement serves deployment 1.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ = post(t, gw.URL+"/rpc/call", "x", map[string]string{HeaderDeployment: "1"})
		if resp.StatusCode == 200 && resp.Header.Get(HeaderInstance) != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the kill: %d from %q", resp.StatusCode, resp.Header.Get(HeaderInstance))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A deployment with nothing serving: 409.
	l2, _ := newTestLocal(t, Config{Deployments: 1, Concurrency: 1, MaxInstances: 1, MaxPerDeployment: 1, KeepAlive: time.Hour, MaxQueue: 1}, h)
	g2, _ := NewGateway(l2, GatewayOptions{FaultInjection: true})
	gw2 := httptest.NewServer(g2)
	defer gw2.Close()
	if resp, body := post(t, gw2.URL+"/platform/kill?deployment=0", "", nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("kill with no instance: %d %q, want 409", resp.StatusCode, body)
	}
}

func instanceHeaderOf(k Killed) string {
	return strconv.FormatUint(uint64(k.Instance), 10) + " " + k.Address
}
