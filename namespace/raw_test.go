package namespace

import (
	"context"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// HDFS's /.reserved/raw: the same inodes, raw.* attributes named and seen
// only through it, changes through it by the superuser only.
func TestReservedRaw(t *testing.T) {
	ctx := context.Background()
	e, _ := newEngine(t)
	both := meta.XAttrCreate | meta.XAttrReplace
	must(t, e.Mkdirs(ctx, root, "/d", 0o777))
	writeFile(t, e, alice, "/d/f", []byte("x"))
	raw := meta.XAttr{Name: "raw.k", Value: []byte("v")}

	// raw.* through a plain path: refused, with HDFS's words, even to the superuser.
	err := e.SetXAttr(ctx, root, "/d/f", raw, both)
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "User doesn't have permission for xattr: raw.k")
	// Changing through the raw path takes the superuser.
	err = e.SetXAttr(ctx, alice, "/.reserved/raw/d/f", raw, both)
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "Access denied for user alice. Superuser privilege is required")

	must(t, e.SetXAttr(ctx, root, "/.reserved/raw/d/f", raw, both))
	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.u", Value: []byte("w")}, both))

	// Invisible through the plain path, to anyone; named, refused.
	for _, u := range []meta.User{root, alice} {
		names, err := e.ListXAttrs(ctx, u, "/d/f")
		must(t, err)
		if !slices.Equal(names, []string{"user.u"}) {
			t.Fatalf("%s lists %v through the plain path", u.Name, names)
		}
		all, err := e.GetXAttrs(ctx, u, "/d/f", nil)
		must(t, err)
		if len(all) != 1 || all[0].Name != "user.u" {
			t.Fatalf("%s gets %+v through the plain path", u.Name, all)
		}
		_, err = e.GetXAttrs(ctx, u, "/d/f", []string{"raw.k"})
		wantDetail(t, err, "User doesn't have permission for xattr: raw.k")
	}
	// Visible through the raw path; reading through it is open to all, as
	// HDFS resolves a read (DirOp.READ) there without the superuser check.
	for _, u := range []meta.User{root, alice} {
		names, err := e.ListXAttrs(ctx, u, "/.reserved/raw/d/f")
		must(t, err)
		if !slices.Equal(names, []string{"raw.k", "user.u"}) {
			t.Fatalf("%s lists %v through the raw path", u.Name, names)
		}
		got, err := e.GetXAttrs(ctx, u, "/.reserved/raw/d/f", []string{"raw.k"})
		must(t, err)
		if len(got) != 1 || string(got[0].Value) != "v" {
			t.Fatalf("%s gets %+v through the raw path", u.Name, got)
		}
	}

	// Stat and list: the same inodes.
	plain, err := e.Stat(ctx, alice, "/d/f")
	must(t, err)
	st, err := e.Stat(ctx, alice, "/.reserved/raw/d/f")
	must(t, err)
	if st.FileID != plain.FileID {
		t.Fatalf("raw stat id %d, plain %d", st.FileID, plain.FileID)
	}
	if st, err = e.Stat(ctx, bob, "/.reserved/raw"); err != nil || st.FileID != 1 {
		t.Fatalf("/.reserved/raw stat %+v, %v; want the root", st, err)
	}
	ls, err := e.List(ctx, bob, "/.reserved/raw/d", "", 0)
	must(t, err)
	if len(ls.Entries) != 1 || ls.Entries[0].FileID != plain.FileID {
		t.Fatalf("raw list %+v", ls.Entries)
	}
	if data, err := e.Read(ctx, alice, "/.reserved/raw/d/f", 0, 1); err != nil || string(data) != "x" {
		t.Fatalf("raw read %q, %v", data, err)
	}

	// Removing: through the raw path, by the superuser.
	wantDetail(t, e.RemoveXAttr(ctx, root, "/d/f", "raw.k"), "User doesn't have permission for xattr: raw.k")
	wantDetail(t, e.RemoveXAttr(ctx, alice, "/.reserved/raw/d/f", "raw.k"),
		"Access denied for user alice. Superuser privilege is required")
	must(t, e.RemoveXAttr(ctx, root, "/.reserved/raw/d/f", "raw.k"))
	if names, err := e.ListXAttrs(ctx, root, "/.reserved/raw/d/f"); err != nil || !slices.Equal(names, []string{"user.u"}) {
		t.Fatalf("after remove: %v, %v", names, err)
	}

	// /.reserved itself cannot be made; other changes through the raw path
	// are refused; other /.reserved names are ordinary missing paths.
	for _, p := range []string{"/.reserved", "/.reserved/x"} {
		err = e.Mkdirs(ctx, root, p, 0o755)
		wantKind(t, err, meta.ErrInvalidArgument)
		wantDetail(t, err, `File name ".reserved" is reserved and cannot be created.`)
		_, err = e.Create(ctx, root, p, meta.CreateOptions{Client: "c", Perm: 0o644, CreateParent: true})
		wantKind(t, err, meta.ErrInvalidPath)
		wantDetail(t, err, "Invalid path name "+p)
	}
	wantDetail(t, e.Rename(ctx, root, "/d/f", "/.reserved", meta.RenameOptions{}), "Cannot rename to or from /.reserved")
	wantDetail(t, e.Delete(ctx, root, "/.reserved", true), "Invalid path name /.reserved")
	wantKind(t, e.Mkdirs(ctx, root, "/.reserved/raw/d/sub", 0o755), meta.ErrUnsupported)
	_, err = e.Stat(ctx, root, "/.reserved/.inodes/1")
	wantKind(t, err, meta.ErrNotFound)
	_, err = e.Stat(ctx, root, "/.reserved/rawx")
	wantKind(t, err, meta.ErrNotFound)
	// A .reserved below the root is an ordinary name, as in HDFS.
	must(t, e.Mkdirs(ctx, root, "/d/.reserved", 0o755))
	fsckClean(t, e)
}
