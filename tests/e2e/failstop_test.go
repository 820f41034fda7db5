package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// failStopBound is how long a server may take to exit once its store failed:
// the identity check interval or the failing write, plus the fail-stop
// timeout (--fail-stop-timeout 2s below) and slack for a loaded machine.
const failStopBound = 20 * time.Second

// waitExit waits up to d for the server process to exit and returns its exit
// code; the test fails if it is still running (the hang of issue 24).
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
	s2 := startServer(t, data, "")
	c2, err := client.Dial(ctx, s2.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for p, want := range acked {
		got, err := c2.ReadFile(ctx, root, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("acknowledged %s after restart: %d bytes, %v; want %d bytes", p, len(got), err, len(want))
		}
	}
	if out := s2.ok("fsck"); !strings.Contains(out, "HEALTHY") {
		t.Fatalf("fsck after restart: %s", out)
	}
}

// TestDataDirRemovedFailStop removes the data directory (rm -rf) under a
// running server: it notices (at once through inotify, else within its
// check interval), logs why, exits non-zero, and writes are refused from
// then on. Before, mkdir and put went
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
