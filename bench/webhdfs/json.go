package webhdfs

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
)

// fileStatus is WebHDFS's FileStatus object.
type fileStatus struct {
	AccessTime       int64  `json:"accessTime"`
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
	Symlink          string `json:"symlink"`
	Type             string `json:"type"`
}

func (f *fileStatus) toMeta(path string) meta.FileStatus {
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

type statusReply struct {
	FileStatus fileStatus `json:"FileStatus"`
}

type listReply struct {
	FileStatuses struct {
		FileStatus []fileStatus `json:"FileStatus"`
	} `json:"FileStatuses"`
}

type batchReply struct {
	DirectoryListing struct {
		PartialListing struct {
			FileStatuses struct {
				FileStatus []fileStatus `json:"FileStatus"`
			} `json:"FileStatuses"`
		} `json:"partialListing"`
		RemainingEntries int64 `json:"remainingEntries"`
	} `json:"DirectoryListing"`
}

type boolReply struct {
	Boolean bool `json:"boolean"`
}

type summaryReply struct {
	ContentSummary struct {
		DirectoryCount int64 `json:"directoryCount"`
		FileCount      int64 `json:"fileCount"`
		Length         int64 `json:"length"`
		Quota          int64 `json:"quota"`
		SpaceConsumed  int64 `json:"spaceConsumed"`
		SpaceQuota     int64 `json:"spaceQuota"`
	} `json:"ContentSummary"`
}

type defaultsReply struct {
	FsServerDefaults struct {
		BlockSize   int64  `json:"blockSize"`
		Replication uint16 `json:"replication"`
	} `json:"FsServerDefaults"`
}

func decodeJSON(r io.Reader, out any) error {
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return fmt.Errorf("webhdfs: bad JSON reply: %w", err)
	}
	return nil
}
