package netzone

import (
	"io"
	"testing"
	"time"
)

// BenchmarkCrossZoneStream measures a TCP stream from zone b to zone a
// through the switch (bytes/s), with the delay set to 0 and to 2 ms:
// what a block transfer between DataNodes of two zones gets.
//
//	go test -run '^$' -bench CrossZoneStream -benchtime 400x ./internal/netzone
func BenchmarkCrossZoneStream(b *testing.B) {
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run(delay.String(), func(b *testing.B) {
			nt := New(b, Config{Zones: 2, Delay: delay})
			za, zb := nt.Zone("a"), nt.Zone("b")
			ln, err := za.Listen("tcp", za.Addr(7100))
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan int64, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- -1
					return
				}
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				done <- n
			}()
			c, err := zb.Dial(b.Context(), "tcp", za.Addr(7100))
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			if n := <-done; n != int64(b.N*len(buf)) {
				b.Fatalf("zone a received %d bytes, want %d", n, b.N*len(buf))
			}
		})
	}
}
