package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// humanSize renders n as Hadoop's TraditionalBinaryPrefix.long2String does
// for -h: plain below 1024, else one decimal and a binary prefix ("1.3 K"),
// no decimal when exact ("128 M").
func humanSize(n int64) string {
	if n < 0 {
		return "-" + humanSize(-n)
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	const prefixes = "KMGTPE"
	unit := int64(1024)
	i := 0
	for i < len(prefixes)-1 && n/unit >= 1024 {
		unit *= 1024
		i++
	}
	if n%unit == 0 {
		return fmt.Sprintf("%d %c", n/unit, prefixes[i])
	}
	return fmt.Sprintf("%.1f %c", float64(n)/float64(unit), prefixes[i])
}

// sizeString is n, human readable when h.
func sizeString(n int64, h bool) string {
	if h {
		return humanSize(n)
	}
	return strconv.FormatInt(n, 10)
}

// lsFormat prints ls lines with the column layout of hdfs dfs -ls:
//
//	drwxr-xr-x   - owner group          0 2026-11-23 01:02 /path
//
// Widths start at 3 (replication) and 10 (size), grow to fit every batch of
// entries and never shrink during one command, as in Hadoop's Ls.
type lsFormat struct {
	human              bool
	loc                *time.Location
	maxRepl, maxLen    int
	maxOwner, maxGroup int
}

func newLSFormat(human bool, loc *time.Location) *lsFormat {
	return &lsFormat{human: human, loc: loc, maxRepl: 3, maxLen: 10}
}

func replString(st *meta.FileStatus) string {
	if st.Type == meta.TypeFile {
		return strconv.Itoa(int(st.Replication))
	}
	return "-"
}

// adjust widens the columns for a batch about to be printed.
func (f *lsFormat) adjust(sts []meta.FileStatus) {
	for i := range sts {
		st := &sts[i]
		f.maxRepl = max(f.maxRepl, len(replString(st)))
		f.maxLen = max(f.maxLen, len(sizeString(st.Length, f.human)))
		f.maxOwner = max(f.maxOwner, len(st.Owner))
		f.maxGroup = max(f.maxGroup, len(st.Group))
	}
}

// line renders one entry, shown as disp.
func (f *lsFormat) line(st *meta.FileStatus, disp string) string {
	var b strings.Builder
	b.WriteString(meta.Symbolic(st.Type, st.Perm))
	if st.AclBit {
		b.WriteByte('+') // as HDFS's Ls, in place of the space
	} else {
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%*s ", f.maxRepl, replString(st))
	if f.maxOwner > 0 {
		fmt.Fprintf(&b, "%-*s ", f.maxOwner, st.Owner)
	} else {
		b.WriteString(st.Owner)
	}
	if f.maxGroup > 0 {
		fmt.Fprintf(&b, "%-*s ", f.maxGroup, st.Group)
	} else {
		b.WriteString(st.Group)
	}
	fmt.Fprintf(&b, "%*s ", f.maxLen, sizeString(st.Length, f.human))
	b.WriteString(time.UnixMilli(st.Mtime).In(f.loc).Format("2006-01-02 15:04"))
	b.WriteByte(' ')
	b.WriteString(disp)
	if st.Type == meta.TypeSymlink {
		b.WriteString(" -> ")
		b.WriteString(st.Symlink)
	}
	return b.String()
}

// statTypeName is %F of stat.
func statTypeName(t meta.FileType) string {
	switch t {
	case meta.TypeDir:
		return "directory"
	case meta.TypeSymlink:
		return "symlink"
	}
	return "regular file"
}

// formatStat expands a stat FORMAT for one entry, as hdfs dfs -stat does:
//
//	%a octal permission   %A symbolic permission   %b length in bytes
//	%F type               %g group                 %n name
//	%o block size         %r replication           %u owner
//	%x / %X access time (UTC date / ms)    %y / %Y modification time (UTC date / ms)
//	%% a percent sign; any other %c is printed as is.
func formatStat(format string, st *meta.FileStatus) string {
	var b strings.Builder
	date := func(ms int64) string {
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			fmt.Fprintf(&b, "%o", st.Perm&meta.PermMask)
		case 'A':
			b.WriteString(st.Perm.String())
		case 'b':
			b.WriteString(strconv.FormatInt(st.Length, 10))
		case 'F':
			b.WriteString(statTypeName(st.Type))
		case 'g':
			b.WriteString(st.Group)
		case 'n':
			b.WriteString(st.Name())
		case 'o':
			b.WriteString(strconv.FormatInt(st.BlockSize, 10))
		case 'r':
			b.WriteString(strconv.Itoa(int(st.Replication)))
		case 'u':
			b.WriteString(st.Owner)
		case 'x':
			b.WriteString(date(st.Atime))
		case 'X':
			b.WriteString(strconv.FormatInt(st.Atime, 10))
		case 'y':
			b.WriteString(date(st.Mtime))
		case 'Y':
			b.WriteString(strconv.FormatInt(st.Mtime, 10))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// jsonStatus is the --json shape of one inode (ls, stat). Field names are
// stable; see docs/CLI.md.
type jsonStatus struct {
	Path              string `json:"path"`
	Type              string `json:"type"`       // "file", "directory", "symlink"
	Permission        string `json:"permission"` // octal, e.g. "755" or "1777"
	Owner             string `json:"owner"`
	Group             string `json:"group"`
	Length            int64  `json:"length"`
	Replication       uint16 `json:"replication"`
	BlockSize         int64  `json:"block_size"`
	ModificationTime  int64  `json:"modification_time"` // ms since the Unix epoch
	AccessTime        int64  `json:"access_time"`       // ms since the Unix epoch
	FileID            uint64 `json:"file_id"`
	ChildrenNum       int64  `json:"children_num"`
	SymlinkTarget     string `json:"symlink_target,omitempty"`
	UnderConstruction bool   `json:"under_construction"`
	AclBit            bool   `json:"acl_bit,omitempty"` // an ACL beyond the mode (ls's +)
}

func toJSONStatus(st *meta.FileStatus) jsonStatus {
	return jsonStatus{
		Path:              st.Path,
		Type:              st.Type.String(),
		Permission:        strconv.FormatUint(uint64(st.Perm&meta.PermMask), 8),
		Owner:             st.Owner,
		Group:             st.Group,
		Length:            st.Length,
		Replication:       st.Replication,
		BlockSize:         st.BlockSize,
		ModificationTime:  st.Mtime,
		AccessTime:        st.Atime,
		FileID:            st.FileID,
		ChildrenNum:       st.ChildrenNum,
		SymlinkTarget:     st.Symlink,
		UnderConstruction: st.UnderConstruction,
		AclBit:            st.AclBit,
	}
}

// writeJSON writes v as one indented JSON document.
func (sh *shell) writeJSON(v any) {
	enc := json.NewEncoder(sh.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(sh.stderr, "nimbus fs: writing JSON: %v\n", err)
		sh.failed = true
	}
}
