package webhdfs

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestCreateRedirectAndNoRedirect(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do("PUT", "/dir with space/f", "op=CREATE&user.name=alice&overwrite=false&permission=600&someUnknown=1", nil)
	if r.status != http.StatusTemporaryRedirect {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	loc, err := url.Parse(r.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Scheme + "://" + loc.Host; got != e.srv.URL {
		t.Errorf("Location on %s, want %s", got, e.srv.URL)
	}
	if loc.Path != PathPrefix+"/dir with space/f" {
		t.Errorf("Location path %q", loc.Path)
	}
	q := loc.Query()
	if q.Get("data") != "true" || q.Get("user.name") != "alice" || q.Get("permission") != "600" || q.Get("op") != "CREATE" {
		t.Errorf("Location query %v", q)
	}
	if e.mem.Calls("Create") != 0 {
		t.Errorf("the first step created the file")
	}
	// noredirect answers the Location in JSON.
	r = e.do("PUT", "/dir with space/f", "op=CREATE&user.name=alice&noredirect=true", nil)
	if r.status != 200 {
		t.Fatalf("noredirect: %d %s", r.status, r.body)
	}
	jl, _ := r.json(t)["Location"].(string)
	if jl == "" || strings.Contains(jl, "noredirect") || !strings.Contains(jl, "data=true") {
		t.Errorf("noredirect Location %q", jl)
	}
	r = e.doURL("PUT", jl, strings.NewReader("payload"), "")
	if r.status != http.StatusCreated {
		t.Fatalf("data step without Content-Type: %d %s", r.status, r.body)
	}
	st, err := e.fs.Stat(context.Background(), meta.User{Name: "alice"}, "/dir with space/f")
	if err != nil || st.Length != 7 || st.Owner != "alice" || st.UnderConstruction {
		t.Fatalf("after CREATE: %+v, %v", st, err)
	}
	if got := e.get("alice", "/dir with space/f", "").body; string(got) != "payload" {
		t.Errorf("read back %q", got)
	}
	// The first step refuses an existing file without overwrite, and a directory.
	wantError(t, e.do("PUT", "/dir with space/f", "op=CREATE&user.name=alice", nil), http.StatusForbidden, "FileAlreadyExistsException")
	wantError(t, e.do("PUT", "/dir with space", "op=CREATE&overwrite=true&user.name=alice", nil), http.StatusForbidden, "FileAlreadyExistsException")
	// So does the data step when called directly (HttpFS-style one step).
	r = e.do("PUT", "/dir with space/f", "op=CREATE&data=true&user.name=alice", strings.NewReader("x"))
	wantError(t, r, http.StatusForbidden, "FileAlreadyExistsException")
}

func TestAdvertisedLocation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Advertise = "nimbus.example:1234"
	e := newEnv(t, nil, &cfg)
	ctx, u := context.Background(), meta.User{Name: "u"}
	if _, err := e.fs.Create(ctx, u, "/f", meta.CreateOptions{Client: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Complete(ctx, u, "/f", "t"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"op=CREATE&overwrite=true", "op=OPEN", "op=GETFILECHECKSUM", "op=APPEND"} {
		method := map[string]string{"op=OPEN": "GET", "op=GETFILECHECKSUM": "GET", "op=APPEND": "POST"}[q]
		if method == "" {
			method = "PUT"
		}
		r := e.do(method, "/f", q, nil)
		if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "http://nimbus.example:1234/webhdfs/v1/f?") {
			t.Errorf("%s: Location %q", q, loc)
		}
	}
}

// TestChunkedUpload streams a body with no Content-Length through a pipe and
// checks that it reaches the file system in bounded pieces.
func TestChunkedUpload(t *testing.T) {
	e := newEnv(t, nil, nil)
	const size = 1<<20 + 12345
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i % 251)
	}
	for _, ct := range []string{"application/octet-stream", ""} {
		pr, pw := io.Pipe()
		go func() {
			for off := 0; off < size; off += 7000 {
				_, _ = pw.Write(want[off:min(off+7000, size)])
			}
			_ = pw.Close()
		}()
		r := e.doURL("PUT", e.srv.URL+PathPrefix+"/big?op=CREATE&overwrite=true&data=true", pr, ct)
		if r.status != http.StatusCreated {
			t.Fatalf("chunked CREATE (%q): %d %s", ct, r.status, r.body)
		}
		if got := e.get("u", "/big", "").body; !bytes.Equal(got, want) {
			t.Fatalf("content differs: %d bytes back", len(got))
		}
	}
	total := 0
	for _, n := range e.mem.WriteSizes() {
		if n > 64<<10 || n == 0 {
			t.Fatalf("Write of %d bytes", n)
		}
		total += n
	}
	if total != 2*size {
		t.Errorf("wrote %d bytes, want %d", total, 2*size)
	}
}

