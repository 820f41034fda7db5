package webhdfs

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/prometheus/client_golang/prometheus"
)

// newMemEnv serves a MemFS directly (not through countFS, which would hide
// its optional capabilities).
func newMemEnv(t *testing.T) (*env, *metatest.MemFS) {
	t.Helper()
	mem := metatest.NewMemFS()
	e := &env{t: t, reg: prometheus.NewRegistry(), fs: mem}
	c := DefaultConfig()
	c.Superuser = "root"
	c.Registerer = e.reg
	h, err := New(mem, c)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"/", h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	e.c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e, mem
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
}

func TestACLOps(t *testing.T) {
	e, _ := newMemEnv(t)
	wantStatus(t, e.do("PUT", "/d", "op=MKDIRS&permission=750&user.name=alice", nil), 200)
	wantStatus(t, e.do("PUT", "/d", "op=MODIFYACLENTRIES&user.name=alice&aclspec=user:bob:rwx,default:group:staff:r-x", nil), 200)
	r := e.do("GET", "/d", "op=GETACLSTATUS&user.name=alice", nil)
	wantStatus(t, r, 200)
	// Byte for byte what HDFS 3.4.1's JsonUtil writes (a TreeMap per level).
	want := `{"AclStatus":{"entries":["user:bob:rwx","group::r-x","default:user::rwx","default:group::r-x","default:group:staff:r-x","default:mask::r-x","default:other::---"],"group":"supergroup","owner":"alice","permission":"770","stickyBit":false}}` + "\n"
	if string(r.body) != want {
		t.Fatalf("GETACLSTATUS\n got %s\nwant %s", r.body, want)
	}
	r = e.do("GET", "/d", "op=GETFILESTATUS&user.name=alice", nil)
	if !strings.Contains(string(r.body), `{"accessTime":`) || !strings.Contains(string(r.body), `,"aclBit":true,"blockSize":`) {
		t.Fatalf("GETFILESTATUS has no aclBit after accessTime: %s", r.body)
	}
	r = e.do("GET", "/", "op=LISTSTATUS&user.name=alice", nil)
	if !strings.Contains(string(r.body), `"aclBit":true`) {
		t.Fatalf("LISTSTATUS has no aclBit: %s", r.body)
	}
	// Not the owner: AccessControlException; an invalid ACL: AclException
	// (an IOException, 403, as HDFS's ExceptionHandler sends it); a spec
	// that does not parse: IllegalArgumentException.
	wantError(t, e.do("PUT", "/d", "op=MODIFYACLENTRIES&user.name=bob&aclspec=user:bob:rwx", nil), 403, "AccessControlException")
	wantError(t, e.do("PUT", "/d", "op=SETACL&user.name=alice&aclspec=user:bob:rwx", nil), 403, "AclException")
	wantError(t, e.do("PUT", "/d", "op=SETACL&user.name=alice&aclspec=user:bob:rwz", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/d", "op=REMOVEACLENTRIES&user.name=alice&aclspec=user:bob:rwx", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/d", "op=SETACL&user.name=alice", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("GET", "/nope", "op=GETACLSTATUS&user.name=alice", nil), 404, "FileNotFoundException")

	wantStatus(t, e.do("PUT", "/d", "op=REMOVEACLENTRIES&user.name=alice&aclspec=user:bob", nil), 200)
	wantStatus(t, e.do("PUT", "/d", "op=REMOVEDEFAULTACL&user.name=alice", nil), 200)
	r = e.do("GET", "/d", "op=GETACLSTATUS&user.name=alice", nil)
	if want := `{"AclStatus":{"entries":["group::r-x"],"group":"supergroup","owner":"alice","permission":"750","stickyBit":false}}` + "\n"; string(r.body) != want {
		t.Fatalf("after removals\n got %s\nwant %s", r.body, want)
	}
	wantStatus(t, e.do("PUT", "/d", "op=REMOVEACL&user.name=alice", nil), 200)
	wantStatus(t, e.do("PUT", "/d", "op=SETPERMISSION&permission=1777&user.name=alice", nil), 200)
	r = e.do("GET", "/d", "op=GETACLSTATUS&user.name=alice", nil)
	if want := `{"AclStatus":{"entries":[],"group":"supergroup","owner":"alice","permission":"1777","stickyBit":true}}` + "\n"; string(r.body) != want {
		t.Fatalf("after REMOVEACL\n got %s\nwant %s", r.body, want)
	}
	r = e.do("GET", "/d", "op=GETFILESTATUS&user.name=alice", nil)
	if strings.Contains(string(r.body), "aclBit") {
		t.Fatalf("aclBit after REMOVEACL: %s", r.body)
	}
	wantStatus(t, e.do("PUT", "/d", "op=SETACL&user.name=alice&aclspec=user::rwx,user:carol:r--,group::r-x,other::---", nil), 200)
	r = e.do("GET", "/d", "op=GETACLSTATUS&user.name=alice", nil)
	if want := `"entries":["user:carol:r--","group::r-x"]`; !strings.Contains(string(r.body), want) {
		t.Fatalf("after SETACL: %s", r.body)
	}
}

func TestXAttrOps(t *testing.T) {
	e, _ := newMemEnv(t)
	e.put("alice", "/f", "x", "")
	wantStatus(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.a&xattr.value=0x0102ff&flag=CREATE", nil), 200)
	wantStatus(t, e.do("PUT", "/f", `op=SETXATTR&user.name=alice&xattr.name=user.b&xattr.value=%22hi%3C%22&flag=CREATE,REPLACE`, nil), 200)
	r := e.do("GET", "/f", "op=GETXATTRS&user.name=alice&encoding=HEX", nil)
	if want := `{"XAttrs":[{"name":"user.a","value":"0x0102ff"},{"name":"user.b","value":"0x68693c"}]}` + "\n"; string(r.body) != want {
		t.Fatalf("GETXATTRS hex\n got %s\nwant %s", r.body, want)
	}
	r = e.do("GET", "/f", "op=GETXATTRS&user.name=alice&xattr.name=user.b&encoding=text", nil)
	if want := `{"XAttrs":[{"name":"user.b","value":"\"hi<\""}]}` + "\n"; string(r.body) != want {
		t.Fatalf("GETXATTRS named\n got %s\nwant %s", r.body, want)
	}
	// The namespace is case-insensitive, as HDFS's XAttrNameParam is.
	r = e.do("GET", "/f", "op=GETXATTRS&user.name=alice&xattr.name=USER.b&encoding=text", nil)
	if want := `{"XAttrs":[{"name":"user.b","value":"\"hi<\""}]}` + "\n"; string(r.body) != want {
		t.Fatalf("GETXATTRS USER.b\n got %s\nwant %s", r.body, want)
	}
	r = e.do("GET", "/f", "op=GETXATTRS&user.name=alice&xattr.name=user.b&xattr.name=user.a&encoding=base64", nil)
	if !strings.Contains(string(r.body), `{"name":"user.a","value":"0sAQL/"}`) || !strings.Contains(string(r.body), `"user.b"`) {
		t.Fatalf("GETXATTRS two names: %s", r.body)
	}
	r = e.do("GET", "/f", "op=LISTXATTRS&user.name=alice", nil)
	if want := `{"XAttrNames":"[\"user.a\",\"user.b\"]"}` + "\n"; string(r.body) != want {
		t.Fatalf("LISTXATTRS\n got %s\nwant %s", r.body, want)
	}
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.a&xattr.value=1&flag=CREATE", nil), 403, "IOException")
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.z&xattr.value=1&flag=REPLACE", nil), 403, "IOException")
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.z&xattr.value=1", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=nope.z&flag=CREATE", nil), 400, "HadoopIllegalArgumentException")
	if r := e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.&flag=CREATE", nil); !strings.Contains(string(r.body), "XAttr name cannot be empty") {
		t.Fatalf("SETXATTR user.: %d %s", r.status, r.body)
	}
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=bob&xattr.name=user.z&flag=CREATE", nil), 403, "AccessControlException")
	wantError(t, e.do("GET", "/f", "op=GETXATTRS&user.name=alice&xattr.name=user.zz", nil), 403, "IOException")
	wantError(t, e.do("GET", "/f", "op=GETXATTRS&user.name=alice&encoding=rot13", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("GET", "/nope", "op=GETXATTRS&user.name=alice&xattr.name=user.a", nil), 404, "FileNotFoundException")
	for i := 2; i < 32; i++ { // MemFS's limit, HDFS's: 32 per inode
		wantStatus(t, e.do("PUT", "/f", fmt.Sprintf("op=SETXATTR&user.name=alice&xattr.name=user.n%d&flag=CREATE", i), nil), 200)
	}
	wantError(t, e.do("PUT", "/f", "op=SETXATTR&user.name=alice&xattr.name=user.more&flag=CREATE", nil), 403, "IOException")
	for i := 2; i < 32; i++ {
		wantStatus(t, e.do("PUT", "/f", fmt.Sprintf("op=REMOVEXATTR&user.name=alice&xattr.name=user.n%d", i), nil), 200)
	}
	wantStatus(t, e.do("PUT", "/f", "op=REMOVEXATTR&user.name=alice&xattr.name=user.a", nil), 200)
	wantError(t, e.do("PUT", "/f", "op=REMOVEXATTR&user.name=alice&xattr.name=user.a", nil), 403, "IOException")
	r = e.do("GET", "/f", "op=LISTXATTRS&user.name=alice", nil)
	if want := `{"XAttrNames":"[\"user.b\"]"}` + "\n"; string(r.body) != want {
		t.Fatalf("LISTXATTRS after remove\n got %s\nwant %s", r.body, want)
	}
}

// The ops the gateway does not serve are refused as HDFS refuses an op it
// does not know, in a shape Hadoop's client raises as an IOException (not
// UnsupportedOperationException, which it rethrows as a RuntimeException).
func TestACLOpsUnsupported(t *testing.T) {
	e := newEnv(t, metatest.NewMemFS(), nil)
	wantStatus(t, e.do("PUT", "/d", "op=MKDIRS&user.name=alice", nil), 200)
	for _, c := range []struct{ method, q string }{
		{"PUT", "op=CREATESNAPSHOT&snapshotname=s"},
		{"GET", "op=GETDELEGATIONTOKEN"},
		{"DELETE", "op=DELETESNAPSHOT&snapshotname=s"},
	} {
		r := e.do(c.method, "/d", c.q+"&user.name=alice", nil)
		wantError(t, r, 400, "IllegalArgumentException")
		if !strings.Contains(string(r.body), `Invalid value for webhdfs parameter \"op\"`) {
			t.Errorf("%s: message does not name the op parameter: %s", c.q, r.body)
		}
	}
}
