package wire

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// Every kind the gateway sends by a specific class comes back as that kind in
// the client; the generic classes name no kind.
func TestExceptionRoundTrip(t *testing.T) {
	for k := meta.Kind(0); int(k) < len(Exceptions); k++ {
		ex := ExceptionOf(k)
		s, ok := SentinelOf(ex.Name)
		switch {
		case ex.Name == "RuntimeException" || ex.Name == "IOException":
			if ok {
				t.Errorf("%s (kind %v) decodes to %v", ex.Name, k, s)
			}
		case k == meta.KindUnsupported: // sent as IllegalArgumentException, as HDFS does for an unknown op
			if !errors.Is(s, meta.ErrInvalidArgument) {
				t.Errorf("kind %v: %s decodes to %v", k, ex.Name, s)
			}
		case k == meta.KindWrongOwner: // sent as RetriableException, as busy is: nothing was done
			if !errors.Is(s, meta.ErrBusy) {
				t.Errorf("kind %v: %s decodes to %v", k, ex.Name, s)
			}
		case k == meta.KindIsDir: // sent as FileNotFoundException, as HDFS does
			if !errors.Is(s, meta.ErrNotFound) {
				t.Errorf("kind %v: %s decodes to %v", k, ex.Name, s)
			}
		case !ok || meta.KindOf(s) != k:
			t.Errorf("kind %v: %s decodes to %v, %v", k, ex.Name, s, ok)
		}
	}
	if ExceptionOf(meta.Kind(200)) != Exceptions[meta.KindUnknown] {
		t.Error("an unknown kind is not sent as KindUnknown")
	}
}

func TestFileStatusRoundTrip(t *testing.T) {
	for _, st := range []meta.FileStatus{
		{Path: "/d/f", FileID: 7, Type: meta.TypeFile, Perm: 0o1644, Owner: "o", Group: "g", Length: 5,
			Replication: 3, BlockSize: 1 << 20, Mtime: 10, Atime: 11, NsQuota: -1, SpaceQuota: -1},
		{Path: "/d", FileID: 8, Type: meta.TypeDir, Perm: 0o755, Owner: "o", Group: "g", ChildrenNum: 2,
			Mtime: 12, Atime: 13, NsQuota: -1, SpaceQuota: -1},
	} {
		b, err := json.Marshal(FileStatusOf(&st, st.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var f FileStatus
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		if got := f.Meta(st.Path); got != st {
			t.Errorf("round trip of %+v: %+v (JSON %s)", st, got, b)
		}
	}
}

// TestPermString: every permission renders as Java's Integer.toOctalString
// of its bits, sticky bit included, and bits outside the mask are ignored.
func TestPermString(t *testing.T) {
	for p := meta.Perm(0); p <= meta.PermMask; p++ {
		want := strconv.FormatUint(uint64(p), 8)
		if got := PermString(p); got != want {
			t.Fatalf("PermString(%#o) = %q, want %q", p, got, want)
		}
	}
	for _, c := range []struct {
		p    meta.Perm
		want string
	}{{0, "0"}, {0o755, "755"}, {0o1777, "1777"}, {0o20755, "755"}} {
		if got := PermString(c.p); got != c.want {
			t.Fatalf("PermString(%#o) = %q, want %q", c.p, got, c.want)
		}
	}
}
