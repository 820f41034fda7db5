package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/blocks"
)

// On-disk layout, HDFS's block pool slice:
//
//	dir/rbw/blk_<id>                                   data of a replica being written
//	dir/rbw/blk_<id>_<genstamp>.meta                   its header and checksums
//	dir/finalized/subdir<a>/subdir<b>/blk_<id>         finalized data, a = (id>>16)&31, b = (id>>8)&31
//	dir/finalized/subdir<a>/subdir<b>/blk_<id>_<gs>.meta
//
// The generation stamp is in the meta file's name only, so a new stamp is
// one rename. A replica moves between rbw and finalized by renaming its data
// file, then its meta file, then fsyncing both directories. Open finishes a
// move cut short by a crash in the direction of finalized (see scan.go).
const (
	rbwDir       = "rbw"
	finalizedDir = "finalized"
)

// subdirs returns the finalized sub-directory of a block id (relative).
func subdirs(block uint64) string {
	return filepath.Join(finalizedDir, "subdir"+strconv.FormatUint((block>>16)&31, 10), "subdir"+strconv.FormatUint((block>>8)&31, 10))
}

func dataName(block uint64) string { return "blk_" + strconv.FormatUint(block, 10) }

func metaName(id blocks.ID) string {
	return fmt.Sprintf("blk_%d_%d.meta", id.Block, id.GenStamp)
}

// parseName recognizes blk_<id> (data) and blk_<id>_<gs>.meta (meta).
func parseName(name string) (block, gs uint64, isMeta, ok bool) {
	rest, found := strings.CutPrefix(name, "blk_")
	if !found {
		return 0, 0, false, false
	}
	if m, found := strings.CutSuffix(rest, ".meta"); found {
		b, g, found := strings.Cut(m, "_")
		if !found {
			return 0, 0, false, false
		}
		var err1, err2 error
		block, err1 = strconv.ParseUint(b, 10, 64)
		gs, err2 = strconv.ParseUint(g, 10, 64)
		return block, gs, true, err1 == nil && err2 == nil
	}
	block, err := strconv.ParseUint(rest, 10, 64)
	return block, 0, false, err == nil
}

// syncDir fsyncs a directory so that renames and creations in it are durable.
func (s *Store) syncDir(rel string) error {
	d, err := os.Open(filepath.Join(s.dir, rel))
	if err != nil {
		return err
	}
	err = d.Sync()
	s.m.fsyncs.Inc()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ensureSubdir creates a finalized sub-directory (and makes its creation
// durable) the first time it is needed.
func (s *Store) ensureSubdir(rel string) error {
	s.dirsMu.Lock()
	defer s.dirsMu.Unlock()
	if s.dirs[rel] {
		return nil
	}
	parent := filepath.Dir(rel)
	for _, d := range []string{parent, rel} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o755); err != nil && !os.IsExist(err) {
			return err
		}
	}
	for _, d := range []string{finalizedDir, parent} {
		if err := s.syncDir(d); err != nil {
			return err
		}
	}
	s.dirs[rel] = true
	return nil
}
