package benchtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// FakeNameNode serves WebHDFS over a metatest.MemFS the way HDFS does:
// CREATE, APPEND and OPEN answer 307 to a "DataNode" URL on the same server
// (which writes under the lease of client "dn"), errors are RemoteException
// JSON, rename and delete answer false rather than fail.
// LISTSTATUS_BATCH pages hold two entries, to exercise paging. It is enough
// for the driver's tests, not a WebHDFS implementation.
type FakeNameNode struct {
	FS        *metatest.MemFS
	Users     atomic.Value // last user.name seen
	DataPuts  atomic.Int64 // CREATE requests that reached the DataNode
	EarlyData atomic.Int64 // CREATE requests to the NameNode that carried data
}

// NewFakeNameNode serves fs.
func NewFakeNameNode(fs *metatest.MemFS) *FakeNameNode { return &FakeNameNode{FS: fs} }

func (f *FakeNameNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f.Users.Store(q.Get("user.name"))
	u := meta.User{Name: q.Get("user.name")}
	if strings.HasPrefix(r.URL.Path, "/datanode") {
		path := strings.TrimPrefix(r.URL.Path, "/datanode")
		switch q.Get("op") {
		case "CREATE":
			f.DataPuts.Add(1)
			data, _ := io.ReadAll(r.Body)
			if _, err := meta.CreateFile(ctx, f.FS, u, path, meta.CreateOptions{Client: "dn", Overwrite: q.Get("overwrite") == "true"}, data); err != nil {
				fail(w, err)
				return
			}
			w.WriteHeader(http.StatusCreated)
		case "APPEND":
			data, _ := io.ReadAll(r.Body)
			st, err := f.FS.Append(ctx, u, path, "dn")
			if err == nil {
				err = f.FS.Write(ctx, u, path, "dn", st.Length, data)
			}
			if err == nil {
				_, err = f.FS.Complete(ctx, u, path, "dn")
			}
			if err != nil {
				fail(w, err)
			}
		case "OPEN":
			off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
			n, _ := strconv.ParseInt(q.Get("length"), 10, 64)
			b, err := f.FS.Read(ctx, u, path, off, n)
			if err != nil {
				fail(w, err)
				return
			}
			w.Write(b)
		}
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/webhdfs/v1")
	reply := func(v any) { json.NewEncoder(w).Encode(v) }
	switch op := q.Get("op"); op {
	case "CREATE", "APPEND", "OPEN":
		if n, _ := io.Copy(io.Discard, r.Body); n > 0 {
			f.EarlyData.Add(1)
		}
		if op != "CREATE" {
			if _, err := f.FS.Stat(ctx, u, path); err != nil {
				fail(w, err)
				return
			}
		}
		w.Header().Set("Location", "http://"+r.Host+"/datanode"+path+"?"+r.URL.RawQuery)
		w.WriteHeader(http.StatusTemporaryRedirect)
	case "GETFILESTATUS":
		st, err := f.FS.Stat(ctx, u, path)
		if err != nil {
			fail(w, err)
			return
		}
		reply(map[string]any{"FileStatus": wire(st, "")})
	case "LISTSTATUS_BATCH":
		l, err := f.FS.List(ctx, u, path, q.Get("startAfter"), 2)
		if err != nil {
			fail(w, err)
			return
		}
		var fs []any
		for i := range l.Entries {
			fs = append(fs, wire(&l.Entries[i], l.Entries[i].Name()))
		}
		reply(map[string]any{"DirectoryListing": map[string]any{
			"partialListing":   map[string]any{"FileStatuses": map[string]any{"FileStatus": fs}},
			"remainingEntries": l.Remaining}})
	case "MKDIRS":
		p, _ := strconv.ParseUint(q.Get("permission"), 8, 16)
		if err := f.FS.Mkdirs(ctx, u, path, meta.Perm(p)); err != nil {
			fail(w, err)
			return
		}
		reply(map[string]bool{"boolean": true})
	case "DELETE":
		err := f.FS.Delete(ctx, u, path, q.Get("recursive") == "true")
		reply(map[string]bool{"boolean": err == nil})
	case "RENAME":
		err := f.FS.Rename(ctx, u, path, q.Get("destination"), meta.RenameOptions{})
		reply(map[string]bool{"boolean": err == nil})
	case "SETPERMISSION":
		p, err := strconv.ParseUint(q.Get("permission"), 8, 16)
		if err != nil {
			fail(w, meta.Errorf("setPermission", path, meta.ErrInvalidArgument, "bad permission"))
			return
		}
		if err := f.FS.SetPermission(ctx, u, path, meta.Perm(p)); err != nil {
			fail(w, err)
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		reply(map[string]any{"RemoteException": map[string]string{"exception": "IllegalArgumentException", "message": "Invalid value for webhdfs parameter \"op\""}})
	}
}

func wire(st *meta.FileStatus, suffix string) map[string]any {
	t := "FILE"
	if st.IsDir() {
		t = "DIRECTORY"
	}
	return map[string]any{"pathSuffix": suffix, "type": t, "length": st.Length, "fileId": st.FileID,
		"permission": strconv.FormatUint(uint64(st.Perm), 8), "childrenNum": st.ChildrenNum, "owner": "o", "group": "g"}
}

func fail(w http.ResponseWriter, err error) {
	names := map[meta.Kind]string{meta.KindNotFound: "FileNotFoundException", meta.KindExists: "FileAlreadyExistsException",
		meta.KindNotDir: "ParentNotDirectoryException", meta.KindNotEmpty: "PathIsNotEmptyDirectoryException"}
	name, ok := names[meta.KindOf(err)]
	if !ok {
		name = "IOException"
	}
	w.WriteHeader(http.StatusForbidden)
	json.NewEncoder(w).Encode(map[string]any{"RemoteException": map[string]string{"exception": name, "javaClassName": "x." + name, "message": err.Error()}})
}
