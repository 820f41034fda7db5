package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

func checkAppendJSON(t *testing.T, f FileStatus) {
	t.Helper()
	want, err := json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func TestAppendJSON(t *testing.T) {
	checkAppendJSON(t, FileStatus{})
	checkAppendJSON(t, FileStatus{AccessTime: -1, BlockSize: 134217728, ChildrenNum: 3, FileID: 1<<64 - 1, Group: "supergroup",
		Length: 42, ModificationTime: 1795400000000, Owner: "alice", PathSuffix: "part-00000.snappy.parquet",
		Permission: "1777", Replication: 3, StoragePolicy: -7, Symlink: "/target", Type: "SYMLINK"})
	checkAppendJSON(t, FileStatus{PathSuffix: "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029é\xff\xfe日本", Type: "FILE"})
}

// FuzzAppendJSON: for any field values the hand-written encoder writes the
// same bytes as encoding/json.
func FuzzAppendJSON(f *testing.F) {
	f.Add(int64(1), int64(2), uint64(3), "owner", "group", "name\n<&>", "755", uint16(3), 0, "", "FILE")
	f.Add(int64(-1), int64(0), uint64(0), "\xff", "\u2028", "é", "", uint16(0), -1, "/x", "SYMLINK")
	f.Fuzz(func(t *testing.T, atime, length int64, id uint64, owner, group, suffix, perm string, repl uint16, policy int, symlink, typ string) {
		checkAppendJSON(t, FileStatus{AccessTime: atime, BlockSize: length ^ atime, ChildrenNum: length, FileID: id, Group: group,
			Length: length, ModificationTime: atime + 1, Owner: owner, PathSuffix: suffix, Permission: perm,
			Replication: repl, StoragePolicy: policy, Symlink: symlink, Type: typ})
	})
}

func TestAppendDirectoryListing(t *testing.T) {
	for _, entries := range [][]FileStatus{
		{},
		{{PathSuffix: "a", Type: "FILE", Permission: "644"}},
		{{PathSuffix: "a", Type: "FILE"}, {PathSuffix: "d<>", Type: "DIRECTORY", ChildrenNum: 7}, {PathSuffix: "l", Symlink: "/t", Type: "SYMLINK"}},
	} {
		var r DirectoryListingReply
		r.DirectoryListing.PartialListing.FileStatuses.FileStatus = entries
		r.DirectoryListing.RemainingEntries = int64(len(entries)) * 1000
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendDirectoryListing(nil, entries, r.DirectoryListing.RemainingEntries); !bytes.Equal(got, want) {
			t.Fatalf("AppendDirectoryListing differs from encoding/json:\n got %s\nwant %s", got, want)
		}
	}
}
