package meta

import "fmt"

// FileType is the type of an inode.
type FileType uint8

const (
	TypeFile    FileType = 1
	TypeDir     FileType = 2
	TypeSymlink FileType = 3
)

func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "directory"
	case TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Perm holds POSIX permission bits: rwx for owner, group and other, plus the
// sticky bit (01000). Set-user-ID and set-group-ID are not used, as in HDFS.
// It is as wide as the wire's field (uint32), so that a value above PermMask
// reaches the engine, which rejects it, instead of being cut to its low bits
// by a conversion at an edge (0x101FF would have become 0777).
type Perm uint32

const (
	PermMask    Perm = 0o1777
	StickyBit   Perm = 0o1000
	DefaultDir  Perm = 0o755
	DefaultFile Perm = 0o644
)

// String renders the permission as ls does, e.g. "rwxr-xr-x" or "rwxrwxrwt".
func (p Perm) String() string {
	return Symbolic(0, p)[1:]
}

// Symbolic renders type and permission as `ls -l` does: "drwxr-xr-x".
func Symbolic(t FileType, p Perm) string {
	b := []byte("-rwxrwxrwx")
	switch t {
	case TypeDir:
		b[0] = 'd'
	case TypeSymlink:
		b[0] = 'l'
	}
	for i := 0; i < 9; i++ {
		if p&(1<<uint(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	if p&StickyBit != 0 {
		if b[9] == 'x' {
			b[9] = 't'
		} else {
			b[9] = 'T'
		}
	}
	return string(b)
}

// FileStatus describes one inode, as HDFS's HdfsFileStatus does.
type FileStatus struct {
	Path        string   // full clean path (for listings: the child's path)
	FileID      uint64   // inode id: never changes, never reused
	Type        FileType //
	Perm        Perm     //
	Owner       string   //
	Group       string   //
	Length      int64    // bytes in a file's completed content; 0 for directories
	Replication uint16   // files only
	BlockSize   int64    // files only
	Mtime       int64    // modification time, ms since the Unix epoch
	Atime       int64    // access time, ms since the Unix epoch
	ChildrenNum int64    // directories only: number of entries
	Symlink     string   // symlinks only: the target
	// UnderConstruction is set while a writer holds the file's lease; Length
	// then covers only the content completed before this writer opened it.
	UnderConstruction bool
	NsQuota           int64 // directories: namespace quota, -1 when none
	SpaceQuota        int64 // directories: space quota in bytes, -1 when none
	// AclBit is set when the inode has ACL entries beyond its permission
	// bits (HDFS's aclBit: `ls` shows a '+').
	AclBit bool
}

// Name returns the last component of the status's path.
func (s *FileStatus) Name() string {
	_, n := ParentPath(s.Path)
	return n
}

// IsDir reports whether the inode is a directory.
func (s *FileStatus) IsDir() bool { return s.Type == TypeDir }

// Listing is one page of a directory listing.
type Listing struct {
	Entries []FileStatus // sorted by name (byte order)
	// Remaining is the number of entries after this page; a caller asks for the
	// next page with StartAfter set to the last entry's name.
	Remaining int64
}

// ContentSummary aggregates a subtree, as `hdfs dfs -count -q` and `du` show it.
type ContentSummary struct {
	Length         int64 // bytes in files
	FileCount      int64 // files and symlinks
	DirectoryCount int64 // directories, the root of the summary included
	NsQuota        int64 // -1 when none
	NsConsumed     int64 // inodes below the root, the root included
	SpaceQuota     int64 // -1 when none
	SpaceConsumed  int64 // Length times replication
}

// CreateOptions are the parameters of Create.
type CreateOptions struct {
	Client       string // lease holder: the writing client's name (required; the client fills in its own)
	Perm         Perm   // 0 means DefaultFile
	Overwrite    bool   // replace an existing file (never a directory)
	CreateParent bool   // create missing parent directories, like mkdir -p
	Replication  uint16 // 0 means the server's default
	BlockSize    int64  // 0 means the server's default
	// Unmasked, when HasUnmasked is set, is the mode the client asked for
	// before applying its umask (Perm being the mode after it: HDFS's
	// FsCreateModes, WebHDFS's unmaskedpermission). Under a parent with a
	// default ACL the new file's ACL and mode are computed from Unmasked
	// instead of Perm (HDFS-6962: the default ACL, not the umask, decides);
	// elsewhere it changes nothing.
	Unmasked    Perm
	HasUnmasked bool
}

// RenameOptions are the parameters of Rename.
type RenameOptions struct {
	// Overwrite replaces an existing destination that is a file or an empty
	// directory, as HDFS's rename with OVERWRITE does. Without it, an existing
	// destination directory receives the source inside it (POSIX mv, HDFS
	// rename1 semantics) and an existing destination file is an error.
	Overwrite bool
}

// ServerDefaults are values the server applies when a caller gives none.
type ServerDefaults struct {
	BlockSize        int64
	Replication      uint16
	InlineThreshold  int64 // largest file kept in the metadata store
	LeaseSoftLimitMs int64
	LeaseHardLimitMs int64
}

// FsckReport is the result of checking the namespace invariants in the store.
type FsckReport struct {
	Inodes      int64    // rows reachable from the root, the root included
	Directories int64    //
	Files       int64    //
	Symlinks    int64    //
	Bytes       int64    // completed file content
	DataChunks  int64    // content rows
	Blocks      int64    // block rows
	Problems    []string // one line per broken invariant; empty when clean
}

// Clean reports whether no invariant is broken.
func (r *FsckReport) Clean() bool { return len(r.Problems) == 0 }
