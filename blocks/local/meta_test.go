package local

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseMeta(t *testing.T) {
	good := AppendMetaHeader(nil, metaHeader)
	tests := []struct {
		name  string
		in    []byte
		crcs  int
		valid bool
	}{
		{"header only", good, 0, true},
		{"two crcs", append(append([]byte{}, good...), 1, 2, 3, 4, 5, 6, 7, 8), 8, true},
		{"short", good[:6], 0, false},
		{"empty", nil, 0, false},
		{"partial crc", append(append([]byte{}, good...), 1, 2, 3), 0, false},
		{"version 2", AppendMetaHeader(nil, MetaHeader{2, checksumCRC32C, 512}), 0, false},
		{"crc32 not c", AppendMetaHeader(nil, MetaHeader{1, 1, 512}), 0, false},
		{"1024 per crc", AppendMetaHeader(nil, MetaHeader{1, checksumCRC32C, 1024}), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, crcs, err := ParseMeta(tc.in)
			if tc.valid != (err == nil) {
				t.Fatalf("ParseMeta(%x) error = %v, want valid=%v", tc.in, err, tc.valid)
			}
			if err != nil {
				if !errors.Is(err, ErrMetaFormat) {
					t.Fatalf("error %v does not wrap ErrMetaFormat", err)
				}
				return
			}
			if h != metaHeader || len(crcs) != tc.crcs {
				t.Fatalf("got %+v and %d crc bytes, want %+v and %d", h, len(crcs), metaHeader, tc.crcs)
			}
		})
	}
}

func TestMetaSizes(t *testing.T) {
	for _, c := range []struct{ n, chunks int64 }{{0, 0}, {1, 1}, {511, 1}, {512, 1}, {513, 2}, {1024, 2}, {1025, 3}} {
		if got := chunks(c.n); got != c.chunks {
			t.Errorf("chunks(%d) = %d, want %d", c.n, got, c.chunks)
		}
		if got := metaSize(c.n); got != 7+4*c.chunks {
			t.Errorf("metaSize(%d) = %d", c.n, got)
		}
	}
}

// FuzzParseMeta: ParseMeta never panics, accepts exactly the header this
// package writes followed by whole checksums, and re-encodes what it accepts.
func FuzzParseMeta(f *testing.F) {
	good := AppendMetaHeader(nil, metaHeader)
	f.Add(good)
	f.Add(append(append([]byte{}, good...), 0xde, 0xad, 0xbe, 0xef))
	f.Add([]byte{0, 1, 2})
	f.Add(AppendMetaHeader(nil, MetaHeader{1, 1, 512}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, crcs, err := ParseMeta(b)
		valid := len(b) >= 7 && bytes.Equal(b[:7], good) && (len(b)-7)%4 == 0
		if valid != (err == nil) {
			t.Fatalf("ParseMeta(%x): err = %v, want valid = %v", b, err, valid)
		}
		if err != nil {
			return
		}
		if re := append(AppendMetaHeader(nil, h), crcs...); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding %x gives %x", b, re)
		}
	})
}
