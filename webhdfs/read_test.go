package webhdfs

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestFileStatusFields(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("alice", "/d/f.txt", "hello", "permission=640&replication=2&blocksize=1048576")
	r := e.do("GET", "/d/f.txt", "op=GETFILESTATUS&user.name=alice", nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	fs := r.json(t)["FileStatus"].(map[string]any)
	var keys []string
	for k := range fs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"accessTime", "blockSize", "childrenNum", "fileId", "group", "length", "modificationTime",
		"owner", "pathSuffix", "permission", "replication", "storagePolicy", "type"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	checks := map[string]any{"type": "FILE", "length": 5.0, "owner": "alice", "permission": "640",
		"replication": 2.0, "blockSize": 1048576.0, "pathSuffix": ""}
	for k, v := range checks {
		if fs[k] != v {
			t.Errorf("%s = %v, want %v", k, fs[k], v)
		}
	}
	d := e.do("GET", "/d", "op=GETFILESTATUS", nil).json(t)["FileStatus"].(map[string]any)
	if d["type"] != "DIRECTORY" || d["childrenNum"] != 1.0 || d["permission"] != "755" || d["length"] != 0.0 {
		t.Errorf("directory status %v", d)
	}
}

func TestSymlinkStatus(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("alice", "/f", "x", "")
	r := e.do("PUT", "/links/l", "op=CREATESYMLINK&destination=/f&createParent=true&user.name=alice", nil)
	if r.status != 200 {
		t.Fatalf("CREATESYMLINK: %d %s", r.status, r.body)
	}
	st := e.do("GET", "/links/l", "op=GETFILESTATUS", nil).json(t)["FileStatus"].(map[string]any)
	if st["type"] != "SYMLINK" || st["symlink"] != "/f" {
		t.Errorf("symlink status %v", st)
	}
	lt := e.do("GET", "/links/l", "op=GETLINKTARGET", nil).json(t)
	if lt["Path"] != "/f" {
		t.Errorf("GETLINKTARGET %v", lt)
	}
	wantError(t, e.do("GET", "/links/l", "op=OPEN", nil), http.StatusForbidden, "UnresolvedLinkException")
}

func TestListStatusPagesThroughEverything(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListBatch = 3
	e := newEnv(t, nil, &cfg)
	var want []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("f%02d", i)
		want = append(want, name)
		e.put("u", "/dir/"+name, name, "")
	}
	e.do("PUT", "/dir/sub", "op=MKDIRS&user.name=u", nil)
	want = append(want, "sub")
	r := e.do("GET", "/dir", "op=LISTSTATUS", nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	list := r.json(t)["FileStatuses"].(map[string]any)["FileStatus"].([]any)
	var got []string
	for _, s := range list {
		got = append(got, s.(map[string]any)["pathSuffix"].(string))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if n := e.mem.Calls("List"); n < 4 {
		t.Errorf("List called %d times; pages of 3 need at least 4", n)
	}
	// Listing a file gives the file itself with an empty suffix.
	r = e.do("GET", "/dir/f01", "op=LISTSTATUS", nil)
	list = r.json(t)["FileStatuses"].(map[string]any)["FileStatus"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["pathSuffix"] != "" || list[0].(map[string]any)["type"] != "FILE" {
		t.Errorf("listing a file: %s", r.body)
	}
	// An empty directory is an empty array, not null.
	e.do("PUT", "/empty", "op=MKDIRS", nil)
	r = e.do("GET", "/empty", "op=LISTSTATUS", nil)
	if !bytes.Contains(r.body, []byte(`"FileStatus":[]`)) {
		t.Errorf("empty listing %s", r.body)
	}
	wantError(t, e.do("GET", "/nope", "op=LISTSTATUS", nil), 404, "FileNotFoundException")
}

func TestListStatusBatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListBatch = 2
	e := newEnv(t, nil, &cfg)
	for i := 0; i < 5; i++ {
		e.put("u", fmt.Sprintf("/b/f%d", i), "", "")
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		q := "op=LISTSTATUS_BATCH"
		if after != "" {
			q += "&startAfter=" + url.QueryEscape(after)
		}
		r := e.do("GET", "/b", q, nil)
		dl := r.json(t)["DirectoryListing"].(map[string]any)
		entries := dl["partialListing"].(map[string]any)["FileStatuses"].(map[string]any)["FileStatus"].([]any)
		for _, s := range entries {
			got = append(got, s.(map[string]any)["pathSuffix"].(string))
		}
		rem := dl["remainingEntries"].(float64)
		if want := float64(5 - len(got)); rem != want {
			t.Fatalf("remainingEntries %v after %v, want %v", rem, got, want)
		}
		if rem == 0 {
			break
		}
		after = got[len(got)-1]
	}
	if strings.Join(got, ",") != "f0,f1,f2,f3,f4" {
		t.Errorf("got %v", got)
	}
}

func TestOpenOffsetLength(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReadChunk = 1000
	e := newEnv(t, nil, &cfg)
	data := make([]byte, 5500)
	for i := range data {
		data[i] = byte(i * 7)
	}
	e.put("u", "/f", string(data), "")
	cases := []struct {
		q          string
		start, end int
	}{
		{"", 0, 5500},
		{"offset=0&length=0", 0, 0},
		{"offset=100", 100, 5500},
		{"offset=999&length=2", 999, 1001},
		{"offset=1000&length=3000", 1000, 4000},
		{"offset=5000&length=99999", 5000, 5500},
		{"offset=5500", 5500, 5500},
	}
	for _, c := range cases {
		r := e.get("u", "/f", c.q)
		if r.status != 200 {
			t.Fatalf("%s: status %d %s", c.q, r.status, r.body)
		}
		if !bytes.Equal(r.body, data[c.start:c.end]) {
			t.Errorf("%s: got %d bytes, want [%d:%d]", c.q, len(r.body), c.start, c.end)
		}
		if r.header.Get("Content-Length") != fmt.Sprint(c.end-c.start) {
			t.Errorf("%s: Content-Length %q", c.q, r.header.Get("Content-Length"))
		}
	}
	for _, n := range e.mem.ReadLengths() {
		if n > 1000 {
			t.Errorf("Read of %d bytes: larger than ReadChunk", n)
		}
	}
	wantError(t, e.get("u", "/f", "offset=5501"), http.StatusForbidden, "EOFException")
	wantError(t, e.get("u", "/f", "offset=-1"), http.StatusBadRequest, "IllegalArgumentException")
	wantError(t, e.get("u", "/f", "length=abc"), http.StatusBadRequest, "IllegalArgumentException")
	e.do("PUT", "/dir", "op=MKDIRS", nil)
	wantError(t, e.get("u", "/dir", ""), http.StatusNotFound, "FileNotFoundException")
	wantError(t, e.get("u", "/missing", ""), http.StatusNotFound, "FileNotFoundException")
}

// OPEN checks read permission even when there is nothing to send: HDFS
// answers 403 for a 0-byte file, length=0 or an offset at the end alike.
func TestOpenChecksPermissionWhenNothingToRead(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("u", "/empty", "", "permission=600")
	e.put("u", "/f", "abc", "permission=600")
	cases := []struct{ path, q string }{{"/empty", ""}, {"/f", "length=0"}, {"/f", "offset=3"}}
	for _, c := range cases {
		wantError(t, e.get("eve", c.path, c.q), http.StatusForbidden, "AccessControlException")
		if r := e.get("u", c.path, c.q); r.status != 200 || len(r.body) != 0 {
			t.Errorf("owner: OPEN %s %s: status %d, %d bytes; want 200 and none", c.path, c.q, r.status, len(r.body))
		}
	}
}

func TestContentSummaryAndFriends(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("u", "/a/x", "12345", "replication=2")
	e.put("u", "/a/b/y", "123", "replication=1")
	if r := e.do("PUT", "/a", "op=SETQUOTA&namespacequota=100&user.name=root", nil); r.status != 200 {
		t.Fatalf("SETQUOTA: %d %s", r.status, r.body)
	}
	wantError(t, e.do("PUT", "/a", "op=SETQUOTA&namespacequota=100&user.name=u", nil), 403, "AccessControlException")
	wantError(t, e.do("PUT", "/a", "op=SETQUOTA&namespacequota=0&user.name=root", nil), 400, "IllegalArgumentException")
	cs := e.do("GET", "/a", "op=GETCONTENTSUMMARY", nil).json(t)["ContentSummary"].(map[string]any)
	want := map[string]float64{"directoryCount": 2, "fileCount": 2, "length": 8, "quota": 100, "spaceConsumed": 13, "spaceQuota": -1}
	for k, v := range want {
		if cs[k] != v {
			t.Errorf("ContentSummary.%s = %v, want %v", k, cs[k], v)
		}
	}
	qu := e.do("GET", "/a", "op=GETQUOTAUSAGE", nil).json(t)["QuotaUsage"].(map[string]any)
	if qu["fileAndDirectoryCount"] != 4.0 || qu["spaceConsumed"] != 13.0 {
		t.Errorf("QuotaUsage %v", qu)
	}
	if p := e.do("GET", "/", "op=GETHOMEDIRECTORY&user.name=carol", nil).json(t)["Path"]; p != "/user/carol" {
		t.Errorf("home %v", p)
	}
	if p := e.do("GET", "/", "op=GETHOMEDIRECTORY", nil).json(t)["Path"]; p != "/user/dr.who" {
		t.Errorf("anonymous home %v", p)
	}
	sd := e.do("GET", "/", "op=GETSERVERDEFAULTS", nil).json(t)["FsServerDefaults"].(map[string]any)
	if sd["blockSize"] != float64(128<<20) || sd["replication"] != 3.0 || sd["bytesPerChecksum"] != 512.0 || sd["checksumType"] != 2.0 {
		t.Errorf("server defaults %v", sd)
	}
	st := e.do("GET", "/", "op=GETSTATUS", nil).json(t)["FsStatus"].(map[string]any)
	if st["used"] != 13.0 {
		t.Errorf("FsStatus %v", st)
	}
}

func TestBlockLocations(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put("u", "/f", strings.Repeat("z", 2500), "blocksize=1024")
	r := e.do("GET", "/f", "op=GETFILEBLOCKLOCATIONS&offset=0&length=2500", nil)
	locs := r.json(t)["BlockLocations"].(map[string]any)["BlockLocation"].([]any)
	if len(locs) != 3 {
		t.Fatalf("%d blocks: %s", len(locs), r.body)
	}
	for i, want := range [][2]float64{{0, 1024}, {1024, 1024}, {2048, 452}} {
		l := locs[i].(map[string]any)
		if l["offset"] != want[0] || l["length"] != want[1] {
			t.Errorf("block %d: %v", i, l)
		}
		host := strings.Split(strings.TrimPrefix(e.srv.URL, "http://"), ":")[0]
		if hs := l["hosts"].([]any); len(hs) != 1 || hs[0] != host {
			t.Errorf("block %d hosts %v, want %s", i, hs, host)
		}
	}
	r = e.do("GET", "/f", "op=GETFILEBLOCKLOCATIONS&offset=1500&length=10", nil)
	locs = r.json(t)["BlockLocations"].(map[string]any)["BlockLocation"].([]any)
	if len(locs) != 1 || locs[0].(map[string]any)["offset"] != 1024.0 {
		t.Errorf("range query: %s", r.body)
	}
	r = e.do("GET", "/f", "op=GET_BLOCK_LOCATIONS&offset=0&length=100000", nil)
	lb := r.json(t)["LocatedBlocks"].(map[string]any)
	if lb["fileLength"] != 2500.0 || len(lb["locatedBlocks"].([]any)) != 3 || lb["isUnderConstruction"] != false {
		t.Errorf("LocatedBlocks %s", r.body)
	}
	last := lb["lastLocatedBlock"].(map[string]any)
	if last["startOffset"] != 2048.0 || last["block"].(map[string]any)["numBytes"] != 452.0 {
		t.Errorf("lastLocatedBlock %v", last)
	}
	// An inline file with the default block size is one block.
	e.put("u", "/small", "abc", "")
	r = e.do("GET", "/small", "op=GETFILEBLOCKLOCATIONS", nil)
	if locs = r.json(t)["BlockLocations"].(map[string]any)["BlockLocation"].([]any); len(locs) != 1 {
		t.Errorf("small file: %s", r.body)
	}
	e.put("u", "/empty", "", "")
	r = e.do("GET", "/empty", "op=GETFILEBLOCKLOCATIONS", nil)
	if locs = r.json(t)["BlockLocations"].(map[string]any)["BlockLocation"].([]any); len(locs) != 0 {
		t.Errorf("empty file: %s", r.body)
	}
	e.do("PUT", "/dir", "op=MKDIRS", nil)
	wantError(t, e.do("GET", "/dir", "op=GETFILEBLOCKLOCATIONS", nil), 404, "FileNotFoundException")
}

func TestBlocksOf(t *testing.T) {
	cases := []struct {
		fileLen, bs, off, n int64
		want                []block
	}{
		{0, 10, 0, -1, nil},
		{5, 10, 0, -1, []block{{0, 0, 5}}},
		{20, 10, 0, -1, []block{{0, 0, 10}, {1, 10, 10}}},
		{25, 10, 10, 1, []block{{1, 10, 10}}},
		{25, 10, 9, 2, []block{{0, 0, 10}, {1, 10, 10}}},
		{25, 10, 30, -1, nil},
		{25, 0, 3, 4, []block{{0, 0, 25}}},
	}
	for _, c := range cases {
		if got := blocksOf(c.fileLen, c.bs, c.off, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("blocksOf(%d,%d,%d,%d) = %v, want %v", c.fileLen, c.bs, c.off, c.n, got, c.want)
		}
	}
}

// TestRedirectWithoutHostHeader: an HTTP/1.0 request without Host still gets
// a usable Location (the address the connection arrived on).
func TestRedirectWithoutHostHeader(t *testing.T) {
	e := newEnv(t, nil, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PUT " + PathPrefix + "/f?op=CREATE HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if want := e.srv.URL + PathPrefix + "/f?"; res.StatusCode != 307 || !strings.HasPrefix(res.Header.Get("Location"), want) {
		t.Errorf("status %d, Location %q, want prefix %q", res.StatusCode, res.Header.Get("Location"), want)
	}
}
