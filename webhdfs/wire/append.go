package wire

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends f's JSON encoding to b: byte for byte what
// encoding/json's Marshal writes for f (same field order, same escaping),
// without reflection or allocation. A listing writes one per entry, and
// Marshal was most of the gateway's CPU for LISTSTATUS. FuzzAppendJSON
// checks the equality on arbitrary values.
func (f *FileStatus) AppendJSON(b []byte) []byte {
	b = append(b, `{"accessTime":`...)
	b = strconv.AppendInt(b, f.AccessTime, 10)
	if f.AclBit {
		b = append(b, `,"aclBit":true`...)
	}
	b = append(b, `,"blockSize":`...)
	b = strconv.AppendInt(b, f.BlockSize, 10)
	b = append(b, `,"childrenNum":`...)
	b = strconv.AppendInt(b, f.ChildrenNum, 10)
	b = append(b, `,"fileId":`...)
	b = strconv.AppendUint(b, f.FileID, 10)
	b = append(b, `,"group":`...)
	b = appendString(b, f.Group)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, f.Length, 10)
	b = append(b, `,"modificationTime":`...)
	b = strconv.AppendInt(b, f.ModificationTime, 10)
	b = append(b, `,"owner":`...)
	b = appendString(b, f.Owner)
	b = append(b, `,"pathSuffix":`...)
	b = appendString(b, f.PathSuffix)
	b = append(b, `,"permission":`...)
	b = appendString(b, f.Permission)
	b = append(b, `,"replication":`...)
	b = strconv.AppendUint(b, uint64(f.Replication), 10)
	b = append(b, `,"storagePolicy":`...)
	b = strconv.AppendInt(b, int64(f.StoragePolicy), 10)
	if f.Symlink != "" {
		b = append(b, `,"symlink":`...)
		b = appendString(b, f.Symlink)
	}
	b = append(b, `,"type":`...)
	b = appendString(b, f.Type)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does:
// quotes, backslashes and control characters escaped (\b \f \n \r \t short,
// the rest \u00XX), <, > and & escaped for HTML, U+2028 and U+2029 escaped,
// and each invalid UTF-8 byte replaced by \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendDirectoryListing appends the LISTSTATUS_BATCH answer for entries
// and remaining: what encoding/json writes for the DirectoryListingReply
// holding them (entries non-nil).
func AppendDirectoryListing(b []byte, entries []FileStatus, remaining int64) []byte {
	return AppendDirectoryListingOf(b, len(entries), remaining, func(b []byte, i int) []byte {
		return entries[i].AppendJSON(b)
	})
}

// AppendDirectoryListingOf is AppendDirectoryListing for n entries that
// entry appends one by one, so that a page is written without a slice of
// FileStatus beside it.
func AppendDirectoryListingOf(b []byte, n int, remaining int64, entry func(b []byte, i int) []byte) []byte {
	b = append(b, `{"DirectoryListing":{"partialListing":{"FileStatuses":{"FileStatus":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = entry(b, i)
	}
	b = append(b, `]}},"remainingEntries":`...)
	b = strconv.AppendInt(b, remaining, 10)
	return append(b, "}}"...)
}
