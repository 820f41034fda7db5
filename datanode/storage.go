package datanode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/datanode/registry"
)

// A DataNode's storage directory, laid out as HDFS lays out one volume:
//
//	DIR/in_use.lock                          exclusive flock while a DataNode runs on it
//	DIR/current/VERSION                      the DataNode's identity (Version)
//	DIR/current/<block pool>/current/VERSION the block pool's identity
//	DIR/current/<block pool>/current/        blocks/local: finalized/, rbw/, LOCK
//
// The VERSION files are Java properties files, as HDFS writes them.

// LayoutVersion is the DataNode layout this package writes and reads:
// HDFS's -57, block files in finalized/subdir<0-31>/subdir<0-31> by block
// id (blocks/local's layout).
const LayoutVersion = -57

// Errors of the storage directory.
var (
	// ErrOtherCluster: the storage directory belongs to another cluster
	// than the store's.
	ErrOtherCluster = errors.New("datanode: storage directory of another cluster")
	// ErrInUse: another process runs a DataNode on the directory.
	ErrInUse = errors.New("datanode: storage directory in use")
	// ErrBadStorage: the directory is not a DataNode storage directory this
	// DataNode can use (a VERSION file that does not parse, another layout,
	// files where a fresh directory should be empty).
	ErrBadStorage = errors.New("datanode: bad storage directory")
)

// Version is the content of DIR/current/VERSION.
type Version struct {
	StorageID     string // "DS-" + UUID
	ClusterID     string
	CTime         int64
	DataNodeUUID  string
	LayoutVersion int
}

// maxVersionFile bounds what ParseVersion reads: a VERSION file is a few
// hundred bytes.
const maxVersionFile = 64 << 10

// ParseVersion parses a DataNode VERSION file.
func ParseVersion(b []byte) (Version, error) {
	if len(b) > maxVersionFile {
		return Version{}, fmt.Errorf("VERSION of %d bytes", len(b))
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxVersionFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Version{}, fmt.Errorf("line %q is not key=value", line)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return Version{}, err
	}
	if t := props["storageType"]; t != "DATA_NODE" {
		return Version{}, fmt.Errorf("storageType %q, want DATA_NODE", t)
	}
	v := Version{StorageID: props["storageID"], ClusterID: props["clusterID"], DataNodeUUID: props["datanodeUuid"]}
	var err error
	if v.CTime, err = strconv.ParseInt(props["cTime"], 10, 64); err != nil {
		return Version{}, fmt.Errorf("cTime %q", props["cTime"])
	}
	if v.LayoutVersion, err = strconv.Atoi(props["layoutVersion"]); err != nil {
		return Version{}, fmt.Errorf("layoutVersion %q", props["layoutVersion"])
	}
	for name, s := range map[string]string{"storageID": v.StorageID, "clusterID": v.ClusterID, "datanodeUuid": v.DataNodeUUID} {
		if s == "" || len(s) > 255 || strings.ContainsAny(s, "\x00\r\n") {
			return Version{}, fmt.Errorf("%s %q", name, s)
		}
	}
	return v, nil
}

// Format returns the file's bytes, as HDFS writes them.
func (v Version) Format(now time.Time) []byte {
	return fmt.Appendf(nil, "#%s\nstorageID=%s\nclusterID=%s\ncTime=%d\ndatanodeUuid=%s\nstorageType=DATA_NODE\nlayoutVersion=%d\n",
		now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"), v.StorageID, v.ClusterID, v.CTime, v.DataNodeUUID, v.LayoutVersion)
}

// storage is an open, locked storage directory.
type storage struct {
	dir     string
	lock    *os.File
	version Version
	blocks  string      // the block pool's current/ directory, for blocks/local
	ident   os.FileInfo // the VERSION file as opened, to notice a directory removed or replaced
}

func (s *storage) versionPath() string { return filepath.Join(s.dir, "current", "VERSION") }

// openStorage locks dir (creating it if needed) and reads its VERSION file,
// or, for a directory with no current/ (or an empty one), makes a new
// DataNode identity in it. A directory of another cluster than c, of
// another layout, or in use, is refused.
func openStorage(dir string, c registry.Cluster, now time.Time) (_ *storage, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("datanode: storage directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "in_use.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("datanode: storage directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s is locked by another process (%v)", ErrInUse, dir, err)
	}
	s := &storage{dir: dir, lock: f}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	b, err := os.ReadFile(s.versionPath())
	switch {
	case err == nil:
		if s.version, err = ParseVersion(b); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadStorage, s.versionPath(), err)
		}
		if s.version.LayoutVersion != LayoutVersion {
			return nil, fmt.Errorf("%w: %s has layout version %d; this DataNode reads %d", ErrBadStorage, dir, s.version.LayoutVersion, LayoutVersion)
		}
		if s.version.ClusterID != c.ID {
			return nil, fmt.Errorf("%w: %s belongs to cluster %s, and the store is cluster %s: its replicas are none of this cluster's blocks (point --data at another directory, or --store at its own cluster)",
				ErrOtherCluster, dir, s.version.ClusterID, c.ID)
		}
	case errors.Is(err, os.ErrNotExist):
		if entries, rerr := os.ReadDir(filepath.Join(dir, "current")); rerr == nil && len(entries) > 0 {
			return nil, fmt.Errorf("%w: %s has a current/ directory without a VERSION file: not formatting it over what it holds", ErrBadStorage, dir)
		}
		uuid := registry.NewUUID()
		s.version = Version{StorageID: "DS-" + uuid, ClusterID: c.ID, DataNodeUUID: uuid, LayoutVersion: LayoutVersion}
		if err := writeFileSync(s.versionPath(), s.version.Format(now)); err != nil {
			return nil, fmt.Errorf("datanode: storage directory %s: write VERSION: %w", dir, err)
		}
	default:
		return nil, fmt.Errorf("datanode: storage directory %s: %w", dir, err)
	}
	if s.ident, err = os.Stat(s.versionPath()); err != nil {
		return nil, fmt.Errorf("datanode: storage directory %s: %w", dir, err)
	}
	bp := filepath.Join(dir, "current", c.BlockPoolID, "current")
	bpVersion := filepath.Join(bp, "VERSION")
	if _, err := os.Stat(bpVersion); errors.Is(err, os.ErrNotExist) {
		body := fmt.Appendf(nil, "#%s\ncTime=0\nblockpoolID=%s\nlayoutVersion=%d\n", now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"), c.BlockPoolID, LayoutVersion)
		if err := writeFileSync(bpVersion, body); err != nil {
			return nil, fmt.Errorf("datanode: storage directory %s: write the block pool's VERSION: %w", dir, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("datanode: storage directory %s: %w", dir, err)
	}
	s.blocks = bp
	return s, nil
}

// check reports why the directory is no longer the one opened (removed,
// replaced, unreadable); nil while it is.
func (s *storage) check() error {
	fi, err := os.Stat(s.versionPath())
	if err != nil {
		return err
	}
	if !os.SameFile(fi, s.ident) {
		return fmt.Errorf("%s was replaced", s.versionPath())
	}
	return nil
}

func (s *storage) close() {
	if s.lock != nil {
		s.lock.Close() // releases the flock
		s.lock = nil
	}
}

// writeFileSync writes path through a temporary file, fsynced and renamed
// into place, then fsyncs the directory: a crash leaves the old file or
// the new one.
func writeFileSync(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
