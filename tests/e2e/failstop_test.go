package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// failStopBound is how long a server may take to exit once its store failed:
// the identity check interval or the failing write, plus the fail-stop
// timeout (--fail-stop-timeout 2s below) and slack for a loaded machine.
const failStopBound = 20 * time.Second

// waitExit waits up to d for the server process to exit and returns its exit
// code; the test fails if it is still running (a server that hangs
// instead of stopping after its store failed).
func (s *server) waitExit(d time.Duration) int {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump into the log
		time.Sleep(500 * time.Millisecond)
		_ = s.cmd.Process.Kill()
		<-done
		s.t.Fatalf("server still running %v after its store failed\n%s", d, s.log.String())
		return -1
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, or skips the
// test when that cannot be done here (not root, no mount permission).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: mount -t tmpfs failed here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFullFailStop fills the server's real (small) file system: the
// write that meets ENOSPC fails, the server logs the cause and exits
// non-zero within a bound instead of hanging; after space is freed a
// restart on the same data has every acknowledged write and fsck is clean.
func TestDiskFullFailStop(t *testing.T) {
	mnt := mountTmpfs(t, "64m")
	data := filepath.Join(mnt, "data")
	s := startServer(t, data, "", "--fail-stop-timeout", "2s")
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/full", 0); err != nil {
		t.Fatal(err)
	}

	// Leave ~3 MB free beside the store: its next writes fill the rest.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	free := int64(st.Bavail) * st.Bsize
	if err := os.WriteFile(filler, make([]byte, free-3<<20), 0o644); err != nil {
		t.Fatal(err)
	}

	// Small files go inline into the metadata store: each is a commit of
	// its 32 KB into the write-ahead log.
	acked := map[string][]byte{}
	var lastErr error
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		p := fmt.Sprintf("/full/f%05d", i)
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 32<<10)
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.CreateFile(opCtx, root, p, meta.CreateOptions{}, body)
		cancel()
		if err != nil {
			lastErr = err
			break
		}
		acked[p] = body
	}
	if lastErr == nil {
		t.Fatalf("%d writes of 32 KB into a full 64 MB file system all succeeded", len(acked))
	}
	t.Logf("%d writes acknowledged, then: %v", len(acked), lastErr)
	if code := s.waitExit(failStopBound); code == 0 {
		t.Fatalf("server exited 0 after its store failed\n%s", s.log.String())
	}
	log := s.log.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "no space left on device") {
		t.Fatalf("server log does not name the cause at ERROR:\n%s", log)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	checkAckedAfterRestart(t, data, acked)
}

// TestDataDirRemovedFailStop removes the data directory (rm -rf) under a
// running server: it notices (at once through inotify, else within its
// check interval), logs why, exits non-zero, and writes are refused from
// then on. The failure guarded against: mkdir and put went
// on succeeding into unlinked files and were lost.
func TestDataDirRemovedFailStop(t *testing.T) {
	s := startServer(t, "", "", "--fail-stop-timeout", "2s")
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/d/before", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(s.data); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	// Writes go on until the server notices; the ones after that are refused.
	var refused error
	acked := 0
	for i := 0; time.Since(removed) < failStopBound; i++ {
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CreateFile(opCtx, root, fmt.Sprintf("/d/f%05d", i), meta.CreateOptions{}, []byte("lost?"))
		cancel()
		if err != nil {
			refused = err
			break
		}
		acked++
		time.Sleep(10 * time.Millisecond)
	}
	if refused == nil {
		t.Fatalf("writes still acknowledged %v after the data directory was removed", failStopBound)
	}
	t.Logf("first refused write %v after the removal, %d acknowledged in between: %v", time.Since(removed).Round(time.Millisecond), acked, refused)
	if code := s.waitExit(failStopBound); code == 0 {
		t.Fatalf("server exited 0 after its data directory was removed\n%s", s.log.String())
	}
	log := s.log.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "data directory removed or replaced") {
		t.Fatalf("server log does not name the cause at ERROR:\n%s", log)
	}
	opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Mkdirs(opCtx, root, "/d/after", 0); err == nil {
		t.Fatal("mkdir acknowledged after the server stopped")
	}
}

