package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestStreamFS round-trips sizes around the chunk boundaries, up to the
// engine's inline limit, and checks the writer's close contract.
func TestStreamFS(t *testing.T) {
	fs := newTestFS(t)
	s := streamFS{FileSystem: fs, client: "stream-test"}
	ctx := context.Background()
	u := meta.User{Name: "alice"}
	for _, n := range []int{0, 1, streamChunk - 1, streamChunk, streamChunk + 1, 2 * streamChunk} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		p := "/user/alice/s"
		w, err := s.CreateWriter(ctx, u, p, meta.CreateOptions{Overwrite: true})
		if err != nil {
			t.Fatal(err)
		}
		// Odd-sized writes, so that chunks are filled from several calls.
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 10007)
			if m, err := w.Write(rest[:k]); err != nil || m != k {
				t.Fatalf("size %d: write %d, %v", n, m, err)
			}
			rest = rest[k:]
		}
		if err := w.Close(); err != nil {
			t.Fatalf("size %d: close: %v", n, err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("size %d: second close: %v", n, err)
		}
		if _, err := w.Write([]byte("x")); !errors.Is(err, errWriterClosed) {
			t.Errorf("write after close: %v", err)
		}
		rc, err := s.OpenReader(ctx, u, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("size %d: read back %d bytes, %v", n, len(got), err)
		}
		_ = rc.Close()
	}
	if _, err := s.OpenReader(ctx, u, "/user/alice"); meta.KindOf(err) != meta.KindIsDir {
		t.Errorf("open a directory: %v", err)
	}
	if _, err := s.OpenReader(ctx, u, "/user/alice/none"); meta.KindOf(err) != meta.KindNotFound {
		t.Errorf("open a missing file: %v", err)
	}
}
