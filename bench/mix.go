package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The operations of the mixed workloads (Spotify's, as λFS replays it).
const (
	MixRead    = "read"     // read a file of the tree (from its start)
	MixStat    = "stat"     // stat a file of the tree
	MixStatDir = "stat-dir" // stat a directory of the tree
	MixLs      = "ls"       // list a directory of the tree
	MixCreate  = "create"   // create a new file (created and closed, as HDFS's create-and-close)
	MixRename  = "mv"       // rename a file this run created, within its directory
	MixDelete  = "delete"   // delete a file this run created
	MixMkdirs  = "mkdirs"   // make a new directory
	// MixEcho is a no-op over the same transport (Target.Echo): the
	// "echo" mix measures how far the open-loop driver and the transport
	// go with no metadata work at all.
	MixEcho = "echo"
)

// MixOps lists the operations a mix may name.
var MixOps = []string{MixRead, MixStat, MixStatDir, MixLs, MixCreate, MixRename, MixDelete, MixMkdirs, MixEcho}

// Mix is a named operation mix: the share of each operation.
type Mix struct {
	Name   string
	Ops    []string
	Shares []float64 // as given; they need not sum to 1 (pick normalises)
	cum    []float64 // cumulative shares, normalised to end at 1
}

// The named mixes. "paper" is Table 2 of the λFS paper (Spotify's HDFS
// workload: its "stat" is of files, its "ls" of directories); "lambdafs-repo"
// is the mix the λFS authors' public benchmarking repository runs, which
// splits stat between files and directories (its shares sum to 99.3%: they
// are taken as relative weights).
var namedMixes = map[string][][2]string{
	"paper": {
		{MixRead, "69.22"}, {MixStat, "17"}, {MixLs, "9.01"}, {MixCreate, "2.7"},
		{MixRename, "1.3"}, {MixDelete, "0.75"}, {MixMkdirs, "0.02"},
	},
	// "faults" is the fault run's (bench elastic --kill-every): a third
	// of it writes, so that many acknowledged writes are checked.
	"faults": {
		{MixRead, "40"}, {MixStat, "20"}, {MixLs, "8"}, {MixCreate, "16"},
		{MixRename, "8"}, {MixDelete, "7"}, {MixMkdirs, "1"},
	},
	// "echo" is the driver's ceiling: every operation a no-op round trip,
	// offered as the other mixes are.
	"echo": {{MixEcho, "100"}},
	"lambdafs-repo": {
		{MixRead, "71.84"}, {MixStat, "13.54"}, {MixLs, "8.17"}, {MixStatDir, "3.77"},
		{MixCreate, "1.09"}, {MixRename, "0.55"}, {MixDelete, "0.34"},
	},
}

// MixNames lists the named mixes.
func MixNames() []string {
	names := make([]string, 0, len(namedMixes))
	for n := range namedMixes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LookupMix returns the named mix, or the mix in the file at name (see
// ParseMix) when no mix has that name.
func LookupMix(name string) (Mix, error) {
	if pairs, ok := namedMixes[name]; ok {
		var b strings.Builder
		for _, p := range pairs {
			fmt.Fprintf(&b, "%s %s\n", p[0], p[1])
		}
		return ParseMix(name, strings.NewReader(b.String()))
	}
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Mix{}, fmt.Errorf("bench: mix %q: not one of %v, and no such file", name, MixNames())
		}
		return Mix{}, fmt.Errorf("bench: mix %q: %w", name, err)
	}
	defer f.Close()
	return ParseMix(name, f)
}

// ParseMix reads a mix: one operation per line, its name (one of MixOps)
// and its share (a non-negative number, a percentage or any relative
// weight), separated by spaces; blank lines and lines starting with # are
// skipped. An operation may appear once; the shares must not all be 0.
func ParseMix(name string, r io.Reader) (Mix, error) {
	m := Mix{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return Mix{}, fmt.Errorf("bench: mix %s, line %d: want \"OPERATION SHARE\", got %q", name, line, s)
		}
		if !slices.Contains(MixOps, f[0]) {
			return Mix{}, fmt.Errorf("bench: mix %s, line %d: unknown operation %q (one of %v)", name, line, f[0], MixOps)
		}
		if slices.Contains(m.Ops, f[0]) {
			return Mix{}, fmt.Errorf("bench: mix %s, line %d: %s given twice", name, line, f[0])
		}
		w, err := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		if err != nil || w < 0 || w != w || w > 1e12 {
			return Mix{}, fmt.Errorf("bench: mix %s, line %d: share %q is not a non-negative number", name, line, f[1])
		}
		m.Ops = append(m.Ops, f[0])
		m.Shares = append(m.Shares, w)
	}
	if err := sc.Err(); err != nil {
		return Mix{}, fmt.Errorf("bench: mix %s: %w", name, err)
	}
	total := 0.0
	for _, w := range m.Shares {
		total += w
	}
	if total <= 0 {
		return Mix{}, fmt.Errorf("bench: mix %s: no operation has a share", name)
	}
	acc := 0.0
	for _, w := range m.Shares {
		acc += w
		m.cum = append(m.cum, acc/total)
	}
	m.cum[len(m.cum)-1] = 1
	return m, nil
}

// Share returns op's share of the mix, from 0 to 1.
func (m Mix) Share(op string) float64 {
	for i, o := range m.Ops {
		if o == op {
			lo := 0.0
			if i > 0 {
				lo = m.cum[i-1]
			}
			return m.cum[i] - lo
		}
	}
	return 0
}

// pick returns the operation that u (uniform in [0, 1)) falls on.
// Operation i owns [cum[i-1], cum[i]): the first whose end is above u.
func (m Mix) pick(u float64) string {
	i := sort.Search(len(m.cum), func(j int) bool { return m.cum[j] > u })
	return m.Ops[min(i, len(m.Ops)-1)]
}
