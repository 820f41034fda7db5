package rpc

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
)

// TestFrameWriterEveryFrameOnce sends frames from many goroutines at once
// and checks that each arrives exactly once and that each sender's frames
// keep their order, whether the writer never yields before its flushes
// (nothing marked under way), always does (two requests held under way), or
// does as the connections use it (each sender marks its own frame).
func TestFrameWriterEveryFrameOnce(t *testing.T) {
	cases := map[string]struct{ held, perSend bool }{
		"alone":    {},
		"crowded":  {held: true},
		"per-send": {perSend: true},
	}
	const senders, frames = 8, 500
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer // written only under the writer's lock
			w := newFrameWriter(&out, func(err error) { t.Errorf("write failed: %v", err) })
			if tc.held {
				w.begin()
				w.begin()
			}
			var wg sync.WaitGroup
			for s := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range frames {
						b := getBuf()
						*b = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32((*b)[:0], uint32(s)), uint32(i))
						if tc.perSend {
							w.begin()
						}
						w.send(b)
						if tc.perSend {
							w.end()
						}
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