// fillDisk writes a file into mnt until its file system has no room left,
// and returns its path.
func fillDisk(t *testing.T, mnt string) string {
	t.Helper()
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The last, partial chunk: fill to the last byte.
	for _, n := range []int{4 << 10, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return filler
}

// TestDiskFullAfterRecycleFailStop: the disk fills after the server has run
// a while, its store's logs recycled and preallocated: the log's writes go
// on into blocks it has, only flushes fail. The server must still stop with
// the cause (exit non-zero, the log bounded); a start on the still-full disk
// must fail with the reason instead of never finishing; once space is freed a
// restart has every acknowledged write. The failure guarded against: commits waited in a write
// stall until their clients gave up, /readyz answered 200, the log grew by
// hundreds of thousands of lines and the process never exited; a restart
// never finished opening the store and ignored SIGTERM.
func TestDiskFullAfterRecycleFailStop(t *testing.T) {
	mnt := mountTmpfs(t, "64m")
	data := filepath.Join(mnt, "data")
	s := startServer(t, data, "", "--fail-stop-timeout", "2s", "--memtable-mb", "1")
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/full", 0); err != nil {
		t.Fatal(err)
	}
	acked := map[string][]byte{}
	write := func(i int) error {
		p := fmt.Sprintf("/full/f%05d", i)
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 32<<10)
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.CreateFile(opCtx, root, p, meta.CreateOptions{}, body); err != nil {
			return err
		}
		acked[p] = body
		return nil
	}
	// ~6 MiB through 1 MiB memtables: flushes, logs recycled.
	i := 0
	for ; i < 200; i++ {
		if err := write(i); err != nil {
			t.Fatal(err)
		}
	}
	filler := fillDisk(t, mnt)
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); i++ {
		if lastErr = write(i); lastErr != nil {
			break
		}
	}
	if lastErr == nil {
		t.Fatalf("writes on a full disk still acknowledged after 60 s (%d in all)", len(acked))
	}
	t.Logf("%d writes acknowledged, then: %v", len(acked), lastErr)
	if code := s.waitExit(failStopBound); code == 0 {
		t.Fatalf("server exited 0 after its store failed\n%s", s.log.String())
	}
	log := s.log.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "no space left on device") {
		t.Fatalf("server log does not name the cause at ERROR:\n%s", log)
	}
	if n := strings.Count(log, "\n"); n > 1000 {
		t.Errorf("the server logged %d lines on its way out; a repeated error must be rate-limited", n)
	}

	// A start on the still-full disk fails with the reason.
	s2 := newServer(t, testproc.Spawn(t, binary, data, "", "--superuser", "root", "--memtable-mb", "1"))
	if code := s2.waitExit(failStopBound); code == 0 {
		t.Fatalf("a start on a full disk exited 0\n%s", s2.log.String())
	}
	log2 := s2.log.String()
	if !strings.Contains(log2, "no space left on device") {
		t.Fatalf("a start on a full disk does not say why it failed:\n%s", log2)
	}
	t.Logf("the first server logged %d lines; the start on the full disk %d, ending:\n%s",
		strings.Count(log, "\n"), strings.Count(log2, "\n"), lastLines(log2, 2))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	checkAckedAfterRestart(t, data, acked)
}

