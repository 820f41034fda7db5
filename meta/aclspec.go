package meta

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// HDFS's textual forms of ACL entries (AclEntry.parseAclSpec and
// AclEntry.toString) and of FsAction ("rwx", "r-x"...), shared by the
// WebHDFS gateway (aclspec parameter, GETACLSTATUS) and the CLI (setfacl,
// getfacl).

// ParseFsAction parses HDFS's FsAction symbol: exactly three characters,
// each the letter of its position or '-' ("rw-", "--x").
func ParseFsAction(s string) (Perm, error) {
	if len(s) != 3 {
		return 0, fmt.Errorf("invalid permission %q: want three characters like rwx or r-x", s)
	}
	var p Perm
	for i, c := range []byte(s) {
		switch {
		case c == "rwx"[i]:
			p |= 4 >> i
		case c != '-':
			return 0, fmt.Errorf("invalid permission %q: want three characters like rwx or r-x", s)
		}
	}
	return p, nil
}

// FsActionString renders the low three bits of p as HDFS's FsAction symbol.
func FsActionString(p Perm) string {
	b := []byte("rwx")
	for i := range b {
		if p&(4>>i) == 0 {
			b[i] = '-'
		}
	}
	return string(b)
}

// String renders e as HDFS's AclEntry.toString does: "user:bob:rw-",
// "default:group::r-x", "mask::rwx".
func (e AclEntry) String() string {
	var b strings.Builder
	if e.Scope == AclDefault {
		b.WriteString("default:")
	}
	b.WriteString(aclTypeNames[e.Type&3])
	b.WriteByte(':')
	b.WriteString(e.Name)
	b.WriteByte(':')
	b.WriteString(FsActionString(e.Perm))
	return b.String()
}

var aclTypeNames = [...]string{AclUser: "user", AclGroup: "group", AclMask: "mask", AclOther: "other"}

// ParseAclSpec parses a comma-separated ACL spec as HDFS's
// AclEntry.parseAclSpec does. withPerm says whether each entry carries its
// permission ("user:bob:rw-", for -m and --set) or not ("user:bob", for -x
// and REMOVEACLENTRIES). Empty entries between commas are skipped, as
// HDFS's tokenizer skips them; an empty spec is no entries.
func ParseAclSpec(spec string, withPerm bool) ([]AclEntry, error) {
	var out []AclEntry
	for _, s := range strings.Split(spec, ",") {
		if s == "" {
			continue
		}
		e, err := ParseAclEntry(s, withPerm)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ParseAclEntry parses one entry of an ACL spec (see ParseAclSpec) field
// for field as HDFS's AclEntry.parseAclEntry: [default:]type[:name][:perm],
// the type in any case. Whether a mask or other entry may carry a name is
// the ACL's validation, not the parser's.
func ParseAclEntry(s string, withPerm bool) (AclEntry, error) {
	bad := func(why string) (AclEntry, error) {
		return AclEntry{}, fmt.Errorf("invalid ACL entry %q: %s", s, why)
	}
	// Java's String.split drops trailing empty strings: "user:bob:" is two
	// fields, ":" none.
	f := strings.Split(s, ":")
	for len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	var e AclEntry
	if len(f) > 0 && f[0] == "default" {
		e.Scope = AclDefault
		f = f[1:]
	}
	if len(f) == 0 {
		return bad("missing type")
	}
	switch strings.ToLower(f[0]) {
	case "user":
		e.Type = AclUser
	case "group":
		e.Type = AclGroup
	case "mask":
		e.Type = AclMask
	case "other":
		e.Type = AclOther
	default:
		return bad(fmt.Sprintf("invalid type %q", f[0]))
	}
	f = f[1:]
	if len(f) > 0 {
		e.Name = f[0]
		f = f[1:]
	}
	if withPerm {
		if len(f) == 0 {
			return bad("missing permission")
		}
		p, err := ParseFsAction(f[0])
		if err != nil {
			return bad(err.Error())
		}
		e.Perm = p
		f = f[1:]
	}
	if len(f) > 0 {
		return bad("too many fields")
	}
	return e, nil
}

// FormatAclSpec joins entries as ParseAclSpec reads them; withPerm as there.
func FormatAclSpec(entries []AclEntry, withPerm bool) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		s := e.String()
		if !withPerm {
			s = s[:strings.LastIndexByte(s, ':')]
		}
		parts[i] = s
	}
	return strings.Join(parts, ",")
}

// XAttrEncoding is how an extended attribute's value is written as text
// (HDFS's XAttrCodec).
type XAttrEncoding uint8

const (
	XAttrText   XAttrEncoding = iota // "value", quoted
	XAttrHex                         // 0x76616c7565
	XAttrBase64                      // 0sdmFsdWU=
)

// ParseXAttrEncoding parses text, hex or base64 in any case.
func ParseXAttrEncoding(s string) (XAttrEncoding, error) {
	switch strings.ToLower(s) {
	case "text":
		return XAttrText, nil
	case "hex":
		return XAttrHex, nil
	case "base64":
		return XAttrBase64, nil
	}
	return 0, fmt.Errorf("invalid encoding %q: want text, hex or base64", s)
}

// EncodeXAttrValue writes v as HDFS's XAttrCodec.encodeValue does.
func EncodeXAttrValue(v []byte, enc XAttrEncoding) string {
	switch enc {
	case XAttrHex:
		return "0x" + hex.EncodeToString(v)
	case XAttrBase64:
		return "0s" + base64.StdEncoding.EncodeToString(v)
	}
	return `"` + string(v) + `"`
}

// DecodeXAttrValue reads s as HDFS's XAttrCodec.decodeValue does: a quoted
// string is its content, 0x and 0s (any case) prefix hex and base64, and
// anything else is taken as it is.
func DecodeXAttrValue(s string) ([]byte, error) {
	if len(s) >= 2 {
		switch p := strings.ToLower(s[:2]); {
		case s[0] == '"' && s[len(s)-1] == '"':
			return []byte(s[1 : len(s)-1]), nil
		case p == "0x":
			b, err := hex.DecodeString(s[2:])
			if err != nil {
				return nil, fmt.Errorf("invalid hex value %q: %v", s, err)
			}
			return b, nil
		case p == "0s":
			b, err := base64.StdEncoding.DecodeString(s[2:])
			if err != nil {
				return nil, fmt.Errorf("invalid base64 value %q: %v", s, err)
			}
			return b, nil
		}
	}
	return []byte(s), nil
}