// TestCreateThenManyAppends is how fsspec writes: CREATE an empty file, then
// POST every buffered block to one reused APPEND data URL.
func TestCreateThenManyAppends(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("u", "/log", "", "")
	r := e.do("POST", "/log", "op=APPEND&user.name=u", nil)
	if r.status != http.StatusTemporaryRedirect {
		t.Fatalf("APPEND step 1: %d %s", r.status, r.body)
	}
	loc := r.header.Get("Location")
	var want strings.Builder
	for i := 0; i < 4; i++ {
		part := strings.Repeat(string(rune('a'+i)), 1000*(i+1))
		want.WriteString(part)
		r := e.doURL("POST", loc, strings.NewReader(part), "application/octet-stream")
		if r.status != 200 {
			t.Fatalf("append %d: %d %s", i, r.status, r.body)
		}
	}
	if got := string(e.get("u", "/log", "").body); got != want.String() {
		t.Errorf("content %d bytes, want %d", len(got), want.Len())
	}
	// noredirect works for APPEND too.
	r = e.do("POST", "/log", "op=APPEND&noredirect=true", nil)
	if r.status != 200 || r.json(t)["Location"] == nil {
		t.Errorf("APPEND noredirect: %d %s", r.status, r.body)
	}
	wantError(t, e.do("POST", "/nope", "op=APPEND", nil), 404, "FileNotFoundException")
}

// TestConcurrentWriterGetsLeaseError holds one upload open and checks that a
// second writer is refused while it lasts.
func TestConcurrentWriterGetsLeaseError(t *testing.T) {
	e := newEnv(t, nil, nil)
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	var first resp
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = e.doURL("PUT", e.srv.URL+PathPrefix+"/f?op=CREATE&data=true&user.name=u", pr, "")
	}()
	if _, err := pw.Write([]byte(strings.Repeat("x", 70000))); err != nil {
		t.Fatal(err)
	}
	// Wait until the server has written the first chunk: the lease is held.
	for e.mem.Calls("Write") == 0 {
		time.Sleep(time.Millisecond)
	}
	r := e.do("PUT", "/f", "op=CREATE&data=true&overwrite=true&user.name=u", strings.NewReader("y"))
	wantError(t, r, http.StatusForbidden, "AlreadyBeingCreatedException")
	r = e.do("POST", "/f", "op=APPEND&data=true&user.name=u", strings.NewReader("y"))
	wantError(t, r, http.StatusForbidden, "AlreadyBeingCreatedException")
	_ = pw.Close()
	wg.Wait()
	if first.status != http.StatusCreated {
		t.Fatalf("first writer: %d %s", first.status, first.body)
	}
	if got := e.get("u", "/f", "").body; len(got) != 70000 {
		t.Errorf("file has %d bytes", len(got))
	}
}

func TestFailedCreateLeavesNothing(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do("PUT", "/huge", "op=CREATE&data=true", bytes.NewReader(make([]byte, 5<<20)))
	wantError(t, r, http.StatusForbidden, "IOException")
	if _, err := e.fs.Stat(context.Background(), meta.User{Name: "root"}, "/huge"); meta.KindOf(err) != meta.KindNotFound {
		t.Errorf("a failed upload left a file: %v", err)
	}
	// A failed append keeps the old content and releases the lease.
	e.put("u", "/a", "old", "")
	r = e.do("POST", "/a", "op=APPEND&data=true&user.name=u", bytes.NewReader(make([]byte, 5<<20)))
	wantError(t, r, http.StatusForbidden, "IOException")
	r = e.do("POST", "/a", "op=APPEND&data=true&user.name=u", strings.NewReader("new"))
	if r.status != 200 {
		t.Fatalf("append after a failed one: %d %s", r.status, r.body)
	}
	if got := string(e.get("u", "/a", "").body); !strings.HasPrefix(got, "old") || !strings.HasSuffix(got, "new") {
		t.Errorf("content %q...", got[:min(len(got), 10)])
	}
}

