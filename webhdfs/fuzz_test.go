package webhdfs

import (
	"net/url"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// FuzzParseTarget checks that request parsing never panics, that every path
// it accepts is clean, and that a data URL built from an accepted request
// parses back to the same path and op.
func FuzzParseTarget(f *testing.F) {
	for _, s := range [][2]string{
		{"/webhdfs/v1/a/b", "op=GETFILESTATUS&user.name=x"},
		{"/webhdfs/v1", "OP=liststatus"},
		{"/webhdfs/v1/", "op=CREATE&overwrite=true&permission=644&noredirect=true"},
		{"/webhdfs/v1//x//y/", "op=OPEN&offset=5&length=-1"},
		{"/webhdfs/v1/a/../b", "op=MKDIRS"},
		{"/webhdfs/v1/\x00", "op=%zz"},
		{"/webhdfsv1/a", "op=OPEN"},
		{"/webhdfs/v1/ü/日本", "op=RENAME&destination=hdfs://h:1/z"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, path, rawQuery string) {
		tg, err := parseTarget(path, rawQuery)
		if err != nil {
			if meta.KindOf(err) == meta.KindUnknown {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		if c, err := meta.CleanPath("x", tg.path); err != nil || c != tg.path {
			t.Fatalf("accepted path %q is not clean (%q, %v)", tg.path, c, err)
		}
		if tg.op != strings.ToUpper(tg.op) {
			t.Fatalf("op %q not upper-case", tg.op)
		}
		for k := range tg.q {
			if k != strings.ToLower(k) {
				t.Fatalf("parameter name %q not lower-case", k)
			}
		}
		// Typed accessors never panic, whatever the values.
		_, _ = tg.q.boolean("x", tg.path, "overwrite", false)
		_, _ = tg.q.int64("x", tg.path, "offset", 0, 0)
		_, _ = tg.q.perm("x", tg.path, "permission", 0o644)
		_, _ = tg.q.replication("x", tg.path)
		_, _ = destPath("x", "destination", tg.q["destination"])
		// The redirect target round-trips.
		u := url.URL{Path: PathPrefix + tg.path}
		pu, err := url.Parse("http://h" + u.EscapedPath())
		if err != nil {
			t.Fatalf("escaped path %q does not parse: %v", u.EscapedPath(), err)
		}
		back, err := parseTarget(pu.Path, rawQuery)
		if err != nil || back.path != tg.path || back.op != tg.op {
			t.Fatalf("round trip of %q: %q %q %v", tg.path, back.path, back.op, err)
		}
	})
}
