package store

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestInternSharesNames: a name decoded twice is one string, whether it is
// among the first names interned (compared before hashing) or a later one,
// and interning from many goroutines at once agrees (run under -race).
func TestInternSharesNames(t *testing.T) {
	var wg sync.WaitGroup
	got := make([][]string, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				got[g] = append(got[g], internBytes([]byte(fmt.Sprintf("intern-test-user-%d", i%10))))
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 10; i++ {
		want := internBytes([]byte(fmt.Sprintf("intern-test-user-%d", i)))
		for g := range got {
			for j, s := range got[g] {
				if j%10 != i {
					continue
				}
				if s != want || unsafe.StringData(s) != unsafe.StringData(want) {
					t.Fatalf("goroutine %d, name %d: %q at %p, want the shared %q at %p",
						g, i, s, unsafe.StringData(s), want, unsafe.StringData(want))
				}
			}
		}
	}
	if s := internBytes(nil); s != "" {
		t.Fatalf("empty name interned as %q", s)
	}
}

// BenchmarkDecodeInode decodes a file row as a path walk or a listing does,
// owner and group interned.
func BenchmarkDecodeInode(b *testing.B) {
	n := Inode{Parent: 42, Name: "part-00017-3f9a1c2e-aa.parquet", ID: 1 << 33, Type: meta.TypeFile,
		Perm: 0o644, Owner: "root", Group: "supergroup", Mtime: 1_700_000_000_000, Atime: 1_700_000_000_000,
		Length: 16, Replication: 3, BlockSize: 128 << 20, Written: 16}
	val := EncodeInode(nil, &n)
	var out Inode
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeInodeValue(n.Parent, n.Name, val, &out); err != nil {
			b.Fatal(err)
		}
	}
}
