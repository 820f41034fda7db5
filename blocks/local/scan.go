package local

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nimbus-fs/nimbus/blocks"
)

// found is what scan saw of one block id.
type found struct {
	rbwData, finData bool
	rbwMeta, finMeta []uint64 // generation stamps of the meta files seen
	finDir           string   // relative finalized sub-directory it was seen in
}

// scan loads the replicas on disk into the map. It repairs what a crash
// can leave:
//
//   - data finalized, meta still in rbw: Finalize/Recover/Truncate had
//     synced everything before the first rename, so the move is finished;
//   - data in rbw, meta still finalized: OpenAppend/Truncate had not started
//     changing bytes, so the replica goes back to finalized, unchanged;
//   - several meta files for one block: the highest generation stamp wins;
//   - a data file without a meta file or the reverse (a crash inside Create
//     or Delete, which never synced), and *.tmp files: removed.
//
// Being-written replicas are verified (read once) to learn their length.
func (s *Store) scan() error {
	for _, d := range []string{rbwDir, finalizedDir} {
		if s.cfg.ReadOnly {
			if _, err := os.Stat(filepath.Join(s.dir, d)); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	all := map[uint64]*found{}
	get := func(b uint64) *found {
		if all[b] == nil {
			all[b] = &found{}
		}
		return all[b]
	}
	visit := func(rel string, fin bool) error {
		ents, err := os.ReadDir(filepath.Join(s.dir, rel))
		if err != nil {
			return err
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() {
				continue
			}
			block, gs, isMeta, ok := parseName(name)
			if !ok {
				if strings.HasSuffix(name, ".tmp") && !s.cfg.ReadOnly {
					s.log.Warn("blocks/local: removing temporary file", "file", filepath.Join(rel, name))
					os.Remove(filepath.Join(s.dir, rel, name))
				}
				continue
			}
			f := get(block)
			switch {
			case fin && isMeta:
				f.finMeta, f.finDir = append(f.finMeta, gs), rel
			case fin:
				f.finData, f.finDir = true, rel
			case isMeta:
				f.rbwMeta = append(f.rbwMeta, gs)
			default:
				f.rbwData = true
			}
		}
		return nil
	}
	if err := visit(rbwDir, false); err != nil {
		return err
	}
	outer, err := os.ReadDir(filepath.Join(s.dir, finalizedDir))
	if err != nil {
		return err
	}
	for _, a := range outer {
		if !a.IsDir() {
			continue
		}
		inner, err := os.ReadDir(filepath.Join(s.dir, finalizedDir, a.Name()))
		if err != nil {
			return err
		}
		for _, b := range inner {
			if !b.IsDir() {
				continue
			}
			rel := filepath.Join(finalizedDir, a.Name(), b.Name())
			s.dirs[rel] = true
			if err := visit(rel, true); err != nil {
				return err
			}
		}
	}
	blockIDs := make([]uint64, 0, len(all))
	for b := range all {
		blockIDs = append(blockIDs, b)
	}
	slices.Sort(blockIDs)
	var errs []error
	for _, b := range blockIDs {
		if err := s.load(b, all[b]); err != nil {
			errs = append(errs, fmt.Errorf("block %d: %w", b, err))
		}
	}
	return errors.Join(errs...)
}

// load reconciles and loads one block id's files.
func (s *Store) load(block uint64, f *found) error {
	if f.finDir != "" && f.finDir != subdirs(block) {
		s.log.Warn("blocks/local: replica in the wrong sub-directory, left alone", "block", block, "dir", f.finDir)
		return nil
	}
	sub := subdirs(block)
	keep := func(dir string, gss []uint64) uint64 { // highest stamp; remove the others
		slices.SortFunc(gss, func(a, b uint64) int { return cmp.Compare(b, a) })
		for _, gs := range gss[1:] {
			if s.cfg.ReadOnly {
				break
			}
			s.log.Warn("blocks/local: removing stale meta file", "block", block, "genstamp", gs)
			os.Remove(filepath.Join(s.dir, dir, metaName(blocks.ID{Block: block, GenStamp: gs})))
		}
		return gss[0]
	}
	var err error
	switch {
	case s.cfg.ReadOnly:
		// Nothing is repaired: a half-moved replica is left out below.
	case f.finData && len(f.finMeta) == 0 && len(f.rbwMeta) > 0 && !f.rbwData:
		gs := keep(rbwDir, f.rbwMeta)
		id := blocks.ID{Block: block, GenStamp: gs}
		s.log.Info("blocks/local: finishing an interrupted finalize", "block", block, "genstamp", gs)
		if err := s.rename(rbwDir, sub, metaName(id), metaName(id)); err != nil {
			return err
		}
		f.finMeta, f.rbwMeta = []uint64{gs}, nil
		err = errors.Join(s.syncDir(sub), s.syncDir(rbwDir))
	case f.rbwData && len(f.rbwMeta) == 0 && len(f.finMeta) > 0 && !f.finData:
		s.log.Info("blocks/local: undoing an interrupted move to rbw", "block", block)
		if err := s.rename(rbwDir, sub, dataName(block), dataName(block)); err != nil {
			return err
		}
		f.finData, f.rbwData = true, false
		err = errors.Join(s.syncDir(sub), s.syncDir(rbwDir))
	}
	if err != nil {
		return err
	}
	switch {
	case f.finData && len(f.finMeta) > 0:
		gs := keep(sub, f.finMeta)
		s.removeRBW(block, f)
		fi, err := os.Stat(filepath.Join(s.dir, sub, dataName(block)))
		if err != nil {
			return err
		}
		id := blocks.ID{Block: block, GenStamp: gs}
		if mi, err := os.Stat(filepath.Join(s.dir, sub, metaName(id))); err != nil || mi.Size() != metaSize(fi.Size()) {
			s.log.Warn("blocks/local: meta file size does not match the data; reads will report corruption", "block", block)
		}
		s.mu.replicas[block] = &replica{id: id, state: blocks.Finalized, length: fi.Size()}
	case f.rbwData && len(f.rbwMeta) > 0:
		gs := keep(rbwDir, f.rbwMeta)
		s.removeFinalized(block, f)
		r := &replica{id: blocks.ID{Block: block, GenStamp: gs}, state: blocks.BeingWritten}
		r.mu.Lock()
		n, tail, err := s.cutToVerified(r)
		r.mu.Unlock()
		if err != nil {
			return err
		}
		r.length, r.tailCRC, r.tailKnown = n, tail, true
		s.mu.replicas[block] = r
	case s.cfg.ReadOnly:
		s.log.Warn("blocks/local: incomplete replica left out (read-only)", "block", block)
	default:
		s.log.Warn("blocks/local: removing files of an incomplete replica", "block", block)
		s.removeRBW(block, f)
		s.removeFinalized(block, f)
	}
	return nil
}

func (s *Store) removeRBW(block uint64, f *found) {
	if s.cfg.ReadOnly {
		return
	}
	if f.rbwData {
		os.Remove(filepath.Join(s.dir, rbwDir, dataName(block)))
	}
	for _, gs := range f.rbwMeta {
		os.Remove(filepath.Join(s.dir, rbwDir, metaName(blocks.ID{Block: block, GenStamp: gs})))
	}
}

func (s *Store) removeFinalized(block uint64, f *found) {
	if s.cfg.ReadOnly {
		return
	}
	sub := subdirs(block)
	if f.finData {
		os.Remove(filepath.Join(s.dir, sub, dataName(block)))
	}
	for _, gs := range f.finMeta {
		os.Remove(filepath.Join(s.dir, sub, metaName(blocks.ID{Block: block, GenStamp: gs})))
	}
}
