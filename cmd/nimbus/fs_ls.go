package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// ls lists each argument as hdfs dfs -ls does: a directory's entries after
// "Found N items" (no header with -R, nothing for an empty directory), a file
// as itself; -d lists directories as themselves; -R descends depth first.
// --json gives one array of jsonStatus for everything listed (lsJSON).
func (sh *shell) ls(ctx context.Context, inv *invocation) int {
	ts := sh.resolveAll(inv.args)
	if len(ts) == 0 {
		ts = []target{sh.homeTarget()}
	}
	recursive, dirOnly := inv.has('R'), inv.has('d')
	if sh.json {
		return sh.lsJSON(ctx, ts, recursive, dirOnly)
	}
	f := newLSFormat(inv.has('h'), sh.loc)
	emit := func(batch []meta.FileStatus, ts []target) {
		f.adjust(batch)
		for i := range batch {
			fmt.Fprintln(sh.stdout, f.line(&batch[i], ts[i].shown()))
		}
	}
	var listDir func(t target)
	listDir = func(t target) {
		entries, err := sh.listAll(ctx, t.abs)
		if err != nil {
			sh.fail("ls", t.abs, err)
			return
		}
		if !recursive && len(entries) > 0 {
			fmt.Fprintf(sh.stdout, "Found %d items\n", len(entries))
		}
		children := make([]target, len(entries))
		for i := range entries {
			children[i] = t.child(entries[i].Name())
		}
		if !recursive {
			emit(entries, children)
			return
		}
		// Hadoop prints each entry then descends into it, widening the
		// columns per directory batch.
		f.adjust(entries)
		for i := range entries {
			emit(entries[i:i+1], children[i:i+1])
			if entries[i].IsDir() {
				listDir(children[i])
			}
		}
	}
	for _, t := range ts {
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("ls", t.abs, err)
			continue
		}
		if !st.IsDir() || dirOnly {
			emit([]meta.FileStatus{*st}, []target{t})
			continue
		}
		listDir(t)
	}
	return sh.exit()
}

// lsJSON is ls --json: one JSON array, in the order ls prints (each
// directory's entries by name; with -R each entry followed by what is below
// it), written entry by entry as the listing's pages arrive, so that a
// directory of millions of entries costs one page of memory and the output
// starts at once. A listing that fails midway still ends the array; the
// error goes to stderr and the exit status is 1.
func (sh *shell) lsJSON(ctx context.Context, ts []target, recursive, dirOnly bool) int {
	w := &jsonArrayWriter{w: sh.stdout}
	var listDir func(t target) error
	listDir = func(t target) error {
		return sh.listPages(ctx, t.abs, func(page []meta.FileStatus) error {
			for i := range page {
				if err := w.add(toJSONStatus(&page[i])); err != nil {
					return err
				}
				if recursive && page[i].IsDir() {
					c := t.child(page[i].Name())
					if err := listDir(c); err != nil && !errors.Is(err, errOutput) {
						sh.fail("ls", c.abs, err)
					} else if err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	for _, t := range ts {
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("ls", t.abs, err)
			continue
		}
		if !st.IsDir() || dirOnly {
			err = w.add(toJSONStatus(st))
		} else {
			err = listDir(t)
		}
		if errors.Is(err, errOutput) {
			break
		}
		if err != nil {
			sh.fail("ls", t.abs, err)
		}
	}
	if err := w.close(); err != nil {
		fmt.Fprintf(sh.stderr, "nimbus fs: writing JSON: %v\n", err)
		sh.failed = true
	}
	return sh.exit()
}

// errOutput wraps a failed write of the output: the listing stops.
var errOutput = errors.New("writing the output")

// jsonArrayWriter writes a JSON array one element at a time, in the layout
// of writeJSON (two-space indent), so that streamed and buffered output are
// the same bytes.
type jsonArrayWriter struct {
	w   io.Writer
	n   int
	err error
}

func (a *jsonArrayWriter) add(v any) error {
	if a.err != nil {
		return a.err
	}
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if a.n == 0 {
		sep = "[\n  "
	}
	a.n++
	if _, err := io.WriteString(a.w, sep); err != nil {
		a.err = fmt.Errorf("%w: %w", errOutput, err)
		return a.err
	}
	if _, err := a.w.Write(b); err != nil {
		a.err = fmt.Errorf("%w: %w", errOutput, err)
	}
	return a.err
}

func (a *jsonArrayWriter) close() error {
	if a.err != nil {
		return a.err
	}
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

func (sh *shell) exit() int {
	if sh.failed {
		return 1
	}
	return 0
}

// stat prints each path in FORMAT (default "%y"), one line per path. The
// first argument is a format when more than one is given and it contains
// '%'. --json ignores FORMAT and gives an array of jsonStatus.
func (sh *shell) stat(ctx context.Context, inv *invocation) int {
	args := inv.args
	format := "%y"
	if len(args) > 1 && strings.Contains(args[0], "%") {
		format, args = args[0], args[1:]
	}
	out := []jsonStatus{}
	for _, t := range sh.resolveAll(args) {
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("stat", t.abs, err)
			continue
		}
		if sh.json {
			out = append(out, toJSONStatus(st))
			continue
		}
		fmt.Fprintln(sh.stdout, formatStat(format, st))
	}
	if sh.json {
		sh.writeJSON(out)
	}
	return sh.exit()
}

// jsonUsage is the --json shape of a du row.
type jsonUsage struct {
	Path          string `json:"path"`
	Length        int64  `json:"length"`
	SpaceConsumed int64  `json:"space_consumed"`
}

// du prints, for each argument (each entry of a directory argument unless
// -s), the bytes of its files and the space they consume with all replicas,
// as hdfs dfs -du: left-aligned columns two spaces apart.
func (sh *shell) du(ctx context.Context, inv *invocation) int {
	ts := sh.resolveAll(inv.args)
	if len(ts) == 0 {
		ts = []target{sh.homeTarget()}
	}
	human := inv.has('h')
	var rows []jsonUsage
	var shown []string
	add := func(t target) {
		cs, err := sh.fs.ContentSummary(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("du", t.abs, err)
			return
		}
		rows = append(rows, jsonUsage{Path: t.abs, Length: cs.Length, SpaceConsumed: cs.SpaceConsumed})
		shown = append(shown, t.shown())
	}
	for _, t := range ts {
		if inv.has('s') {
			add(t)
			continue
		}
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("du", t.abs, err)
			continue
		}
		if !st.IsDir() {
			add(t)
			continue
		}
		entries, err := sh.listAll(ctx, t.abs)
		if err != nil {
			sh.fail("du", t.abs, err)
			continue
		}
		for i := range entries {
			add(t.child(entries[i].Name()))
		}
	}
	if sh.json {
		if rows == nil {
			rows = []jsonUsage{}
		}
		sh.writeJSON(rows)
		return sh.exit()
	}
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{sizeString(r.Length, human), sizeString(r.SpaceConsumed, human), shown[i]}
	}
	printTable(sh, table)
	return sh.exit()
}

// printTable prints rows in left-aligned columns two spaces apart, the last
// column unpadded (Hadoop's FsUsage.TableBuilder).
func printTable(sh *shell, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == len(r)-1 {
				b.WriteString(c)
			} else {
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			}
		}
		fmt.Fprintln(sh.stdout, b.String())
	}
}

