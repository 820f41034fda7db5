package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
)

// newMemHarness runs the shell against a MemFS, which keeps ACLs and
// xattrs and can be made to block or fail on cue.
func newMemHarness(t *testing.T) *harness {
	return &harness{t: t, fs: metatest.NewMemFS(), user: meta.User{Name: "alice"}, now: harnessTime}
}

func TestSetfaclGetfacl(t *testing.T) {
	h := newMemHarness(t)
	h.ok("mkdir", "-p", "/d/sub")
	h.ok("chmod", "750", "/d")
	// A path without an ACL: the three entries its bits make.
	expectEq(t, "getfacl plain", h.ok("getfacl", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\nuser::rwx\ngroup::r-x\nother::---\n\n")
	h.ok("setfacl", "-m", "user:bob:rwx,group:staff:r--,default:user:bob:r-x", "/d")
	h.ok("chmod", "g-w", "/d") // the mask is now r-x: bob's rwx is limited
	expectEq(t, "getfacl", h.ok("getfacl", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\n"+
			"user::rwx\nuser:bob:rwx\t#effective:r-x\ngroup::r-x\ngroup:staff:r--\nmask::r-x\nother::---\n"+
			"default:user::rwx\ndefault:user:bob:r-x\ndefault:group::r-x\ndefault:mask::r-x\ndefault:other::---\n\n")
	if out := h.ok("ls", "/"); !strings.Contains(out, "drwxr-x---+") {
		t.Fatalf("ls shows no + for the ACL:\n%s", out)
	}
	if out := h.ok("ls", "/d"); !strings.Contains(out, "drwxr-xr-x   - alice") {
		t.Fatalf("ls shows a + without an ACL:\n%s", out)
	}
	h.ok("setfacl", "-x", "user:bob", "/d")
	h.ok("setfacl", "-k", "/d")
	expectEq(t, "after -x, -k", h.ok("getfacl", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\nuser::rwx\ngroup::r-x\ngroup:staff:r--\nmask::r-x\nother::---\n\n")
	h.ok("setfacl", "-b", "/d")
	expectEq(t, "after -b", h.ok("getfacl", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\nuser::rwx\ngroup::r-x\nother::---\n\n")
	h.ok("setfacl", "-R", "--set", "user::rwx,user:carol:r-x,group::---,other::---,default:user:carol:r-x", "/d")
	expectEq(t, "getfacl -R", h.ok("getfacl", "-R", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\nuser::rwx\nuser:carol:r-x\ngroup::---\nmask::r-x\nother::---\n"+
			"default:user::rwx\ndefault:user:carol:r-x\ndefault:group::---\ndefault:mask::r-x\ndefault:other::---\n\n"+
			"# file: /d/sub\n# owner: alice\n# group: supergroup\nuser::rwx\nuser:carol:r-x\ngroup::---\nmask::r-x\nother::---\n"+
			"default:user::rwx\ndefault:user:carol:r-x\ndefault:group::---\ndefault:mask::r-x\ndefault:other::---\n\n")

	if code, _, errs := h.run("setfacl", "-m", "user:bob:rwz", "/d"); code != 2 || !strings.Contains(errs, "invalid ACL entry") {
		t.Fatalf("bad spec: exit %d, %q", code, errs)
	}
	if code, _, errs := h.run("setfacl", "--set", "user:bob:rwx", "/d"); code != 1 || !strings.Contains(errs, "setfacl /d: invalid argument") {
		t.Fatalf("invalid ACL: exit %d, %q", code, errs)
	}
	h.user = meta.User{Name: "bob"}
	if code, _, errs := h.run("setfacl", "-b", "/d"); code != 1 || !strings.Contains(errs, "permission denied") {
		t.Fatalf("not the owner: exit %d, %q", code, errs)
	}
}

func TestSetfattrGetfattr(t *testing.T) {
	h := newMemHarness(t)
	h.put("/f", "x")
	h.ok("setfattr", "-n", "user.b", "-v", "0x0102", "/f")
	h.ok("setfattr", "-n", "user.a", "-v", "hello", "/f")
	h.ok("setfattr", "-n", "user.empty", "/f")
	expectEq(t, "getfattr -d", h.ok("getfattr", "-d", "/f"),
		"# file: /f\nuser.a=\"hello\"\nuser.b=\"\x01\x02\"\nuser.empty\n")
	expectEq(t, "getfattr -n -e hex", h.ok("getfattr", "-n", "user.a", "-e", "hex", "/f"), "# file: /f\nuser.a=0x68656c6c6f\n")
	expectEq(t, "getfattr -e base64", h.ok("getfattr", "-e", "base64", "-n", "user.b", "/f"), "# file: /f\nuser.b=0sAQI=\n")
	h.ok("setfattr", "-x", "user.a", "/f")
	if code, _, errs := h.run("getfattr", "-n", "user.a", "/f"); code != 1 || !strings.Contains(errs, "getfattr /f: not found") {
		t.Fatalf("getfattr of a removed attribute: exit %d, %q", code, errs)
	}
	if code, _, errs := h.run("setfattr", "-n", "bad", "/f"); code != 1 || !strings.Contains(errs, "invalid argument") {
		t.Fatalf("bad name: exit %d, %q", code, errs)
	}
	if code, _, _ := h.run("getfattr", "-n", "user.a", "-d", "/f"); code != 2 {
		t.Fatalf("-n and -d together: exit %d, want 2", code)
	}
}

// noACLs answers every ACL operation ErrUnsupported, as a client of a
// protocol that cannot carry them does.
type noACLs struct{ meta.FileSystem }

func (noACLs) unsupported(op, p string) error {
	return meta.Errorf(op, p, meta.ErrUnsupported, "no ACLs here")
}
func (f noACLs) ModifyAclEntries(_ context.Context, _ meta.User, p string, _ []meta.AclEntry) error {
	return f.unsupported("modifyAclEntries", p)
}
func (f noACLs) RemoveAclEntries(_ context.Context, _ meta.User, p string, _ []meta.AclEntry) error {
	return f.unsupported("removeAclEntries", p)
}
func (f noACLs) RemoveDefaultAcl(_ context.Context, _ meta.User, p string) error {
	return f.unsupported("removeDefaultAcl", p)
}
func (f noACLs) RemoveAcl(_ context.Context, _ meta.User, p string) error {
	return f.unsupported("removeAcl", p)
}
func (f noACLs) SetAcl(_ context.Context, _ meta.User, p string, _ []meta.AclEntry) error {
	return f.unsupported("setAcl", p)
}
func (f noACLs) GetAclStatus(_ context.Context, _ meta.User, p string) (*meta.AclStatus, error) {
	return nil, f.unsupported("getAclStatus", p)
}

// A server without ACLs: getfacl still prints the ACL of the bits, the
// setters fail with the kind.
func TestACLCommandsUnsupported(t *testing.T) {
	h := newHarness(t)
	h.fs = noACLs{h.fs}
	h.mkdirs("/user/alice/d")
	if out := h.ok("getfacl", "d"); !strings.HasPrefix(out, "# file: d\n") || !strings.Contains(out, "user::rwx\n") {
		t.Fatalf("getfacl without ACLs:\n%s", out)
	}
	if code, _, errs := h.run("setfacl", "-b", "d"); code != 1 || !strings.Contains(errs, "operation not supported") {
		t.Fatalf("setfacl without ACLs: exit %d, %q", code, errs)
	}
}

// The commands as the binary runs them: through client.Dial and the RPC to
// a server whose file system keeps ACLs and xattrs (a MemFS here).
func TestACLCommandsOverRPC(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/rpc/", rpc.NewServer(metatest.NewMemFS(), rpc.ServerOptions{}).Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("NIMBUS_ADDR", srv.URL)
	t.Setenv("NIMBUS_USER", "alice")
	run := func(args ...string) string {
		t.Helper()
		var out, errs bytes.Buffer
		if code := cmdFS(context.Background(), args, &out, &errs); code != 0 || errs.Len() > 0 {
			t.Fatalf("%q: exit %d, %q", args, code, errs.String())
		}
		return out.String()
	}
	run("mkdir", "-p", "/d")
	run("setfacl", "-m", "user:bob:r-x", "/d")
	expectEq(t, "getfacl over RPC", run("getfacl", "/d"),
		"# file: /d\n# owner: alice\n# group: supergroup\nuser::rwx\nuser:bob:r-x\ngroup::r-x\nmask::r-x\nother::r-x\n\n")
	if out := run("--json", "ls", "-d", "/d"); !strings.Contains(out, `"acl_bit": true`) {
		t.Fatalf("ls --json has no acl_bit: %s", out)
	}
	run("setfattr", "-n", "user.k", "-v", "0s3q2+7w==", "/d")
	expectEq(t, "getfattr over RPC", run("getfattr", "-n", "user.k", "-e", "hex", "/d"), "# file: /d\nuser.k=0xdeadbeef\n")
}
