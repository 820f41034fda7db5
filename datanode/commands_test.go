package datanode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/store"
)

func readAll(t *testing.T, bs blocks.Store, id blocks.ID) []byte {
	t.Helper()
	rc, err := bs.Read(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The commands: signed or refused, block recovery in two steps (stale
// recoveries refused, the finish repeatable), replicate and delete, with
// the rows following.
func TestCommands(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg1 := testConfig(t.TempDir())
	cfg1.ReplicationBandwidth = 1 << 20
	d1 := start(t, cfg1, st)
	d2 := start(t, testConfig(t.TempDir()), st)
	key, err := clusterauth.Load(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &command.Client{Key: key}

	// Unsigned, or signed with another secret: refused.
	resp, err := http.Post("http://"+d1.HTTPAddr()+command.PathDelete, "application/json", strings.NewReader(`{"blocks":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned command: HTTP %d, want 403", resp.StatusCode)
	}
	other, _ := clusterauth.New(bytes.Repeat([]byte{7}, clusterauth.SecretSize), nil)
	if err := (&command.Client{Key: other}).Delete(ctx, d1.HTTPAddr(), nil); !errors.Is(err, command.ErrRefused) {
		t.Fatalf("command under another secret: %v, want ErrRefused", err)
	}

	// A replica the DataNode lacks.
	if _, err := c.InitRecovery(ctx, d1.HTTPAddr(), blocks.ID{Block: 999, GenStamp: 1}, 2); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("recovery of a missing replica: %v, want ErrNotFound", err)
	}

	// A replica being written, its writer gone: recovered to 700 bytes.
	id := blocks.ID{Block: 50, GenStamp: 4}
	data := bytes.Repeat([]byte("0123456789"), 100)
	w, err := d1.Blocks().Create(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	info, err := c.InitRecovery(ctx, d1.HTTPAddr(), id, 10)
	if err != nil {
		t.Fatal(err)
	}
	if info != (command.ReplicaInfo{GenStamp: 4, Length: 1000, State: store.ReplicaBeingWritten}) {
		t.Fatalf("InitRecovery: %+v", info)
	}
	if _, err := c.InitRecovery(ctx, d1.HTTPAddr(), id, 9); !errors.Is(err, command.ErrStaleRecovery) {
		t.Fatalf("an older recovery: %v, want ErrStaleRecovery", err)
	}
	if err := c.FinishRecovery(ctx, d1.HTTPAddr(), id, 10, 700); err != nil {
		t.Fatal(err)
	}
	if err := c.FinishRecovery(ctx, d1.HTTPAddr(), id, 10, 700); err != nil {
		t.Fatalf("FinishRecovery repeated: %v", err)
	}
	rid := blocks.ID{Block: 50, GenStamp: 10}
	if got := readAll(t, d1.Blocks(), rid); !bytes.Equal(got, data[:700]) {
		t.Fatalf("recovered replica: %d bytes, want the first 700", len(got))
	}
	eventually(t, "the recovered replica's row", func() (bool, string) {
		r := rowsOf(t, reg, d1.ID())[50]
		return r.GenStamp == 10 && r.Length == 700 && r.State == store.ReplicaFinalized, r.State.String()
	})
	if err := c.FinishRecovery(ctx, d1.HTTPAddr(), rid, 11, 800); err == nil {
		t.Fatal("a recovery to more bytes than the replica has succeeded")
	}

	// Replicate to d2, then delete there.
	tg := dataxfer.Target{Addr: d2.DataAddr(), UUID: d2.UUID()}
	if err := c.Replicate(ctx, d1.HTTPAddr(), blocks.ID{Block: 51, GenStamp: 1}, []dataxfer.Target{tg}); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("replicate of a missing replica: %v, want ErrNotFound", err)
	}
	if err := c.Replicate(ctx, d1.HTTPAddr(), rid, []dataxfer.Target{tg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy's row", func() (bool, string) {
		r := rowsOf(t, reg, d2.ID())[50]
		return r.GenStamp == 10 && r.Length == 700 && r.State == store.ReplicaFinalized, r.State.String()
	})
	if got := readAll(t, d2.Blocks(), rid); !bytes.Equal(got, data[:700]) {
		t.Fatalf("copied replica: %d bytes differ", len(got))
	}
	if err := c.Delete(ctx, d2.HTTPAddr(), []blocks.ID{rid, {Block: 12345, GenStamp: 1}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted replica's row gone", func() (bool, string) {
		_, ok := rowsOf(t, reg, d2.ID())[50]
		return !ok, ""
	})
	if _, err := d2.Blocks().Stat(ctx, rid); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("deleted replica: %v", err)
	}
}