// TestDataDirRemovedLedger: writers create files while the data directory
// is removed by rm -rf; a ledger keeps each write's start and outcome. The
// test removes the store's first file itself (as rm -rf begins, with a file
// the store neither holds open nor checks), lets the writers go on a while,
// as rm -rf of a big directory does, then runs rm -rf: from the first
// removal on, the directory is being lost, so no write that started after it
// may be acknowledged (it would be lost with the directory). The failure guarded against: writes
// were acknowledged until the removal reached the identity file.
func TestDataDirRemovedLedger(t *testing.T) {
	s := startServer(t, "", "", "--fail-stop-timeout", "2s", "--data-check-interval", "0")
	ctx := context.Background()
	root := meta.User{Name: "root"}
	type entry struct {
		start time.Time
		err   error
	}
	const writers = 8
	ledgers := make([][]entry, writers)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		c, err := client.Dial(ctx, s.url(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Mkdirs(ctx, root, fmt.Sprintf("/w%d", w), 0); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				start := time.Now()
				opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.CreateFile(opCtx, root, fmt.Sprintf("/w%d/f%06d", w, i), meta.CreateOptions{}, []byte("lost?"))
				cancel()
				ledgers[w] = append(ledgers[w], entry{start, err})
				if err != nil {
					return
				}
				acked.Add(1)
			}
		}()
	}
	for acked.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	metaDir := filepath.Join(s.data, "meta")
	ents, err := os.ReadDir(metaDir)
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "OPTIONS-") {
			first = filepath.Join(metaDir, e.Name())
		}
	}
	if first == "" {
		t.Fatalf("no OPTIONS file in %s", metaDir)
	}
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// rm -rf of a big directory takes a while to reach the files the store
	// checks: the writers go on meanwhile (until refused, or for up to 1 s).
	for n := acked.Load(); acked.Load() < n+100 && time.Since(began) < time.Second; {
		time.Sleep(time.Millisecond)
	}
	if out, err := exec.Command("rm", "-rf", s.data).CombinedOutput(); err != nil {
		t.Fatalf("rm -rf %s: %v: %s", s.data, err, out)
	}
	wg.Wait()
	lost, total := 0, 0
	for w := range ledgers {
		for _, e := range ledgers[w] {
			if e.err == nil {
				total++
				if e.start.After(began) {
					lost++
				}
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes started after the removal began, and are lost with the directory", lost, total)
	}
	t.Logf("%d writes acknowledged, none after the removal began", total)
	if code := s.waitExit(failStopBound); code == 0 {
		t.Fatalf("server exited 0 after its data directory was removed\n%s", s.log.String())
	}
	if log := s.log.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "data directory removed or replaced") {
		t.Fatalf("server log does not name the cause at ERROR:\n%s", log)
	}
}

// TestDataDirMovedFailStop: the data directory moved (mv) under a running
// server: the store's open files move with it, so its writes stay durable
// there, until it must create its next log at the old path. It must then
// stop cleanly with the cause (exit 1), not die of a fatal error of the Go
// runtime (exit 2, "sync: unlock of unlocked mutex"), which a panic of Pebble
// in its log rotation caused.
func TestDataDirMovedFailStop(t *testing.T) {
	s := startServer(t, "", "", "--fail-stop-timeout", "2s", "--memtable-mb", "1", "--data-check-interval", "0")
	ctx := context.Background()
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/m", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.data, s.data+".moved"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.data + ".moved") })
	var refused error
	acked := 0
	for i := 0; i < 2000; i++ {
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.CreateFile(opCtx, root, fmt.Sprintf("/m/f%05d", i), meta.CreateOptions{}, bytes.Repeat([]byte("m"), 32<<10))
		cancel()
		if err != nil {
			refused = err
			break
		}
		acked++
	}
	if refused == nil {
		t.Fatalf("2000 writes of 32 KB (64 MB through 1 MB memtables) acknowledged into the moved directory")
	}
	t.Logf("%d writes acknowledged into the moved directory, then: %v", acked, refused)
	code := s.waitExit(failStopBound)
	log := s.log.String()
	if code != 1 || strings.Contains(log, "fatal error:") || strings.Contains(log, "panic:") {
		t.Fatalf("server exited %d after its data directory moved, want 1 without a panic or fatal error\n%s", code, log)
	}
	if !strings.Contains(log, "data directory removed or replaced") {
		t.Fatalf("server log does not name the cause:\n%s", log)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkAckedAfterRestart starts a server on data again and checks that it
// has every acknowledged write in acked (path to content) and a clean fsck.
func checkAckedAfterRestart(t *testing.T, data string, acked map[string][]byte) {
	t.Helper()
	ctx, root := context.Background(), meta.User{Name: "root"}
	s := startServer(t, data, "")
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for p, want := range acked {
		got, err := c.ReadFile(ctx, root, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("acknowledged %s after restart: %d bytes, %v; want %d bytes", p, len(got), err, len(want))
		}
	}
	if out := s.ok("fsck"); !strings.Contains(out, "HEALTHY") {
		t.Fatalf("fsck after restart: %s", out)
	}
}
