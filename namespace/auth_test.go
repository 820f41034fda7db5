package namespace

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// wantDetail fails unless err's message holds every one of parts.
func wantDetail(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("error %v does not say %q", err, p)
		}
	}
}

// TestWriterMustBeTheOpener: a user who names another writer's client can
// neither write to its file, nor close it, nor renew its lease; the writer
// goes on undisturbed. Inline and block files alike.
func TestWriterMustBeTheOpener(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/shared", 0o777))
	for _, size := range []int{100, 9000} { // inline (threshold 1000), blocks of 4 KB
		p := "/shared/f" + strings.Repeat("x", size%7)
		_, err := e.Create(ctx, alice, p, meta.CreateOptions{Client: "w", BlockSize: 4096})
		must(t, err)
		data := randomBytes(size, 3)
		must(t, e.Write(ctx, alice, p, "w", 0, data))

		for _, u := range []meta.User{bob, root} { // not even the superuser writes into alice's stream
			err = e.Write(ctx, u, p, "w", int64(size), []byte("evil"))
			wantKind(t, err, meta.ErrPermission)
			wantDetail(t, err, "write", p, "user alice")
			_, err = e.Complete(ctx, u, p, "w")
			wantKind(t, err, meta.ErrPermission)
			wantDetail(t, err, "complete", p)
		}
		before := e.leases.lastRenewed(holderKey("w", "alice"))
		time.Sleep(2 * time.Millisecond)
		must(t, e.RenewLease(ctx, bob, "w")) // renews bob's own (empty) lease set
		if got := e.leases.lastRenewed(holderKey("w", "alice")); !got.Equal(before) {
			t.Fatalf("bob's renewal under alice's client name renewed alice's lease")
		}

		st, err := e.Complete(ctx, alice, p, "w")
		must(t, err)
		if st.Length != int64(size) {
			t.Fatalf("%s: length %d, want %d", p, st.Length, size)
		}
		got, err := e.Read(ctx, alice, p, 0, int64(size)+10)
		must(t, err)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: content changed by another user's writes", p)
		}
	}
	fsckClean(t, e)
}

// TestPermissionOutOfRange: bits above 01777 are refused, not cut to their
// low bits (0x101FF is not 0777).
func TestPermissionOutOfRange(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	const bad = meta.Perm(0x101FF)
	err := e.Mkdirs(ctx, root, "/d", bad)
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "mkdirs", "/d", "out of range")
	_, err = e.Create(ctx, root, "/f", meta.CreateOptions{Client: "c", Perm: bad})
	wantKind(t, err, meta.ErrInvalidArgument)
	for _, p := range []string{"/d", "/f"} {
		_, err := e.Stat(ctx, root, p)
		wantKind(t, err, meta.ErrNotFound)
	}
	writeFile(t, e, root, "/g", []byte("x"))
	wantKind(t, e.SetPermission(ctx, root, "/g", bad), meta.ErrInvalidArgument)
	st, err := e.Stat(ctx, root, "/g")
	must(t, err)
	if st.Perm != meta.DefaultFile {
		t.Fatalf("permission %o after a refused change, want %o", st.Perm, meta.DefaultFile)
	}
	must(t, e.SetPermission(ctx, root, "/g", 0o1777))
}

// TestEmptyUserRefused: a caller without a name is nobody, whatever the
// operation; NUL bytes in user or client names are refused.
func TestEmptyUserRefused(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	anon := meta.User{}
	wantKind(t, e.Mkdirs(ctx, anon, "/d", 0), meta.ErrPermission)
	_, err := e.Stat(ctx, anon, "/")
	wantKind(t, err, meta.ErrPermission)
	_, err = e.Create(ctx, anon, "/f", meta.CreateOptions{Client: "c"})
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "no user name")
	if err := e.RenewLease(ctx, anon, "c"); !errors.Is(err, meta.ErrPermission) {
		t.Fatalf("renew lease without a user: %v", err)
	}
	wantKind(t, e.Mkdirs(ctx, meta.User{Name: "a\x00b"}, "/d", 0), meta.ErrInvalidArgument)
	_, err = e.Create(ctx, alice, "/tmpf", meta.CreateOptions{Client: "c\x00root"})
	wantKind(t, err, meta.ErrInvalidArgument)
	if e.IsSuperuser(anon) || e.IsSuperuser(alice) || !e.IsSuperuser(root) {
		t.Fatal("IsSuperuser: want root only")
	}
}

