package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

const threshold = 128 << 10 // the server's default inline threshold

// TestFileSizes puts files of every interesting size through the client
// library with a small block size, reads each back through the CLI and
// compares every byte.
func TestFileSizes(t *testing.T) {
	s := startServer(t, "", "", "--min-block-size", "64k") // 256 KB blocks, under HDFS's 1 MB minimum
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bs = 256 << 10
	root := meta.User{Name: "root"}
	sizes := []int{0, 1, threshold - 1, threshold, threshold + 1, bs, 3*bs + 12345, 2 << 20}
	for _, size := range sizes {
		data := make([]byte, size)
		rand.Read(data)
		p := fmt.Sprintf("/sizes/f%d", size)
		w, err := c.CreateWriter(ctx, root, p, meta.CreateOptions{BlockSize: bs, CreateParent: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("close %s: %v", p, err)
		}
		if got := s.ok("fs", "cat", p); got != string(data) {
			t.Fatalf("%s: cat returned %d bytes, want %d identical", p, len(got), size)
		}
	}
	// The CLI's put, with its block-size flag, and get.
	local := filepath.Join(t.TempDir(), "big")
	big := make([]byte, 3<<20+777)
	rand.Read(big)
	if err := os.WriteFile(local, big, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("fs", "put", "--block-size", "1m", local, "/sizes/big")
	back := filepath.Join(t.TempDir(), "back")
	s.ok("fs", "get", "/sizes/big", back)
	if got, _ := os.ReadFile(back); !bytes.Equal(got, big) {
		t.Fatal("get of a 3 MB file returned different bytes")
	}
	if out := s.ok("fsck"); !strings.Contains(out, "HEALTHY") {
		t.Fatalf("fsck: %s", out)
	}
}

// TestCorruptBlockIsAClearError flips one byte of a block file on disk: a read
// fails naming the file and the block, and never returns wrong bytes.
func TestCorruptBlockIsAClearError(t *testing.T) {
	s := startServer(t, "", "")
	local := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 600<<10)
	rand.Read(data)
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("fs", "put", local, "/f")
	var blockFile string
	filepath.WalkDir(filepath.Join(s.data, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "blk_") && !strings.HasSuffix(d.Name(), ".meta") {
			blockFile = p
		}
		return nil
	})
	if blockFile == "" {
		t.Fatal("no block file under the data directory")
	}
	f, err := os.OpenFile(blockFile, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, 1000)
	b[0] ^= 0xff
	f.WriteAt(b, 1000)
	f.Close()
	r := s.nimbus("", "fs", "cat", "/f")
	if r.code != 1 || !strings.Contains(r.stderr, "/f") || !strings.Contains(r.stderr, "block") {
		t.Fatalf("cat of a corrupt file: code %d, stderr %q", r.code, r.stderr)
	}
	if bytes.Contains([]byte(r.stdout), data[:2000]) && len(r.stdout) > 1000 && r.stdout[1000] != string(data[1000:1001])[0] {
		t.Fatal("wrong bytes were returned")
	}
	if strings.Contains(r.stdout, string(data[:1001])) {
		t.Fatal("the corrupt chunk was returned")
	}
}

// TestKillDuringLargePut: SIGKILL of the server while a large file is being
// written. After a restart the file is absent, or under construction, and
// once its lease is recovered it holds a prefix of what was sent, never
// bytes it does not have; fsck is clean throughout.
func TestKillDuringLargePut(t *testing.T) {
	s := startServer(t, "", "")
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := meta.User{Name: "root"}
	data := make([]byte, 64<<20)
	rand.Read(data)
	w, err := c.CreateWriter(ctx, root, "/big", meta.CreateOptions{BlockSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the server once 16 MB have gone through the writer, with 48 MB
	// still to send: the put is cut in the middle whatever the machine's speed.
	halfway := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, &signalReader{r: bytes.NewReader(data), after: 16 << 20, signal: halfway})
		if err == nil {
			err = w.Close()
		}
		done <- err
	}()
	<-halfway
	s.kill()
	if err := <-done; err == nil {
		t.Fatal("the put succeeded although the server was killed in the middle of it")
	}
	c.Close()

	// A short hard limit, so that the restarted server recovers the lease soon.
	s2 := startServer(t, s.data, "", "--lease-hard-limit", "1s")
	c2, err := client.Dial(ctx, s2.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	st, err := c2.Stat(ctx, root, "/big")
	if err != nil {
		if meta.KindOf(err) != meta.KindNotFound {
			t.Fatal(err)
		}
		return // absent: fine
	}
	if st.Length != 0 && !st.UnderConstruction {
		t.Fatalf("a file cut by a crash claims %d complete bytes", st.Length)
	}
	rep, err := c2.Fsck(ctx)
	if err != nil || !rep.Clean() {
		t.Fatalf("fsck after the crash: %v %v", err, rep)
	}
	// Lease recovery closes the file at what its blocks hold durably: a
	// prefix of what was sent.
	deadline := time.Now().Add(30 * time.Second)
	for st.UnderConstruction && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if st, err = c2.Stat(ctx, root, "/big"); err != nil {
			t.Fatal(err)
		}
	}
	if st.UnderConstruction {
		t.Fatal("the lease was not recovered")
	}
	got, err := c2.ReadFile(ctx, root, "/big")
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != st.Length || !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("recovered %d bytes (length %d) that are not a prefix of what was sent", len(got), st.Length)
	}
	t.Logf("recovered %d of %d bytes after SIGKILL", len(got), len(data))
	s2.stop()
	r := s2.nimbus("", "fsck", "--data", s.data)
	if r.code != 0 {
		t.Fatalf("fsck --data after the crash: %s%s", r.stdout, r.stderr)
	}
}

// signalReader closes signal once more than after bytes were read, then
// blocks briefly so that the reader's consumer cannot finish first.
type signalReader struct {
	r      io.Reader
	n      int64
	after  int64
	signal chan struct{}
}

func (s *signalReader) Read(p []byte) (int, error) {
	if s.n > s.after {
		if s.signal != nil {
			close(s.signal)
			s.signal = nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}
