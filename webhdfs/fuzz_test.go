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
		{"/webhdfs/v1/d", "op=MKDIRS&permission=755&unmaskedpermission=1777"},
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
		if raw := strings.TrimPrefix(path, PathPrefix); strings.Contains(raw, "//") {
			t.Fatalf("accepted %q, whose path has an empty component", path)
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
		if p, ok, err := tg.q.unmasked("x", tg.path); err == nil && ok && p&^0o1777 != 0 {
			t.Fatalf("unmaskedpermission %q accepted as %o", tg.q["unmaskedpermission"], p)
		}
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

// FuzzParseQuery checks parseQuery against url.ParseQuery: the same strings
// are rejected, the same names (lower-cased) are kept, and each keeps the
// first value given under it in any case, in request order.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"op=OPEN&OP=DELETE", "Op=a&op=b&OP=c", "a=1&&b=%41&a=2", "x;y=1&op=OPEN",
		"=v&k=", "k=%zz&op=OPEN", "user.name=x&doas=y+z", "%4F%50=open&op=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parseQuery(raw)
		ref, refErr := url.ParseQuery(raw)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: parseQuery error %v, url.ParseQuery error %v", raw, err, refErr)
		}
		want := map[string]string{}
		for _, pair := range strings.Split(raw, "&") {
			one, perr := url.ParseQuery(pair)
			if perr != nil {
				continue
			}
			for k, v := range one { // at most one name per pair
				if _, seen := want[strings.ToLower(k)]; !seen {
					want[strings.ToLower(k)] = v[0]
				}
			}
		}
		if len(ref) == 0 && len(want) != 0 || len(got) != len(want) {
			t.Fatalf("%q: got %v, want %v", raw, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%q: %s=%q, want %q (all: %v)", raw, k, got[k], v, got)
			}
			if !hasLower(ref, k) {
				t.Fatalf("%q: %s not among url.ParseQuery's names %v", raw, k, ref)
			}
		}
	})
}

// hasLower reports whether some name in m lower-cases to name.
func hasLower(m url.Values, name string) bool {
	for k := range m {
		if strings.ToLower(k) == name {
			return true
		}
	}
	return false
}

// TestParseTargetFirstNameWins: one name given in two cases always resolves
// to its first value. Ranging over url.ParseQuery's map, as parseTarget used
// to, picked either one at random.
func TestParseTargetFirstNameWins(t *testing.T) {
	for i := 0; i < 64; i++ {
		tg, err := parseTarget("/webhdfs/v1/a", "op=GETFILESTATUS&OP=DELETE&Recursive=true&recursive=false")
		if err != nil {
			t.Fatal(err)
		}
		if tg.op != "GETFILESTATUS" || tg.q["recursive"] != "true" {
			t.Fatalf("try %d: op %q recursive %q, want GETFILESTATUS and true", i, tg.op, tg.q["recursive"])
		}
	}
}