// TestMinBlockSize: HDFS's minimum, with its words, and the path.
func TestMinBlockSize(t *testing.T) {
	e, _ := newEngine(t) // default configuration: 1 MB minimum
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/tiny", meta.CreateOptions{Client: "c", BlockSize: 1})
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "/tiny", "less than configured minimum value 1048576")
	_, err = e.Create(ctx, root, "/ok", meta.CreateOptions{Client: "c", BlockSize: 1 << 20})
	must(t, err)
	bad := DefaultConfig()
	bad.MinBlockSize = bad.DefaultBlockSize + 1
	if bad.Validate() == nil {
		t.Fatal("a minimum above the default block size validated")
	}
	bad = DefaultConfig()
	bad.MaxBlocksPerFile = 0
	if bad.Validate() == nil {
		t.Fatal("MaxBlocksPerFile 0 validated")
	}
}

// TestMaxBlocksPerFile: the write that would start one block too many fails
// with the path and the limit; the writer can still close the file with the
// blocks it has.
func TestMaxBlocksPerFile(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	e.cfg.MaxBlocksPerFile = 3
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/many", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	data := randomBytes(3*4096, 5)
	writeChunks(t, e, "/many", "w", 0, data, 1000)
	err = e.Write(ctx, root, "/many", "w", int64(len(data)), []byte("one more"))
	wantKind(t, err, meta.ErrTooLarge)
	wantDetail(t, err, "/many", "maximum number of blocks: 3")
	st, err := e.Complete(ctx, root, "/many", "w")
	must(t, err)
	if st.Length != int64(len(data)) {
		t.Fatalf("length %d, want %d", st.Length, len(data))
	}
	fsckClean(t, e)
}

// TestOverwriteOpenFile: overwriting a file that another client is writing
// fails until its lease's soft limit, whoever asks, and the error says who
// holds it and how long until then; the owner may delete it at once (what a
// retried put does with the copy its killed predecessor left).
func TestOverwriteOpenFile(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o777))
	_, err := e.Create(ctx, alice, "/d/f._COPYING_", meta.CreateOptions{Client: "killed"})
	must(t, err)
	must(t, e.Write(ctx, alice, "/d/f._COPYING_", "killed", 0, []byte("half")))
	for _, u := range []meta.User{alice, bob} {
		_, err = e.Create(ctx, u, "/d/f._COPYING_", meta.CreateOptions{Client: "retry", Overwrite: true})
		wantKind(t, err, meta.ErrLease)
		wantDetail(t, err, "/d/f._COPYING_", "client killed of user alice", "take the file over in ", "soft limit is 1m0s")
	}
	must(t, e.Delete(ctx, alice, "/d/f._COPYING_", false))
	_, err = e.Create(ctx, alice, "/d/f._COPYING_", meta.CreateOptions{Client: "retry"})
	must(t, err)
	err = e.Write(ctx, alice, "/d/f._COPYING_", "killed", 4, []byte("more"))
	wantKind(t, err, meta.ErrLease) // the old writer lost the file
	must(t, e.Write(ctx, alice, "/d/f._COPYING_", "retry", 0, []byte("whole")))
	st, err := e.Complete(ctx, alice, "/d/f._COPYING_", "retry")
	must(t, err)
	if st.Length != 5 {
		t.Fatalf("length %d, want 5", st.Length)
	}
	fsckClean(t, e)
}
