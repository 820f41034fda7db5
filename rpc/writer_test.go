package rpc

import (
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFrameWriterEveryFrameOnce sends frames from many goroutines at once
// and checks that each arrives exactly once and that each sender's frames
// keep their order, whether the writer yields before its flushes (crowded),
// never does, or is told one thing and then the other.
func TestFrameWriterEveryFrameOnce(t *testing.T) {
	var flip atomic.Int64
	cases := map[string]func() bool{
		"nil":       nil,
		"crowded":   func() bool { return true },
		"alone":     func() bool { return false },
		"switching": func() bool { return flip.Add(1)%3 == 0 },
	}
	const senders, frames = 8, 500
	for name, crowded := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer // written only under the writer's lock
			w := newFrameWriter(&out, func(err error) { t.Errorf("write failed: %v", err) }, crowded)
			var wg sync.WaitGroup
			for s := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range frames {
						b := getBuf()
						*b = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32((*b)[:0], uint32(s)), uint32(i))
						w.send(b)
					}
				}()
			}
			wg.Wait()
			got := out.Bytes()
			if len(got) != senders*frames*8 {
				t.Fatalf("wrote %d bytes, want %d", len(got), senders*frames*8)
			}
			next := make([]uint32, senders)
			for len(got) > 0 {
				s, i := binary.BigEndian.Uint32(got), binary.BigEndian.Uint32(got[4:])
				got = got[8:]
				if s >= senders {
					t.Fatalf("a frame from sender %d, of %d", s, senders)
				}
				if i != next[s] {
					t.Fatalf("sender %d's frame %d arrived when %d was next", s, i, next[s])
				}
				next[s]++
			}
		})
	}
}
