package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestLostReplyExactlyOnce: the server executes a write and its reply is
// lost with the connection; the client resubmits the request, with its id,
// on a new connection, and the server answers from its record of the
// first: a create without overwrite answers success (not "exists"), a
// rename success (not "not found"), a delete success. With the server's
// duplicate detection switched off the same resubmissions are applied
// again and fail, which is what this test must catch.
func TestLostReplyExactlyOnce(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("detection=%v", on), func(t *testing.T) {
			e := engineWith(t, func(c *namespace.Config) {
				if !on {
					c.RequestTTL = 0
				}
			})
			p := newProxy(t, serve(t, e, nil))
			c := dial(t, p.addr(), client.Options{Conns: 1})
			ctx := context.Background()
			lost := func(what string, f func() error, again error) {
				t.Helper()
				p.dropReply.Store(true)
				err := f()
				if p.dropReply.Load() {
					t.Fatalf("%s: no reply was dropped", what)
				}
				if on && err != nil {
					t.Fatalf("%s resubmitted after a lost reply: %v, want the first answer", what, err)
				}
				if !on && !errors.Is(err, again) {
					t.Fatalf("%s resubmitted without detection: %v, want %v", what, err, again)
				}
			}
			var st *meta.FileStatus
			lost("create", func() (err error) {
				st, err = c.Create(ctx, root, "/f", meta.CreateOptions{Client: c.ClientName()})
				return err
			}, meta.ErrExists)
			if !on {
				return
			}
			if got, err := e.Stat(ctx, root, "/f"); err != nil || got.FileID != st.FileID {
				t.Fatalf("stat after create: %+v, %v; the create answered id %d", got, err, st.FileID)
			}
			lost("complete", func() error { _, err := c.Complete(ctx, root, "/f", c.ClientName()); return err }, meta.ErrLease)
			lost("rename", func() error { return c.Rename(ctx, root, "/f", "/g", meta.RenameOptions{}) }, meta.ErrNotFound)
			lost("mkdirs", func() error { return c.Mkdirs(ctx, root, "/d/e", 0) }, nil)
			lost("delete", func() error { return c.Delete(ctx, root, "/d", true) }, meta.ErrNotFound)
			if _, err := e.Stat(ctx, root, "/g"); err != nil {
				t.Fatal(err)
			}
			rep, err := e.Fsck(ctx)
			if err != nil || !rep.Clean() {
				t.Fatalf("fsck: %v %v", err, rep)
			}
		})
	}
}
