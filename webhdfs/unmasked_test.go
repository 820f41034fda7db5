package webhdfs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// newEngineEnv serves the real engine directly (not through countFS, which
// would hide its optional capabilities), with a small WriteChunk so
// that a body of a few KiB takes the streaming path of CREATE.
func newEngineEnv(t *testing.T) *env {
	t.Helper()
	fs := openEngine(t)
	e := &env{t: t, reg: prometheus.NewRegistry(), fs: fs}
	c := DefaultConfig()
	c.Superuser = "root"
	c.Registerer = e.reg
	c.WriteChunk = 1024
	h, err := New(fs, c)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"/", h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	e.c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

// CREATE and MKDIRS pass unmaskedpermission on (HDFS-6962): what Hadoop
// 3.4.1's client sends with umask 022 gives, under a default ACL with mask
// rwx, the modes HDFS gives (FSAclBaseTest testDefaultAclNewFile/NewDir and
// their Intermediate variants); without a default ACL the umasked mode.
func TestUnmaskedPermission(t *testing.T) {
	e := newEngineEnv(t)
	wantStatus(t, e.do("PUT", "/p", "op=MKDIRS&permission=750&user.name=alice", nil), 200)
	wantStatus(t, e.do("PUT", "/p", "op=SETACL&user.name=alice&aclspec=user::rwx,group::r-x,other::---,default:user:foo:rwx", nil), 200)
	wantStatus(t, e.do("PUT", "/q", "op=MKDIRS&permission=777&user.name=alice", nil), 200)
	perm := func(path, want string) {
		t.Helper()
		st := e.do("GET", path, "op=GETFILESTATUS&user.name=alice", nil).json(t)["FileStatus"].(map[string]any)
		if st["permission"] != want {
			t.Errorf("%s: permission %v, want %s", path, st["permission"], want)
		}
	}
	e.put("alice", "/p/small", "x", "permission=644&unmaskedpermission=666")
	perm("/p/small", "660")
	e.put("alice", "/p/large", strings.Repeat("x", 5000), "permission=644&unmaskedpermission=666")
	perm("/p/large", "660")
	// Overwriting streams into a staging file beside the target: the same
	// parent, the same default ACL.
	e.put("alice", "/p/large", strings.Repeat("y", 5000), "permission=644&unmaskedpermission=666")
	perm("/p/large", "660")
	e.put("alice", "/p/masked", "x", "permission=644")
	perm("/p/masked", "640")
	e.put("alice", "/p/i/f", "x", "permission=644&unmaskedpermission=666")
	perm("/p/i", "750")
	perm("/p/i/f", "660")
	e.put("alice", "/q/f", "x", "permission=644&unmaskedpermission=666")
	perm("/q/f", "644")

	wantStatus(t, e.do("PUT", "/p/d", "op=MKDIRS&permission=755&unmaskedpermission=777&user.name=alice", nil), 200)
	perm("/p/d", "770")
	wantStatus(t, e.do("PUT", "/p/j/k", "op=MKDIRS&permission=755&unmaskedpermission=777&user.name=alice", nil), 200)
	perm("/p/j", "770")
	perm("/p/j/k", "770")
	wantStatus(t, e.do("PUT", "/p/m", "op=MKDIRS&permission=755&user.name=alice", nil), 200)
	perm("/p/m", "750")
	// An empty value is no value, as for permission, and so is "null", the
	// parameter's default in Hadoop (UnmaskedPermissionParam.DEFAULT).
	wantStatus(t, e.do("PUT", "/p/n", "op=MKDIRS&permission=755&unmaskedpermission=&user.name=alice", nil), 200)
	perm("/p/n", "750")
	wantStatus(t, e.do("PUT", "/p/o", "op=MKDIRS&permission=null&unmaskedpermission=null&user.name=alice", nil), 200)
	perm("/p/o", "750")
	// Without permission, the default mode is the masked one.
	wantStatus(t, e.do("PUT", "/q/d", "op=MKDIRS&unmaskedpermission=777&user.name=alice", nil), 200)
	perm("/q/d", "755")
}

// A bad unmaskedpermission is a 400 IllegalArgumentException naming the
// parameter, on CREATE's first step (before any redirect) and on MKDIRS,
// and nothing is created.
func TestUnmaskedPermissionInvalid(t *testing.T) {
	e := newEngineEnv(t)
	for _, v := range []string{"rwx", "2000", "-1", "99999", "8"} {
		for _, rq := range []struct{ path, q string }{
			{"/f", "op=CREATE&permission=644&unmaskedpermission=" + v},
			{"/d", "op=MKDIRS&permission=755&unmaskedpermission=" + v},
		} {
			r := e.do("PUT", rq.path, rq.q+"&user.name=alice", nil)
			wantError(t, r, 400, "IllegalArgumentException")
			if !strings.Contains(string(r.body), `\"unmaskedpermission\"`) {
				t.Errorf("%s: the message does not name the parameter: %s", rq.q, r.body)
			}
			if _, err := e.fs.Stat(context.Background(), meta.User{Name: "root"}, rq.path); meta.KindOf(err) != meta.KindNotFound {
				t.Errorf("%s: %s exists after a refused request (%v)", rq.q, rq.path, err)
			}
		}
	}
	// The data step checks it too.
	r := e.do("PUT", "/f", "op=CREATE&data=true&unmaskedpermission=1778&user.name=alice", strings.NewReader("x"))
	wantError(t, r, 400, "IllegalArgumentException")
}
