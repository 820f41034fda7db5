package namespace

import (
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestResolvedPrefix: the path of the first k components, for the whole
// path, for a resolved cut short (as create's error paths make), and for
// components that were not split from the path.
func TestResolvedPrefix(t *testing.T) {
	const path = "/a/bb/c"
	r := &resolved{path: path, comps: meta.SplitPath(path)}
	for k, want := range []string{"/", "/a", "/a/bb", "/a/bb/c"} {
		if got := r.prefix(k); got != want {
			t.Errorf("prefix(%d) of %s = %q, want %q", k, path, got, want)
		}
	}
	short := &resolved{path: path, comps: r.comps[:2]}
	if got := short.prefix(2); got != "/a/bb" {
		t.Errorf("prefix(2) of a resolved cut to 2 components = %q, want /a/bb", got)
	}
	other := &resolved{path: "/x", comps: []string{"a", "bb"}}
	if got := other.prefix(2); got != "/a/bb" {
		t.Errorf("prefix(2) of components not from the path = %q, want /a/bb", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.prefix(2) }); n != 0 {
		t.Errorf("prefix allocates %v times, want 0", n)
	}
}