func TestNamespaceOps(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx, root := context.Background(), meta.User{Name: "root"}
	boolOf := func(r resp) any { return r.json(t)["boolean"] }

	if b := boolOf(e.do("PUT", "/m/n/o", "op=MKDIRS&permission=700&user.name=alice", nil)); b != true {
		t.Errorf("MKDIRS %v", b)
	}
	if st, _ := e.fs.Stat(ctx, root, "/m/n/o"); st == nil || st.Perm != 0o700 || st.Owner != "alice" {
		t.Errorf("mkdirs result %+v", st)
	}
	e.put("alice", "/m/f", "0123456789", "")
	wantError(t, e.do("PUT", "/m/f/sub", "op=MKDIRS&user.name=root", nil), http.StatusForbidden, "ParentNotDirectoryException")
	wantError(t, e.do("PUT", "/m/f", "op=MKDIRS&user.name=root", nil), http.StatusForbidden, "FileAlreadyExistsException")

	// SETPERMISSION, SETOWNER, SETTIMES, SETREPLICATION.
	if r := e.do("PUT", "/m/f", "op=SETPERMISSION&permission=1751&user.name=alice", nil); r.status != 200 {
		t.Errorf("SETPERMISSION %d %s", r.status, r.body)
	}
	wantError(t, e.do("PUT", "/m/f", "op=SETPERMISSION&permission=999&user.name=alice", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/m/f", "op=SETPERMISSION&permission=600&user.name=bob", nil), 403, "AccessControlException")
	wantError(t, e.do("PUT", "/m/f", "op=SETOWNER&user.name=alice", nil), 400, "IllegalArgumentException")
	if r := e.do("PUT", "/m/f", "op=SETOWNER&owner=bob&group=staff&user.name=root", nil); r.status != 200 {
		t.Errorf("SETOWNER %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/m/f", "op=SETTIMES&modificationtime=1000&user.name=root", nil); r.status != 200 {
		t.Errorf("SETTIMES %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/m/f", "op=SETREPLICATION&replication=5&user.name=root", nil); boolOf(r) != true {
		t.Errorf("SETREPLICATION %s", r.body)
	}
	if r := e.do("PUT", "/m", "op=SETREPLICATION&replication=5&user.name=root", nil); boolOf(r) != false {
		t.Errorf("SETREPLICATION on a directory %s", r.body)
	}
	st, _ := e.fs.Stat(ctx, root, "/m/f")
	if st.Perm != 0o1751 || st.Owner != "bob" || st.Group != "staff" || st.Mtime != 1000 || st.Replication != 5 {
		t.Errorf("after setters: %+v", st)
	}
	js := e.do("GET", "/m/f", "op=GETFILESTATUS&user.name=root", nil).json(t)["FileStatus"].(map[string]any)
	if js["permission"] != "1751" {
		t.Errorf("permission rendered %v", js["permission"])
	}

	// TRUNCATE and CONCAT.
	if r := e.do("POST", "/m/f", "op=TRUNCATE&newlength=4&user.name=root", nil); boolOf(r) != true {
		t.Errorf("TRUNCATE %s", r.body)
	}
	wantError(t, e.do("POST", "/m/f", "op=TRUNCATE&user.name=root", nil), 400, "IllegalArgumentException")
	e.put("alice", "/m/g", "abc", "")
	e.put("alice", "/m/h", "def", "")
	if r := e.do("POST", "/m/f", "op=CONCAT&sources=/m/g,/m/h&user.name=root", nil); r.status != 200 {
		t.Errorf("CONCAT %d %s", r.status, r.body)
	}
	if got := string(e.get("root", "/m/f", "").body); got != "0123abcdef" {
		t.Errorf("after truncate+concat: %q", got)
	}

	// RENAME: rename1 answers booleans, rename2 exceptions.
	if r := e.do("PUT", "/m/f", "op=RENAME&destination=/m/n/f2&user.name=root", nil); boolOf(r) != true {
		t.Errorf("RENAME %s", r.body)
	}
	if r := e.do("PUT", "/m/f", "op=RENAME&destination=/m/x&user.name=root", nil); boolOf(r) != false {
		t.Errorf("RENAME of a missing source %s", r.body)
	}
	e.put("alice", "/m/y", "y", "")
	if r := e.do("PUT", "/m/y", "op=RENAME&destination=/m/n/f2&user.name=root", nil); boolOf(r) != false {
		t.Errorf("RENAME onto an existing file %s", r.body)
	}
	if r := e.do("PUT", "/m", "op=RENAME&destination=/m/n/inside&user.name=root", nil); boolOf(r) != false {
		t.Errorf("RENAME into itself %s", r.body)
	}
	wantError(t, e.do("PUT", "/m/y", "op=RENAME&destination=/m/n/f2&renameoptions=NONE&user.name=root", nil), 403, "FileAlreadyExistsException")
	if r := e.do("PUT", "/m/y", "op=RENAME&destination=/m/n/f2&renameoptions=OVERWRITE&user.name=root", nil); r.status != 200 {
		t.Errorf("RENAME OVERWRITE %d %s", r.status, r.body)
	}
	if got := string(e.get("root", "/m/n/f2", "").body); got != "y" {
		t.Errorf("after rename overwrite: %q", got)
	}
	wantError(t, e.do("PUT", "/m/y", "op=RENAME&user.name=root", nil), 400, "IllegalArgumentException")

	// DELETE.
	wantError(t, e.do("DELETE", "/m", "op=DELETE&user.name=root", nil), 403, "PathIsNotEmptyDirectoryException")
	if r := e.do("DELETE", "/m", "op=DELETE&recursive=true&user.name=root", nil); boolOf(r) != true {
		t.Errorf("DELETE recursive %s", r.body)
	}
	if r := e.do("DELETE", "/m", "op=DELETE&recursive=true&user.name=root", nil); boolOf(r) != false {
		t.Errorf("DELETE of a missing path %s", r.body)
	}
	if r := e.do("DELETE", "/", "op=DELETE&recursive=true&user.name=root", nil); boolOf(r) != false {
		t.Errorf("DELETE of the root %s", r.body)
	}
}

func TestDoas(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("root", "/f1", "x", "doas=alice")
	st, err := e.fs.Stat(context.Background(), meta.User{Name: "root"}, "/f1")
	if err != nil || st.Owner != "alice" {
		t.Fatalf("doas by the superuser: %+v %v", st, err)
	}
	wantError(t, e.do("PUT", "/f2", "op=CREATE&user.name=bob&doas=alice", nil), 403, "AccessControlException")
	wantError(t, e.do("PUT", "/d", "op=MKDIRS&doas=alice", nil), 403, "AccessControlException") // dr.who
	// doas naming oneself is no impersonation.
	if r := e.do("PUT", "/d", "op=MKDIRS&user.name=bob&doas=bob", nil); r.status != 200 {
		t.Errorf("doas self: %d %s", r.status, r.body)
	}
	// Absent user.name is the anonymous user.
	e.put("", "/anon", "x", "")
	st, _ = e.fs.Stat(context.Background(), meta.User{Name: "root"}, "/anon")
	if st == nil || st.Owner != "dr.who" {
		t.Errorf("anonymous owner %+v", st)
	}
	wantError(t, e.do("GET", "/", "op=GETFILESTATUS&user.name=bad/name", nil), 400, "IllegalArgumentException")
}

// TestCreateFlagAndLookupsThroughFiles covers two things Hadoop's client
// relies on: createflag=CREATE,OVERWRITE (createNonRecursive) and lookups
// below a file answering "not found" (exists() must be false, not fail).
func TestCreateFlagAndLookupsThroughFiles(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("u", "/f", "v1", "")
	wantError(t, e.do("PUT", "/f", "op=CREATE&createflag=CREATE&user.name=u", nil), 403, "FileAlreadyExistsException")
	e.put("u", "/f", "v2", "createflag=CREATE,OVERWRITE&overwrite=false&createparent=false")
	if got := string(e.get("u", "/f", "").body); got != "v2" {
		t.Errorf("after createflag OVERWRITE: %q", got)
	}
	wantError(t, e.do("PUT", "/f", "op=CREATE&createflag=BOGUS", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/nodir/g", "op=CREATE&data=true&createparent=false&user.name=u", strings.NewReader("x")), 404, "FileNotFoundException")

	for _, op := range []string{"GETFILESTATUS", "LISTSTATUS", "GETCONTENTSUMMARY", "OPEN"} {
		wantError(t, e.do("GET", "/f/child", "op="+op, nil), 404, "FileNotFoundException")
	}
	wantError(t, e.do("PUT", "/f/child", "op=MKDIRS&user.name=u", nil), 403, "ParentNotDirectoryException")
	if r := e.do("DELETE", "/f/child", "op=DELETE&user.name=u", nil); r.json(t)["boolean"] != false {
		t.Errorf("DELETE below a file: %s", r.body)
	}
}
