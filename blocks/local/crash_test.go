package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// crashChildEnv names the directory the child writes into; when it is set,
// TestKillDuringWrite runs as the child.
const crashChildEnv = "NIMBUS_BLOCKS_CRASH_CHILD"

const (
	crashSize  = 16 << 20
	crashSyncs = 100_003 // sync about every this many bytes (never chunk-aligned)
)

var crashID = blocks.ID{Block: 77, GenStamp: 1}

// crashData is the byte stream the child writes.
func crashData() []byte {
	b := make([]byte, crashSize)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// TestKillDuringWrite: a child process writes one block in pieces of odd
// sizes, syncs every ~100 KB and prints each synced length; the parent
// SIGKILLs it part way, reopens the directory, recovers the block and checks
// that it keeps at least every synced byte, and exactly the bytes written.
func TestKillDuringWrite(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	want := crashData()
	for _, killAfter := range []int{1, 7, 60} {
		t.Run(fmt.Sprintf("after%dsyncs", killAfter), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringWrite$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var synced int64
			syncs := 0
			sc := bufio.NewScanner(out)
			parse := func(line string) {
				if f, ok := strings.CutPrefix(line, "synced "); ok {
					n, err := strconv.ParseInt(f, 10, 64)
					if err != nil {
						t.Errorf("bad line %q", line)
					}
					synced = max(synced, n)
					syncs++
				}
			}
			for syncs < killAfter && sc.Scan() {
				parse(sc.Text())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() { // lines printed before the kill landed count too
				parse(sc.Text())
			}
			_ = cmd.Wait()
			if syncs < killAfter {
				t.Fatalf("child printed %d syncs, want %d", syncs, killAfter)
			}

			st, err := Open(dir, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rep, err := st.Stat(context.Background(), crashID)
			if err != nil || rep.State != blocks.BeingWritten {
				t.Fatalf("after the kill: %+v, %v; want a replica being written", rep, err)
			}
			n, err := st.Recover(context.Background(), crashID, 2)
			if err != nil {
				t.Fatal(err)
			}
			if n < synced {
				t.Fatalf("recovered %d bytes, but %d were synced", n, synced)
			}
			rc, err := st.Read(context.Background(), blocks.ID{Block: 77, GenStamp: 2}, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, want[:n]) {
				t.Fatalf("recovered replica: %d bytes (differ at %d), %v; want the first %d bytes written",
					len(got), firstDiffBytes(got, want), err, n)
			}
			t.Logf("synced %d (after %d syncs), recovered %d", synced, syncs, n)
		})
	}
}

func firstDiffBytes(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func crashChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	st, err := Open(dir, DefaultConfig())
	if err != nil {
		fail(err)
	}
	w, err := st.Create(context.Background(), crashID)
	if err != nil {
		fail(err)
	}
	b := crashData()
	r := rand.New(rand.NewPCG(1, 2))
	next := int64(crashSyncs)
	for at := 0; at < len(b); {
		n := min(len(b)-at, 1+r.IntN(70_000))
		if _, err := w.Write(b[at : at+n]); err != nil {
			fail(err)
		}
		at += n
		if int64(at) >= next {
			if err := w.Sync(context.Background()); err != nil {
				fail(err)
			}
			fmt.Printf("synced %d\n", at)
			next += crashSyncs
		}
	}
	select {} // wait for the kill
}
