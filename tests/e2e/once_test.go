package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestResubmissionToAnotherServer: two `nimbus serve` processes on one
// PostgreSQL database. A write sent to the first, whose reply the client
// never saw, is sent again with the same client name and request id to the
// second, as a client that fails over does: the second answers what the
// first did, from the record in the database, and applies nothing. With
// --request-ttl 0 (duplicate detection off) the second applies it again
// and fails: that is what this test must catch.
func TestResubmissionToAnotherServer(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("detection=%v", on), func(t *testing.T) {
			db := pgtest.DB(t)
			var extra []string
			if !on {
				extra = []string{"--request-ttl", "0"}
			}
			a := startServer(t, "", "", append([]string{"--store", db}, extra...)...)
			b := startServer(t, "", "", append([]string{"--store", db}, extra...)...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn := func(s *server) *rpc.Conn {
				c, err := rpc.Dial(ctx, s.addr, rpc.ConnOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			ca, cb := conn(a), conn(b)
			const client = "nimbus-00000000e2e0e2e0"
			id := uint64(7) << 40
			// call sends body with the next id to a, then the same request
			// to b, and returns both answers.
			call := func(body *api.Request) (ra, rb *api.Response) {
				t.Helper()
				id++
				body.RequestId, body.ClientName, body.User = id, client, "root"
				var err error
				if ra, err = ca.Call(ctx, body); err != nil {
					t.Fatal(err)
				}
				if e := ra.GetError(); e != nil {
					t.Fatalf("first submission: %v", rpc.ErrorFromProto(e))
				}
				body.Resubmitted = true
				if rb, err = cb.Call(ctx, body); err != nil {
					t.Fatal(err)
				}
				return ra, rb
			}
			ra, rb := call(&api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{Path: "/f", Client: client, CreateParent: true}}})
			if !on {
				if k := meta.Kind(rb.GetError().GetKind()); k != meta.KindExists {
					t.Fatalf("without detection the resubmitted create answered %v, want exists", rb.GetError())
				}
				return
			}
			if e := rb.GetError(); e != nil {
				t.Fatalf("resubmitted create: %v, want the first answer", rpc.ErrorFromProto(e))
			}
			if fa, fb := ra.GetStatus().GetFileId(), rb.GetStatus().GetFileId(); fa == 0 || fa != fb {
				t.Fatalf("the servers answered file ids %d and %d", fa, fb)
			}
			if _, rb = call(&api.Request{Body: &api.Request_Complete{Complete: &api.CompleteRequest{Path: "/f", Client: client}}}); rb.GetError() != nil {
				t.Fatalf("resubmitted complete: %v", rpc.ErrorFromProto(rb.GetError()))
			}
			if _, rb = call(&api.Request{Body: &api.Request_Rename{Rename: &api.RenameRequest{Src: "/f", Dst: "/g"}}}); rb.GetError() != nil {
				t.Fatalf("resubmitted rename: %v", rpc.ErrorFromProto(rb.GetError()))
			}
			a.ok("fs", "mkdir", "-p", "/d/e/f", "/d/x")
			if _, rb = call(&api.Request{Body: &api.Request_Delete{Delete: &api.DeleteRequest{Path: "/d", Recursive: true}}}); rb.GetError() != nil {
				t.Fatalf("resubmitted recursive delete: %v", rpc.ErrorFromProto(rb.GetError()))
			}
			if got := b.ok("fs", "ls", "/"); got == "" {
				t.Fatal("ls / is empty: /g is gone")
			}
			b.ok("fs", "test", "-f", "/g")
			if r := b.nimbus("", "fs", "test", "-e", "/d"); r.code != 1 {
				t.Fatalf("/d survived its delete: %+v", r)
			}
			b.ok("fsck")
		})
	}
}
