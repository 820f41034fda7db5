package dataxfer

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// BenchmarkWritePipeline writes 8 MiB blocks through pipelines of one and
// three DataNodes on 127.0.0.1 (blocks/local stores in temporary
// directories; the last packet waits for every replica to be finalized).
//
//	go test -run '^$' -bench 'WritePipeline|ReadBlock' -benchtime 20x ./dataxfer/
func BenchmarkWritePipeline(b *testing.B) {
	const size = 8 << 20
	data := randBytes(1, size)
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", k), func(b *testing.B) {
			ns := startNodes(b, k, nil)
			c := &Client{Name: "DFSClient_bench"}
			ctx := context.Background()
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				blk := Block{Pool: testPool, ID: uint64(i + 1), GenStamp: 1}
				bw, err := c.WriteBlock(ctx, blk, blocktoken.Token{}, targets(ns), WriteOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < size; off += 64 << 10 {
					if _, err := bw.Write(data[off : off+64<<10]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := bw.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadBlock reads a finalized 8 MiB replica whole, every chunk
// verified by the store and again by the client.
func BenchmarkReadBlock(b *testing.B) {
	const size = 8 << 20
	n := startNode(b, nil)
	c := &Client{Name: "DFSClient_bench"}
	blk := Block{Pool: testPool, ID: 1, GenStamp: 1}
	writeBlock(b, c, blk, blocktoken.Token{}, []*node{n}, randBytes(2, size))
	buf := make([]byte, 128<<10)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		br, err := c.ReadBlock(context.Background(), n.addr, blk, blocktoken.Token{}, 0, size)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{br}, buf)
		br.Close()
		if err != nil || got != size {
			b.Fatalf("read %d bytes: %v", got, err)
		}
	}
}
