package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestInodeKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		parent uint64
		name   string
	}{
		{RootParentID, ""}, {RootID, "a"}, {42, "part-00000.parquet"}, {math.MaxUint64, "\x00\xff"}, {1 << 32, strings.Repeat("x", 255)},
	} {
		k := InodeKey(tc.parent, tc.name)
		p, n, ok := DecodeInodeKey(k)
		if !ok || p != tc.parent || n != tc.name {
			t.Errorf("DecodeInodeKey(InodeKey(%d, %q)) = %d, %q, %v", tc.parent, tc.name, p, n, ok)
		}
	}
	for _, bad := range [][]byte{nil, {}, []byte("i1234567"), DataKey(1, 0), CounterKey("inode")} {
		if _, _, ok := DecodeInodeKey(bad); ok {
			t.Errorf("DecodeInodeKey(%q) accepted a non-inode key", bad)
		}
	}
}

func TestInodeKeyOrder(t *testing.T) {
	type pn struct {
		p uint64
		n string
	}
	in := []pn{{2, "b"}, {1, "zz"}, {256, ""}, {2, "a"}, {2, "ab"}, {1 << 40, "a"}, {255, "\xff"}, {2, ""}, {0, ""}, {2, "a\x00"}}
	byKey := slices.Clone(in)
	slices.SortFunc(byKey, func(a, b pn) int { return bytes.Compare(InodeKey(a.p, a.n), InodeKey(b.p, b.n)) })
	byPair := slices.Clone(in)
	slices.SortFunc(byPair, func(a, b pn) int { return cmp.Or(cmp.Compare(a.p, b.p), strings.Compare(a.n, b.n)) })
	if !slices.Equal(byKey, byPair) {
		t.Fatalf("key order %v != (parent, name) order %v", byKey, byPair)
	}
	// Inode keys sort apart from the other tables.
	s, e := AllInodesRange()
	for _, k := range [][]byte{DataKey(1, 0), CounterKey("inode"), MetaKey("format")} {
		if bytes.Compare(k, s) >= 0 && bytes.Compare(k, e) < 0 {
			t.Errorf("%s falls in the inode table range", FormatKey(k))
		}
	}
	for _, x := range in {
		if k := InodeKey(x.p, x.n); bytes.Compare(k, s) < 0 || bytes.Compare(k, e) >= 0 {
			t.Errorf("%s outside AllInodesRange", FormatKey(k))
		}
	}
}

func inRange(k, start, end []byte) bool {
	return bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
}

func TestChildrenRange(t *testing.T) {
	names := []string{"", "a", "a\x00", "ab", "b", "\xff\xff", strings.Repeat("z", 255)}
	for _, dir := range []uint64{0, 1, 7, math.MaxUint64 - 1} {
		for _, after := range []string{"", "a", "a\x00", "b", "zzz"} {
			start, end := ChildrenRange(dir, after)
			for _, p := range []uint64{dir - 1, dir, dir + 1} {
				for _, n := range names {
					// With after == "" every child, including the empty name
					// (the root row under RootParentID).
					want := p == dir && (after == "" || n > after)
					if got := inRange(InodeKey(p, n), start, end); got != want {
						t.Errorf("ChildrenRange(%d, %q) contains (%d, %q) = %v, want %v", dir, after, p, n, got, want)
					}
				}
			}
		}
	}
}

func TestDataKey(t *testing.T) {
	for _, tc := range []struct {
		id  uint64
		off int64
	}{{1, 0}, {1, 1 << 20}, {math.MaxUint64 - 1, math.MaxInt64}} {
		id, off, ok := DecodeDataKey(DataKey(tc.id, tc.off))
		if !ok || id != tc.id || off != tc.off {
			t.Errorf("data key round trip (%d, %d) -> (%d, %d, %v)", tc.id, tc.off, id, off, ok)
		}
		s, e := DataRange(tc.id, tc.off)
		if !inRange(DataKey(tc.id, tc.off), s, e) || inRange(DataKey(tc.id+1, 0), s, e) || (tc.off > 0 && inRange(DataKey(tc.id, tc.off-1), s, e)) {
			t.Errorf("DataRange(%d, %d) is wrong", tc.id, tc.off)
		}
	}
	if bytes.Compare(DataKey(1, 5), DataKey(1, 1<<40)) >= 0 {
		t.Error("data keys of one inode do not sort by offset")
	}
	if _, _, ok := DecodeDataKey(InodeKey(1, "12345678")); ok {
		t.Error("DecodeDataKey accepted an inode key")
	}
}

