package server

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
)

type deadInstance struct{ member string }

func (d deadInstance) Addr() string               { return "http://dead" }
func (d deadInstance) Stop(context.Context) error { return nil }
func (d deadInstance) Kill() error                { return nil }
func (d deadInstance) Done() <-chan struct{}      { ch := make(chan struct{}); close(ch); return ch }
func (d deadInstance) MemberID() string           { return d.member }

// TestEvictExited: the member of a dead instance and its later
// incarnations (ID.N) are evicted; another member whose ID merely shares a
// prefix stays, and an instance without a member ID evicts nothing.
func TestEvictExited(t *testing.T) {
	c, err := memcoord.New(memcoord.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, id := range []string{"00000000000000ab", "00000000000000ab.2", "00000000000000abc", "00000000000000cd"} {
		if _, err := c.Join(ctx, coordinator.Member{ID: id, Addr: "http://x"}); err != nil {
			t.Fatal(err)
		}
	}
	evict := EvictExited(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	evict(deadInstance{})
	evict(deadInstance{member: "00000000000000ab"})
	v, err := c.Members(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range v.Members {
		ids = append(ids, m.ID)
	}
	if want := []string{"00000000000000abc", "00000000000000cd"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("members %v, want %v", ids, want)
	}
}
