package meta

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAclSpec(t *testing.T) {
	got, err := ParseAclSpec("user:bob:rw-,default:group::r-x,mask::rwx,other::---,user::rwx,GROUP:staff:--x", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []AclEntry{
		{AclAccess, AclUser, "bob", 6},
		{AclDefault, AclGroup, "", 5},
		{AclAccess, AclMask, "", 7},
		{AclAccess, AclOther, "", 0},
		{AclAccess, AclUser, "", 7},
		{AclAccess, AclGroup, "staff", 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	got, err = ParseAclSpec("user:bob,default:user:carol,,mask::,default:other", false)
	if err != nil {
		t.Fatal(err)
	}
	want = []AclEntry{{AclAccess, AclUser, "bob", 0}, {AclDefault, AclUser, "carol", 0}, {AclAccess, AclMask, "", 0}, {AclDefault, AclOther, "", 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []struct {
		spec     string
		withPerm bool
	}{
		{"user:bob", true},          // no permission
		{"user:bob:rw", true},       // two letters
		{"user:bob:wr-", true},      // letters out of place
		{"user:bob:rw-:x", true},    // extra field
		{"user:bob:rw-", false},     // permission on a removal
		{"owner:bob:rwx", true},     // unknown type
		{"default", true},           // no type
		{":", false},                // nothing
		{"default:user:a:b", false}, // extra field
	} {
		if _, err := ParseAclSpec(bad.spec, bad.withPerm); err == nil || !strings.Contains(err.Error(), "invalid ACL entry") {
			t.Errorf("ParseAclSpec(%q, %v) = %v, want an invalid-entry error", bad.spec, bad.withPerm, err)
		}
	}
}

func TestFsAction(t *testing.T) {
	for p := Perm(0); p < 8; p++ {
		s := FsActionString(p)
		q, err := ParseFsAction(s)
		if err != nil || q != p {
			t.Fatalf("ParseFsAction(%q) = %v, %v; want %v", s, q, err, p)
		}
	}
	if s := FsActionString(5); s != "r-x" {
		t.Fatalf("FsActionString(5) = %q", s)
	}
	if s := (AclEntry{AclDefault, AclGroup, "", 5}).String(); s != "default:group::r-x" {
		t.Fatalf("String = %q", s)
	}
	if s := FormatAclSpec([]AclEntry{{AclAccess, AclUser, "bob", 6}, {AclDefault, AclMask, "", 7}}, false); s != "user:bob,default:mask:" {
		t.Fatalf("FormatAclSpec = %q", s)
	}
}

// FuzzParseAclSpec: whatever parses formats back to a spec that parses to
// the same entries.
func FuzzParseAclSpec(f *testing.F) {
	f.Add("user:bob:rw-,default:group::r-x", true)
	f.Add("user:bob,default:mask", false)
	f.Add("::,,default:", true)
	f.Fuzz(func(t *testing.T, spec string, withPerm bool) {
		es, err := ParseAclSpec(spec, withPerm)
		if err != nil {
			return
		}
		again, err := ParseAclSpec(FormatAclSpec(es, withPerm), withPerm)
		if err != nil {
			t.Fatalf("%q parsed to %+v, whose form %q does not parse: %v", spec, es, FormatAclSpec(es, withPerm), err)
		}
		if len(es) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(es, again) {
			t.Fatalf("%q: %+v, then %+v", spec, es, again)
		}
	})
}

func TestXAttrCodec(t *testing.T) {
	v := []byte("val\x00\xff")
	for enc, want := range map[XAttrEncoding]string{XAttrText: "\"val\x00\xff\"", XAttrHex: "0x76616c00ff", XAttrBase64: "0sdmFsAP8="} {
		s := EncodeXAttrValue(v, enc)
		if s != want {
			t.Errorf("encode %d: %q, want %q", enc, s, want)
		}
		if back, err := DecodeXAttrValue(s); err != nil || string(back) != string(v) {
			t.Errorf("decode %q: %q, %v", s, back, err)
		}
	}
	if b, _ := DecodeXAttrValue("plain"); string(b) != "plain" {
		t.Errorf("plain: %q", b)
	}
	if _, err := DecodeXAttrValue("0xzz"); err == nil {
		t.Error("0xzz decoded")
	}
}
