package webhdfs

import (
	"strings"
	"testing"
)

// wantMessage checks a RemoteException's class and that its message starts
// with HDFS 3.4.1's words.
func wantMessage(t *testing.T, r resp, status int, exception, prefix string) {
	t.Helper()
	wantError(t, r, status, exception)
	msg, _ := r.json(t)["RemoteException"].(map[string]any)["message"].(string)
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("message %q, want it to start with %q", msg, prefix)
	}
}

// CHECKACCESS answers 200 (no body) when the caller has fsaction on the path
// and search on its ancestors, 403 AccessControlException when not, 404 for
// a missing path; fsaction is required and validated as HDFS's FsActionParam.
func TestCheckAccess(t *testing.T) {
	e := newEngineEnv(t)
	wantStatus(t, e.do("PUT", "/d", "op=MKDIRS&permission=751&user.name=alice", nil), 200)
	e.put("alice", "/d/f", "x", "permission=640")
	for _, c := range []struct {
		user, path, action string
		status             int
	}{
		{"alice", "/d/f", "rw-", 200},
		{"alice", "/d/f", "rwx", 403},
		{"bob", "/d/f", "r--", 403},
		{"bob", "/d/f", "---", 200}, // it exists and /d is searchable by other
		{"bob", "/d", "r-x", 403},
		{"bob", "/d", "--x", 200},
		{"root", "/d/f", "rwx", 200}, // the superuser
	} {
		r := e.do("GET", c.path, "op=CHECKACCESS&fsaction="+c.action+"&user.name="+c.user, nil)
		if c.status == 200 {
			wantStatus(t, r, 200)
			if len(r.body) != 0 {
				t.Errorf("%s %s %s: body %q, want none", c.user, c.path, c.action, r.body)
			}
			continue
		}
		wantMessage(t, r, 403, "AccessControlException", "Permission denied: ")
	}
	// An ACL entry counts.
	wantStatus(t, e.do("PUT", "/d/f", "op=MODIFYACLENTRIES&aclspec=user:bob:r--&user.name=alice", nil), 200)
	wantStatus(t, e.do("GET", "/d/f", "op=CHECKACCESS&fsaction=r--&user.name=bob", nil), 200)
	// Search on an ancestor.
	wantStatus(t, e.do("PUT", "/d", "op=SETPERMISSION&permission=750&user.name=alice", nil), 200)
	wantMessage(t, e.do("GET", "/d/f", "op=CHECKACCESS&fsaction=r--&user.name=bob", nil), 403, "AccessControlException", "Permission denied: ")

	wantMessage(t, e.do("GET", "/d/nope", "op=CHECKACCESS&fsaction=r--&user.name=alice", nil), 404, "FileNotFoundException", "File does not exist: /d/nope")
	for _, q := range []string{"", "&fsaction=", "&fsaction=null"} {
		wantMessage(t, e.do("GET", "/d/f", "op=CHECKACCESS&user.name=alice"+q, nil), 400, "IllegalArgumentException",
			"Required param fsaction for op: CHECKACCESS is null or empty")
	}
	for _, v := range []string{"rwz", "RWX", "rw", "rwxr", "7"} {
		r := e.do("GET", "/d/f", "op=CHECKACCESS&user.name=alice&fsaction="+v, nil)
		wantError(t, r, 400, "IllegalArgumentException")
		if !strings.Contains(string(r.body), `webhdfs parameter \"fsaction\"`) {
			t.Errorf("fsaction=%s: the message does not name the parameter: %s", v, r.body)
		}
	}
}

// The words of HDFS 3.4.1 for a SETXATTR or REMOVEXATTR without xattr.name
// (or SETXATTR without flag), and for LISTXATTRS of a missing path.
func TestXAttrMessagesAsHDFS(t *testing.T) {
	e := newEngineEnv(t)
	wantStatus(t, e.do("PUT", "/d", "op=MKDIRS&user.name=alice", nil), 200)
	for _, c := range []struct{ q, want string }{
		{"op=SETXATTR&xattr.value=v&flag=CREATE", "Required param xattr.name for op: SETXATTR is null or empty"},
		{"op=SETXATTR&xattr.name=&xattr.value=v&flag=CREATE", "Required param xattr.name for op: SETXATTR is null or empty"},
		{"op=SETXATTR&xattr.name=user.a&xattr.value=v", "Required param flag for op: SETXATTR is null or empty"},
		{"op=REMOVEXATTR", "Required param xattr.name for op: REMOVEXATTR is null or empty"},
	} {
		wantMessage(t, e.do("PUT", "/d", c.q+"&user.name=alice", nil), 400, "IllegalArgumentException", c.want)
	}
	wantMessage(t, e.do("GET", "/nope", "op=LISTXATTRS&user.name=alice", nil), 404, "FileNotFoundException", "cannot find /nope (")
	wantMessage(t, e.do("GET", "/nope/x", "op=LISTXATTRS&user.name=alice", nil), 404, "FileNotFoundException", "cannot find /nope/x (")
	// The other ops keep "File does not exist", as HDFS.
	wantMessage(t, e.do("GET", "/nope", "op=GETFILESTATUS&user.name=alice", nil), 404, "FileNotFoundException", "File does not exist: /nope")
}