// jsonCount is the --json shape of a count row (quotas always included; -1
// means none).
type jsonCount struct {
	Path           string `json:"path"`
	DirectoryCount int64  `json:"directory_count"`
	FileCount      int64  `json:"file_count"`
	Length         int64  `json:"length"`
	NsQuota        int64  `json:"ns_quota"`
	NsConsumed     int64  `json:"ns_consumed"`
	SpaceQuota     int64  `json:"space_quota"`
	SpaceConsumed  int64  `json:"space_consumed"`
}

// count prints hdfs dfs -count lines: "%12s %12s %18s " directories, files,
// bytes, then the path; -q prefixes "%12s %15s %15s %15s " namespace quota,
// remaining, space quota, remaining ("none" and "inf" without a quota).
func (sh *shell) count(ctx context.Context, inv *invocation) int {
	ts := sh.resolveAll(inv.args)
	if len(ts) == 0 {
		ts = []target{sh.homeTarget()}
	}
	human := inv.has('h')
	out := []jsonCount{}
	for _, t := range ts {
		cs, err := sh.fs.ContentSummary(ctx, sh.user, t.abs)
		if err != nil {
			sh.fail("count", t.abs, err)
			continue
		}
		if sh.json {
			out = append(out, jsonCount{Path: t.abs, DirectoryCount: cs.DirectoryCount,
				FileCount: cs.FileCount, Length: cs.Length, NsQuota: cs.NsQuota,
				NsConsumed: cs.NsConsumed, SpaceQuota: cs.SpaceQuota, SpaceConsumed: cs.SpaceConsumed})
			continue
		}
		var b strings.Builder
		if inv.has('q') {
			q, qr, s, sr := "none", "inf", "none", "inf"
			if cs.NsQuota > 0 {
				q, qr = sizeString(cs.NsQuota, human), sizeString(cs.NsQuota-cs.NsConsumed, human)
			}
			if cs.SpaceQuota >= 0 {
				s, sr = sizeString(cs.SpaceQuota, human), sizeString(cs.SpaceQuota-cs.SpaceConsumed, human)
			}
			fmt.Fprintf(&b, "%12s %15s %15s %15s ", q, qr, s, sr)
		}
		fmt.Fprintf(&b, "%12s %12s %18s %s", sizeString(cs.DirectoryCount, human),
			sizeString(cs.FileCount, human), sizeString(cs.Length, human), t.shown())
		fmt.Fprintln(sh.stdout, b.String())
	}
	if sh.json {
		sh.writeJSON(out)
	}
	return sh.exit()
}

// test checks one condition on one path and prints nothing: exit 0 when it
// holds, 1 when it does not. Errors other than "not found" / "not a
// directory" (permission, connection) are printed and exit 1.
func (sh *shell) test(ctx context.Context, inv *invocation) int {
	n := 0
	var cond byte
	for _, f := range []byte("edfsz") {
		if inv.has(f) {
			n++
			cond = f
		}
	}
	if n != 1 {
		return sh.usageError(inv, "exactly one of -e, -d, -f, -s, -z is needed")
	}
	t := sh.resolve(inv.args[0])
	st, err := sh.fs.Stat(ctx, sh.user, t.abs)
	if err != nil {
		if k := meta.KindOf(err); k != meta.KindNotFound && k != meta.KindNotDir {
			sh.fail("test", t.abs, err)
		}
		return 1
	}
	var ok bool
	switch cond {
	case 'e':
		ok = true
	case 'd':
		ok = st.IsDir()
	case 'f':
		ok = st.Type == meta.TypeFile
	case 's':
		ok = st.Length > 0
	case 'z':
		ok = st.Length == 0
	}
	if ok {
		return 0
	}
	return 1
}
