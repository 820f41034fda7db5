package namespace

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// walkTree calls fn on dir and every inode below it, as the superuser sees
// them.
func walkTree(t *testing.T, e *Engine, dir string, fn func(path string, st *meta.FileStatus)) {
	t.Helper()
	ctx := context.Background()
	st, err := e.Stat(ctx, root, dir)
	must(t, err)
	fn(dir, st)
	if st.Type != meta.TypeDir {
		return
	}
	after := ""
	for {
		l, err := e.List(ctx, root, dir, after, 1000)
		must(t, err)
		for i := range l.Entries {
			c := &l.Entries[i]
			p := meta.JoinPath(dir, c.Name())
			if c.Type == meta.TypeDir {
				walkTree(t, e, p, fn)
			} else {
				fn(p, c)
			}
			after = c.Name()
		}
		if l.Remaining == 0 {
			return
		}
	}
}

// quickTree is buildTree's shape (dirs directories two levels below top,
// each with files files and an empty directory) made faster: one-step
// files, created by a few goroutines at once.
func quickTree(t *testing.T, e *Engine, top string, dirs, files int) {
	t.Helper()
	ctx := context.Background()
	for d := range dirs {
		must(t, e.Mkdirs(ctx, root, fmt.Sprintf("%s/d%d/e%d/empty", top, d%7, d), 0o755))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < dirs*files; i += 8 {
				d, f := i/files, i%files
				p := fmt.Sprintf("%s/d%d/e%d/f%d", top, d%7, d, f)
				if _, err := e.CreateFile(ctx, root, p, meta.CreateOptions{Client: "c"}, []byte("content")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// ownedRows counts, in the store, the inode rows owner owns.
func ownedRows(t *testing.T, st store.Store, owner string) int {
	t.Helper()
	ctx := context.Background()
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	n := 0
	must(t, txn.Scan(ctx, []byte{'i'}, []byte{'i' + 1}, 0, func(k, v []byte) bool {
		var in store.Inode
		must(t, store.DecodeInode(k, v, &in))
		if in.Owner == owner {
			n++
		}
		return true
	}))
	return n
}

// subtreeRows counts the rows of the subtree operation table.
func subtreeRows(t *testing.T, st store.Store) int {
	t.Helper()
	ctx := context.Background()
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	start, end := store.AllSubtreeOpsRange()
	n := 0
	must(t, txn.Scan(ctx, start, end, 0, func(_, _ []byte) bool { n++; return true }))
	return n
}

// TestRecursiveChmodChown changes a tree bigger than a batch (several
// levels, a directory of 1,500 entries, a file with an ACL) in one
// operation each: every inode has the mode, then the owner and group; the
// ACL's mask is the new group bits, as with a plain chmod; nothing of the
// protocol is left. On a file it is the plain operation.
func TestRecursiveChmodChown(t *testing.T) {
	e, st := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
	quickTree(t, e, "/q/top", 12, 200)
	quickTree(t, e, "/q/top/big", 1, 1500) // a directory of more than a batch
	must(t, e.Mkdirs(ctx, root, "/q/top/links", 0o755))
	must(t, e.CreateSymlink(ctx, root, "/q", "/q/top/links/only", false))
	acl, err := meta.ParseAclSpec("user:bob:rwx", true)
	must(t, err)
	must(t, e.ModifyAclEntries(ctx, root, "/q/top/d1/e1/f2", acl))
	must(t, e.CreateSymlink(ctx, root, "/elsewhere", "/q/top/d1/link", false))
	link, err := e.Stat(ctx, root, "/q/top/d1/link")
	must(t, err)

	must(t, e.SetPermissionRecursive(ctx, root, "/q/top", 0o750))
	n := 0
	walkTree(t, e, "/q/top", func(p string, s *meta.FileStatus) {
		n++
		if s.Type == meta.TypeSymlink {
			if s.Perm != link.Perm {
				t.Errorf("chmod -R changed the symbolic link %s: %o, was %o", p, s.Perm, link.Perm)
			}
			return
		}
		if s.Perm != 0o750 {
			t.Errorf("%s has mode %o after chmod -R 750", p, s.Perm)
		}
	})
	if n < 12*200+1500 {
		t.Fatalf("walked %d inodes", n)
	}
	as, err := e.GetAclStatus(ctx, root, "/q/top/d1/e1/f2")
	must(t, err)
	mask := meta.Perm(99)
	for _, en := range as.Entries {
		if en.Type == meta.AclMask && en.Scope == meta.AclAccess {
			mask = en.Perm
		}
	}
	if len(as.Entries) == 0 || as.Perm&0o70 != 0o50 || (mask != 99 && mask != 0o5) {
		t.Errorf("ACL after chmod -R 750: perm %o, mask %o, entries %v", as.Perm, mask, as.Entries)
	}

	must(t, e.SetOwnerRecursive(ctx, root, "/q/top", "alice", "staff"))
	walkTree(t, e, "/q/top", func(p string, s *meta.FileStatus) {
		if s.Type == meta.TypeSymlink {
			return
		}
		if s.Owner != "alice" || s.Group != "staff" || s.Perm != 0o750 {
			t.Errorf("%s is %s:%s %o after chown -R alice:staff", p, s.Owner, s.Group, s.Perm)
		}
	})
	// The new owner may change the group of its tree to one of its groups.
	must(t, e.SetOwnerRecursive(ctx, alice, "/q/top", "", "alice"))
	walkTree(t, e, "/q/top", func(p string, s *meta.FileStatus) {
		if s.Type != meta.TypeSymlink && (s.Owner != "alice" || s.Group != "alice") {
			t.Errorf("%s is %s:%s after chown -R :alice", p, s.Owner, s.Group)
		}
	})
	// A directory of symbolic links only: the links keep their modes.
	must(t, e.SetPermissionRecursive(ctx, root, "/q/top/links", 0o700))
	ls, err := e.Stat(ctx, root, "/q/top/links/only")
	must(t, err)
	if ls.Perm != link.Perm {
		t.Errorf("chmod -R of a directory of links changed the link: %o, was %o", ls.Perm, link.Perm)
	}
	// A file, an empty directory: the plain operation.
	must(t, e.SetPermissionRecursive(ctx, root, "/q/top/d1/e1/f3", 0o600))
	must(t, e.SetPermissionRecursive(ctx, root, "/q/top/d1/e1/empty", 0o711))
	for p, want := range map[string]meta.Perm{"/q/top/d1/e1/f3": 0o600, "/q/top/d1/e1/empty": 0o711, "/q/top/d1/e1/f4": 0o750} {
		s, err := e.Stat(ctx, root, p)
		must(t, err)
		if s.Perm != want {
			t.Errorf("%s has mode %o, want %o", p, s.Perm, want)
		}
	}
	wantKind(t, e.SetPermissionRecursive(ctx, root, "/q/nothing", 0o700), meta.ErrNotFound)
	wantKind(t, e.SetPermissionRecursive(ctx, root, "/q/top", 0o10000), meta.ErrInvalidArgument)
	wantKind(t, e.SetOwnerRecursive(ctx, root, "/q/top", "", ""), meta.ErrInvalidArgument)
	fsckClean(t, e)
	if n := e.subtrees.t.Len(); n != 0 {
		t.Errorf("%d subtree operations still under way", n)
	}
	if n := subtreeRows(t, st); n != 0 {
		t.Errorf("%d subtree operation rows left", n)
	}
}

// TestRecursiveChmodRefusedChangesNothing: the owner of a tree with one
// file of another user deep down may not chmod -R or chgrp -R it; the
// error names that file, and nothing changed, not even what the walk met
// before it.
func TestRecursiveChmodRefusedChangesNothing(t *testing.T) {
	e, st := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/top", 0o755))
	quickTree(t, e, "/top", 6, 300)
	must(t, e.SetOwnerRecursive(ctx, root, "/top", "alice", "alice"))
	must(t, e.SetOwner(ctx, root, "/top/d5/e5/f299", "bob", ""))
	before := map[string]meta.FileStatus{}
	walkTree(t, e, "/top", func(p string, s *meta.FileStatus) { before[p] = *s })

	err := e.SetPermissionRecursive(ctx, alice, "/top", 0o700)
	wantKind(t, err, meta.ErrPermission)
	if !strings.Contains(err.Error(), "/top/d5/e5/f299") {
		t.Errorf("the refusal does not name the file: %v", err)
	}
	err = e.SetOwnerRecursive(ctx, alice, "/top", "", "staff")
	wantKind(t, err, meta.ErrPermission)
	if !strings.Contains(err.Error(), "/top/d5/e5/f299") {
		t.Errorf("the refusal does not name the file: %v", err)
	}
	// Refused at the top: bob owns nothing there; alice may not give away.
	wantKind(t, e.SetPermissionRecursive(ctx, bob, "/top", 0o777), meta.ErrPermission)
	wantKind(t, e.SetOwnerRecursive(ctx, alice, "/top/d1", "bob", ""), meta.ErrPermission)
	walkTree(t, e, "/top", func(p string, s *meta.FileStatus) {
		b := before[p]
		if s.Perm != b.Perm || s.Owner != b.Owner || s.Group != b.Group {
			t.Errorf("%s changed by a refused operation: %s:%s %o, was %s:%s %o", p, s.Owner, s.Group, s.Perm, b.Owner, b.Group, b.Perm)
		}
	})
	fsckClean(t, e)
	if n := subtreeRows(t, st); n != 0 {
		t.Errorf("%d subtree operation rows left", n)
	}
	// Without the stranger's file, alice may.
	must(t, e.Delete(ctx, root, "/top/d5/e5/f299", false))
	must(t, e.SetPermissionRecursive(ctx, alice, "/top", 0o700))
	walkTree(t, e, "/top", func(p string, s *meta.FileStatus) {
		if s.Perm != 0o700 {
			t.Errorf("%s has mode %o", p, s.Perm)
		}
	})
}

// TestRecursiveChmodIsAtomic runs a chmod -R against readers and creates
// inside the tree. The history must be linearizable with the chmod -R as
// one step:
//   - readers stat an inode of the first batch, then one of the last: once
//     the first shows the new mode, the second must too (no half-changed
//     tree is seen);
//   - every file created has the new mode, when its create is ordered
//     before the chmod (it began before the chmod returned), or the mode it
//     was created with, when after (it returned after the chmod began):
//     never a mode that no order explains.
func TestRecursiveChmodIsAtomic(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/t", 0o755))
	quickTree(t, e, "/t", 8, 400)
	const first, last = "/t/d0", "/t/d6/e6/f399" // a child of the top; a file three levels down

	var clock atomic.Int64 // orders invocations and returns
	type created struct {
		path     string
		inv, ret int64
		perm     meta.Perm
	}
	var mu sync.Mutex
	var files []created
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var violations atomic.Int32
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/t/d%d/e%d/new-%d-%d", w, w, w, i)
				inv := clock.Add(1)
				st, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "c", Perm: 0o644})
				ret := clock.Add(1)
				if err != nil {
					t.Errorf("create %s: %v", p, err)
					return
				}
				mu.Lock()
				files = append(files, created{p, inv, ret, st.Perm})
				mu.Unlock()
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := e.Stat(ctx, root, first)
				if err != nil {
					t.Errorf("stat %s: %v", first, err)
					return
				}
				b, err := e.Stat(ctx, root, last)
				if err != nil {
					t.Errorf("stat %s: %v", last, err)
					return
				}
				if a.Perm == 0o700 && b.Perm != 0o700 {
					violations.Add(1)
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	inv := clock.Add(1)
	err := e.SetPermissionRecursive(ctx, root, "/t", 0o700)
	ret := clock.Add(1)
	must(t, err)
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := violations.Load(); n > 0 {
		t.Errorf("%d reads saw %s changed and %s not: a half-changed tree", n, first, last)
	}
	var before, after int
	for _, f := range files {
		s, err := e.Stat(ctx, root, f.path)
		must(t, err)
		switch {
		case s.Perm == 0o700 && f.inv < ret:
			before++
		case s.Perm == f.perm && f.ret > inv:
			after++
		default:
			t.Errorf("%s (created %d..%d, chmod -R %d..%d) has mode %o: no order explains it", f.path, f.inv, f.ret, inv, ret, s.Perm)
		}
	}
	t.Logf("%d creates ordered before the chmod -R, %d after", before, after)
	if before == 0 || after == 0 {
		t.Errorf("the creates did not overlap the chmod -R (%d before, %d after)", before, after)
	}
	fsckClean(t, e)
}

// TestRecursiveChmodResumesAfterCrash stops a chmod -R dead (its goroutine
// exits in the middle of a commit, as a crash would) after two batches: the
// tree stays under the flag (busy, not half seen), and the next start
// finishes the chmod. Stopped before its first batch, the next start only
// clears the flag: nothing changed.
func TestRecursiveChmodResumesAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		commits int32 // the commit that dies: 1 is the flag's
		done    bool  // the next start finishes the operation
	}{
		{"before the first batch", 2, false},
		{"after two batches", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e, st, err := openEngineDir(dir)
			must(t, err)
			ctx := context.Background()
			must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
			quickTree(t, e, "/q/top", 8, 400)
			var commits atomic.Int32
			// The commit that dies, and every one after it (batches commit
			// from more than one goroutine): the process is gone.
			e.testHookCommit = func() {
				if commits.Add(1) >= tc.commits {
					runtime.Goexit()
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Dies in its goroutine, or, when a batch worker died, fails
				// keeping its flag: what is stored is the same.
				if err := e.SetOwnerRecursive(ctx, root, "/q/top", "bob", "bob"); err == nil {
					t.Error("the chown -R returned success")
				}
			}()
			<-done
			e.testHookCommit = nil
			if n := ownedRows(t, st, "bob"); tc.done != (n > 0) {
				t.Fatalf("%d inodes changed before the crash", n)
			}
			e.cfg.SubtreeWait = 50 * time.Millisecond
			_, err = e.Stat(ctx, root, "/q/top/d1/e1/f1")
			wantKind(t, err, meta.ErrBusy)
			must(t, e.Close())
			must(t, st.Close())

			e, st = openEngine(t, dir)
			changed, kept := 0, 0
			walkTree(t, e, "/q/top", func(p string, s *meta.FileStatus) {
				if s.Owner == "bob" && s.Group == "bob" {
					changed++
				} else {
					kept++
				}
			})
			if tc.done && kept > 0 || !tc.done && changed > 0 {
				t.Errorf("after the restart %d inodes changed, %d not", changed, kept)
			}
			fsckClean(t, e)
			if n := subtreeRows(t, st); n != 0 {
				t.Errorf("%d subtree operation rows left", n)
			}
			must(t, e.SetPermissionRecursive(ctx, root, "/q/top", 0o700))
		})
	}
}

// BenchmarkSetPermissionRecursive times chmod -R of a tree of 2^14 files
// (64 directories of 256) in process, without the RPC; `nimbus bench
// subtree --op chmod` is the end-to-end figure.
func BenchmarkSetPermissionRecursive(b *testing.B) {
	e, _ := newEngine(b)
	ctx := context.Background()
	const dirs, files = 64, 256
	for d := range dirs {
		must(b, e.Mkdirs(ctx, root, fmt.Sprintf("/t/d%d/e%d", d%8, d), 0o755))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < dirs*files; i += 8 {
				p := fmt.Sprintf("/t/d%d/e%d/f%d", (i/files)%8, i/files, i%files)
				if _, err := e.CreateFile(ctx, root, p, meta.CreateOptions{Client: "c"}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ResetTimer()
	for i := range b.N {
		must(b, e.SetPermissionRecursive(ctx, root, "/t", meta.Perm(0o700+i%2*0o50)))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(dirs*files), "ns/file")
}
