package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestParseReady(t *testing.T) {
	for _, tc := range []struct {
		line, addr, member string
		ok                 bool
	}{
		{line: "nimbus namenode ready http://127.0.0.1:9\n", addr: "http://127.0.0.1:9", ok: true}, // as earlier binaries print it
		{line: ReadyLine("http://127.0.0.1:9", "00000000000000ab") + "\n", addr: "http://127.0.0.1:9", member: "00000000000000ab", ok: true},
		{line: ReadyLine("http://h:1", ""), addr: "http://h:1", ok: true},
		{line: "nimbus namenode ready http://h:1 later=x member=m1", addr: "http://h:1", member: "m1", ok: true},
		{line: "  nimbus namenode ready   http://h:1   member=m1  ", addr: "http://h:1", member: "m1", ok: true},
		{line: "some log line", ok: false},
	} {
		addr, member, ok := ParseReady(tc.line)
		if addr != tc.addr || member != tc.member || ok != tc.ok {
			t.Errorf("ParseReady(%q) = %q %q %v, want %q %q %v", tc.line, addr, member, ok, tc.addr, tc.member, tc.ok)
		}
	}
}

// memberHost gives fakeHost's instances a member ID.
type memberHost struct{ *fakeHost }

type memberInstance struct {
	Instance
	id string
}

func (m memberInstance) MemberID() string { return m.id }

func (h memberHost) Start(ctx context.Context, spec Spec) (Instance, error) {
	in, err := h.fakeHost.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return memberInstance{in, fmt.Sprintf("member-%d", spec.ID)}, nil
}

// TestLocalExited: LocalOptions.Exited is called, after its Done, with an
// instance that exited without being stopped (and its member ID), and not
// with one the policy reclaimed or Close stopped.
func TestLocalExited(t *testing.T) {
	h := &fakeHost{delay: 2 * time.Millisecond}
	cfg := Config{Deployments: 1, Concurrency: 4, MaxInstances: 2, MaxPerDeployment: 2, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 10}
	var (
		mu     sync.Mutex
		exited []string
	)
	l, err := NewLocal(cfg, memberHost{h}, LocalOptions{Tick: 5 * time.Millisecond, StartBackoff: 5 * time.Millisecond,
		Exited: func(in Instance) {
			select {
			case <-in.Done():
			default:
				t.Errorf("Exited called before %s's Done", in.Addr())
			}
			mu.Lock()
			exited = append(exited, MemberID(in))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	le, err := l.Invoke(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	first := le.ID()
	if got, want := MemberID(le.Instance()), fmt.Sprintf("member-%d", first); got != want {
		t.Fatalf("MemberID = %q, want %q", got, want)
	}
	_ = h.instance(first).Kill()
	le.Release()
	waitFor(t, "the Exited call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(exited) == 1
	})
	waitFor(t, "a replacement", func() bool { return count(l, 0, StateServing) == 1 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := fmt.Sprintf("member-%d", first); len(exited) != 1 || exited[0] != want {
		t.Fatalf("Exited with %v, want [%s] (the stopped replacement is not reported)", exited, want)
	}
}

// TestLocalExitedAfterFailedStop: an instance reclaimed whose stop failed
// once it was gone (a process killed when its graceful stop timed out) is
// reported to Exited, so that its member is evicted rather than left to
// its lease.
func TestLocalExitedAfterFailedStop(t *testing.T) {
	h := &fakeHost{delay: 2 * time.Millisecond, stopErr: errors.New("killed after the stop timed out")}
	cfg := Config{Deployments: 1, Concurrency: 4, MaxInstances: 1, MaxPerDeployment: 1, KeepAlive: 20 * time.Millisecond, MaxQueue: 10}
	var (
		mu     sync.Mutex
		exited []string
	)
	l, err := NewLocal(cfg, memberHost{h}, LocalOptions{Tick: 5 * time.Millisecond, StartBackoff: 5 * time.Millisecond,
		Exited: func(in Instance) {
			mu.Lock()
			exited = append(exited, MemberID(in))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	le, err := l.Invoke(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("member-%d", le.ID())
	le.Release()
	waitFor(t, "the reclaim's Exited call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(exited) == 1 && exited[0] == want
	})
}
