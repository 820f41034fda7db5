package wire

import (
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
)

// FileStatus is HdfsFileStatus as JsonUtil.toJsonMap writes it.
type FileStatus struct {
	AccessTime       int64  `json:"accessTime"`
	AclBit           bool   `json:"aclBit,omitempty"` // HDFS writes it only when set
	BlockSize        int64  `json:"blockSize"`
	ChildrenNum      int64  `json:"childrenNum"`
	FileID           uint64 `json:"fileId"`
	Group            string `json:"group"`
	Length           int64  `json:"length"`
	ModificationTime int64  `json:"modificationTime"`
	Owner            string `json:"owner"`
	PathSuffix       string `json:"pathSuffix"`
	Permission       string `json:"permission"`
	Replication      uint16 `json:"replication"`
	StoragePolicy    int    `json:"storagePolicy"`
	Symlink          string `json:"symlink,omitempty"`
	Type             string `json:"type"`
}

// TypeName is the "type" of a FileStatus: FILE, DIRECTORY or SYMLINK.
func TypeName(t meta.FileType) string {
	switch t {
	case meta.TypeDir:
		return "DIRECTORY"
	case meta.TypeSymlink:
		return "SYMLINK"
	}
	return "FILE"
}

// PermString renders a permission as Integer.toOctalString does ("755",
// "1777", "0" for no bits).
func PermString(p meta.Perm) string { return permStrings[p&meta.PermMask] }

// permStrings holds every permission's octal string, so that a listing of a
// thousand entries does not make a thousand of them.
var permStrings = func() (t [meta.PermMask + 1]string) {
	for p := range t {
		t[p] = strconv.FormatUint(uint64(p), 8)
	}
	return t
}()

// FileStatusOf converts st; suffix is the pathSuffix ("" for the status of
// the path asked about, the child's name in a listing).
func FileStatusOf(st *meta.FileStatus, suffix string) FileStatus {
	j := FileStatus{
		AccessTime:       st.Atime,
		ChildrenNum:      st.ChildrenNum,
		FileID:           st.FileID,
		Group:            st.Group,
		ModificationTime: st.Mtime,
		Owner:            st.Owner,
		PathSuffix:       suffix,
		Permission:       PermString(st.Perm),
		Symlink:          st.Symlink,
		Type:             TypeName(st.Type),
		AclBit:           st.AclBit,
	}
	if st.Type == meta.TypeFile {
		j.Length = st.Length
		j.BlockSize = st.BlockSize
		j.Replication = st.Replication
	}
	if st.Type == meta.TypeSymlink {
		j.Length = int64(len(st.Symlink)) // HDFS reports the target's length
	}
	return j
}

// Meta converts f back; path is the full path it describes. WebHDFS carries
// no quotas in a FileStatus, so they are -1; an unreadable permission is 0.
func (f *FileStatus) Meta(path string) meta.FileStatus {
	st := meta.FileStatus{
		Path:        path,
		FileID:      f.FileID,
		Owner:       f.Owner,
		Group:       f.Group,
		Length:      f.Length,
		Replication: f.Replication,
		BlockSize:   f.BlockSize,
		Mtime:       f.ModificationTime,
		Atime:       f.AccessTime,
		ChildrenNum: f.ChildrenNum,
		Symlink:     f.Symlink,
		AclBit:      f.AclBit,
		NsQuota:     -1,
		SpaceQuota:  -1,
	}
	switch f.Type {
	case "DIRECTORY":
		st.Type = meta.TypeDir
	case "SYMLINK":
		st.Type = meta.TypeSymlink
	default:
		st.Type = meta.TypeFile
	}
	if p, err := strconv.ParseUint(f.Permission, 8, 16); err == nil {
		st.Perm = meta.Perm(p) & meta.PermMask
	}
	return st
}

// FileStatusReply is the answer to GETFILESTATUS.
type FileStatusReply struct {
	FileStatus FileStatus `json:"FileStatus"`
}

// FileStatuses is a list of statuses as LISTSTATUS and LISTSTATUS_BATCH
// nest it.
type FileStatuses struct {
	FileStatus []FileStatus `json:"FileStatus"`
}

// ListStatusReply is the answer to LISTSTATUS (the gateway streams it; see
// package webhdfs).
type ListStatusReply struct {
	FileStatuses FileStatuses `json:"FileStatuses"`
}

// DirectoryListing is one page of LISTSTATUS_BATCH.
type DirectoryListing struct {
	PartialListing struct {
		FileStatuses FileStatuses `json:"FileStatuses"`
	} `json:"partialListing"`
	RemainingEntries int64 `json:"remainingEntries"`
}

// DirectoryListingReply is the answer to LISTSTATUS_BATCH.
type DirectoryListingReply struct {
	DirectoryListing DirectoryListing `json:"DirectoryListing"`
}

// ContentSummary is the answer's body for GETCONTENTSUMMARY.
type ContentSummary struct {
	DirectoryCount int64    `json:"directoryCount"`
	ECPolicy       string   `json:"ecPolicy"`
	FileCount      int64    `json:"fileCount"`
	Length         int64    `json:"length"`
	Quota          int64    `json:"quota"`
	SpaceConsumed  int64    `json:"spaceConsumed"`
	SpaceQuota     int64    `json:"spaceQuota"`
	TypeQuota      struct{} `json:"typeQuota"`
}

// ContentSummaryReply is the answer to GETCONTENTSUMMARY.
type ContentSummaryReply struct {
	ContentSummary ContentSummary `json:"ContentSummary"`
}

// BooleanReply is the answer to MKDIRS, RENAME, DELETE, TRUNCATE and the
// other operations that report success as {"boolean": true}.
type BooleanReply struct {
	Boolean bool `json:"boolean"`
}

// RemoteException is the body of every error response.
type RemoteException struct {
	RemoteException struct {
		Exception     string `json:"exception"`     // the simple class name
		JavaClassName string `json:"javaClassName"` // the fully qualified one
		Message       string `json:"message"`
	} `json:"RemoteException"`
}