func TestFormatKey(t *testing.T) {
	for k, want := range map[string]string{
		string(InodeKey(3, "x")):         `inode(3,"x")`,
		string(DataKey(9, 4096)):         "data(9@4096)",
		string(CounterKey(CounterInode)): `"cinode"`,
	} {
		if got := FormatKey([]byte(k)); got != want {
			t.Errorf("FormatKey = %s, want %s", got, want)
		}
	}
}

func FuzzInodeKey(f *testing.F) {
	f.Add(uint64(0), "")
	f.Add(uint64(1), "a")
	f.Add(uint64(math.MaxUint64), "\xff\x00")
	f.Add(uint64(7), "part-00000.parquet")
	f.Fuzz(func(t *testing.T, parent uint64, name string) {
		k := InodeKey(parent, name)
		p, n, ok := DecodeInodeKey(k)
		if !ok || p != parent || n != name {
			t.Fatalf("round trip (%d, %q) -> (%d, %q, %v)", parent, name, p, n, ok)
		}
		// The key is a child of parent and not of its neighbours.
		start, end := ChildrenRange(parent, "")
		if !inRange(k, start, end) {
			t.Fatalf("(%d, %q) not in its parent's range", parent, name)
		}
		if parent < math.MaxUint64 {
			if s2, e2 := ChildrenRange(parent+1, ""); inRange(k, s2, e2) {
				t.Fatalf("(%d, %q) in the range of %d", parent, name, parent+1)
			}
		}
		// Order: the key of a name with a suffix sorts after the name.
		if bytes.Compare(k, InodeKey(parent, name+"\x00")) >= 0 {
			t.Fatal("name+NUL does not sort after name")
		}
		// Any byte string decodes or is refused without panicking.
		_, _, _ = DecodeInodeKey([]byte(name))
		_, _, _ = DecodeDataKey([]byte(name))
		_ = FormatKey([]byte(name))
		if len(k) >= 9 && binary.BigEndian.Uint64(k[1:9]) != parent {
			t.Fatal("parent not big-endian at bytes 1..8")
		}
	})
}

// TestPartitions: which ranges lie inside one partition, and which are a
// whole partition, including the last id (whose end is the next table).
func TestPartitions(t *testing.T) {
	if _, ok := PartitionOf(CounterKey("inode")); ok {
		t.Fatal("a counter key has a partition")
	}
	if _, ok := PartitionOf([]byte{tableInode, 1}); ok {
		t.Fatal("a key shorter than a partition id has a partition")
	}
	for _, c := range []struct {
		dir           uint64
		after         string
		covers, whole bool
	}{
		{7, "", true, true},
		{7, "x", true, false},
		{math.MaxUint64, "", true, true},
		{math.MaxUint64, "x", true, false},
	} {
		start, end := ChildrenRange(c.dir, c.after)
		p, ok := PartitionOf(start)
		if !ok || p != PartitionID(InodeKey(c.dir, "")) {
			t.Fatalf("partition of %s: %v %v", FormatKey(start), p, ok)
		}
		if got := p.Covers(start, end); got != c.covers {
			t.Errorf("dir %d after %q: Covers = %v", c.dir, c.after, got)
		}
		if got := p.Whole(start, end); got != c.whole {
			t.Errorf("dir %d after %q: Whole = %v", c.dir, c.after, got)
		}
	}
	p, _ := PartitionOf(InodeKey(7, ""))
	for _, end := range [][]byte{nil, InodeKey(8, "a"), {tableInode + 1}} {
		if p.Covers(InodeKey(7, ""), end) {
			t.Errorf("Covers(%q) reaches past directory 7", end)
		}
	}
	if !p.Covers(InodeKey(7, "a"), InodeKey(7, "m")) || p.Whole(InodeKey(7, "a"), InodeKey(7, "m")) {
		t.Error("a range inside directory 7: want covered, not whole")
	}
}
