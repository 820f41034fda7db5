package rpc

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// The table dials an endpoint once while it is live, not again within
// refusedFor of a refusal, again after it, and again at once after its
// connection ended; refusals past maxRefused push out the oldest; the live
// bound holds.
func TestCallbackTable(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tb := newCallbackTable()
	if !tb.begin("a", "h", t0) || tb.begin("a", "h", t0) {
		t.Fatal("a live endpoint dialled twice, or a new one not at all")
	}
	tb.failed("a", t0)
	if tb.begin("a", "h", t0.Add(refusedFor-time.Nanosecond)) {
		t.Fatal("dialled again within refusedFor of a refusal")
	}
	if !tb.begin("a", "h", t0.Add(refusedFor)) {
		t.Fatal("not dialled again after refusedFor")
	}
	tb.ended("a")
	if !tb.begin("a", "h", t0.Add(refusedFor)) {
		t.Fatal("not dialled again after its connection ended")
	}
	tb.ended("a")

	// A flood of refusals: the table keeps maxRefused of them, the newest.
	for i := range maxRefused + 10 {
		k := fmt.Sprint("flood", i)
		if !tb.begin(k, "h", t0) {
			t.Fatalf("flood endpoint %d not dialled", i)
		}
		tb.failed(k, t0)
	}
	if live, refused := tb.sizes(); live != 0 || refused != maxRefused {
		t.Fatalf("after the flood: %d live, %d refusals; want 0 and %d", live, refused, maxRefused)
	}
	if !tb.begin("flood0", "h", t0) {
		t.Fatal("the oldest refusal was not forgotten")
	}
	tb.ended("flood0")
	if tb.begin(fmt.Sprint("flood", maxRefused+9), "h", t0) {
		t.Fatal("the newest refusal was forgotten")
	}
	// Expired refusals are forgotten as new ones come.
	tb.failed("late", t0.Add(refusedFor))
	if live, refused := tb.sizes(); live != 0 || refused != 1 {
		t.Fatalf("after a refusal refusedFor later: %d live, %d refusals; want 0 and 1", live, refused)
	}

	// Dials in progress per host: bounded, a connected one no longer
	// counts, other hosts are dialled meanwhile.
	for i := range maxDialsPerHost {
		if !tb.begin(fmt.Sprint("slow", i), "slow", t0) {
			t.Fatalf("dial %d to a host not started", i)
		}
	}
	if tb.begin("slow more", "slow", t0) {
		t.Fatal("dialled a host past maxDialsPerHost dials in progress")
	}
	if !tb.begin("fast", "fast", t0) {
		t.Fatal("another host not dialled while one has its dials in progress")
	}
	tb.connected("slow0")
	if !tb.begin("slow more", "slow", t0) {
		t.Fatal("not dialled once a dial to the host connected")
	}
	tb.failed("slow1", t0)
	tb.ended("slow0")
	if !tb.begin("slow again", "slow", t0) {
		t.Fatal("not dialled once a dial to the host failed")
	}
	for i := range maxDialsPerHost {
		tb.ended(fmt.Sprint("slow", i))
	}
	for _, k := range []string{"slow more", "slow again", "fast"} {
		tb.ended(k)
	}
	if live, _ := tb.sizes(); live != 0 || len(tb.dialing) != 0 {
		t.Fatalf("after every end: %d live, dials in progress %v", live, tb.dialing)
	}

	// The live bound, over many hosts.
	for i := range maxCallbacks {
		if !tb.begin(fmt.Sprint("live", i), fmt.Sprint("host", i%100), t0) {
			t.Fatalf("live endpoint %d not dialled", i)
		}
		tb.connected(fmt.Sprint("live", i))
	}
	if tb.begin("one more", "h", t0) {
		t.Fatal("dialled past maxCallbacks live endpoints")
	}
	tb.ended("live0")
	if !tb.begin("one more", "h", t0) {
		t.Fatal("not dialled once a live endpoint ended")
	}
}

// The endpoint dialled keeps the claimed port and takes the host the
// invocation came from, unless it came over loopback to a server that
// trusts loopback (a platform instance); a malformed claim is not dialled.
func TestCallbackTarget(t *testing.T) {
	for _, c := range []struct {
		claimed, remote, want string
	}{
		{"127.0.0.1:4000", "127.0.0.1:5555", "127.0.0.1:4000"},
		{"10.0.0.9:5432", "127.0.0.1:5555", "10.0.0.9:5432"}, // the gateway's pinned address
		{"10.0.0.9:5432", "[::1]:5555", "10.0.0.9:5432"},
		{"10.0.0.9:5432", "192.0.2.7:5555", "192.0.2.7:5432"}, // another host than its own: pinned
		{"[::]:4000", "192.0.2.7:5555", "192.0.2.7:4000"},
		{"127.0.0.1:4000", "[2001:db8::1]:5555", "[2001:db8::1]:4000"},
		{"127.0.0.1:4000", "[::ffff:127.0.0.1]:5555", "127.0.0.1:4000"},
		{"host:0", "192.0.2.7:5555", ""},
		{"host:65536", "192.0.2.7:5555", ""},
		{"host:http", "192.0.2.7:5555", ""},
		{"no-port", "192.0.2.7:5555", ""},
		{"127.0.0.1:4000", "garbage", ""},
		{"127.0.0.1:4000", ":5555", ""},
	} {
		got, ok := callbackTarget(c.claimed, c.remote, true)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("callbackTarget(%q, %q, trusting loopback) = %q %v, want %q", c.claimed, c.remote, got, ok, c.want)
		}
		// Not trusting loopback: always the peer's host.
		want, err := PinCallback(c.claimed, c.remote)
		if err != nil {
			want = ""
		}
		if got, ok := callbackTarget(c.claimed, c.remote, false); ok != (want != "") || got != want {
			t.Errorf("callbackTarget(%q, %q) = %q %v, want %q", c.claimed, c.remote, got, ok, want)
		}
	}
	if got, _ := callbackTarget("10.0.0.9:5432", "127.0.0.1:5555", false); got != "127.0.0.1:5432" {
		t.Errorf("a plain server dials %q for a loopback client naming 10.0.0.9:5432", got)
	}
}

// FuzzPinCallback: whatever a client claims, the endpoint is on the host
// it connected from, with a port of 1 to 65535, or there is none.
func FuzzPinCallback(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4000", "[::1]:1", "evil.example:5432", "a:b:c", ":0", "[::]:65535", "x:99999"} {
		f.Add(s, "192.0.2.7:5555")
		f.Add(s, "[2001:db8::1]:80")
	}
	f.Fuzz(func(t *testing.T, claimed, remote string) {
		got, err := PinCallback(claimed, remote)
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(got)
		if err != nil {
			t.Fatalf("PinCallback(%q, %q) = %q: %v", claimed, remote, got, err)
		}
		rhost, _, _ := net.SplitHostPort(remote)
		if host == "" || host != rhost || port == "0" || strings.ContainsAny(port, " \n") {
			t.Fatalf("PinCallback(%q, %q) = %q: not on %q", claimed, remote, got, rhost)
		}
	})
}
