package pebblestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// crashChildEnv names the directory the child process commits into; when it
// is set, the test runs as the child. crashRotateEnv makes the child rotate
// its write-ahead log every megabyte, with large values.
const (
	crashChildEnv  = "NIMBUS_PEBBLESTORE_CRASH_CHILD"
	crashRotateEnv = "NIMBUS_PEBBLESTORE_CRASH_ROTATE"
)

// TestKillDurability: a child process commits from several goroutines and
// prints every acknowledged key and id range; the parent SIGKILLs it
// mid-stream, reopens the directory and checks that everything acknowledged
// is there.
func TestKillDurability(t *testing.T) {
	testKill(t, "TestKillDurability", 400, false)
}

// TestKillDurabilityRotating is TestKillDurability across many log
// rotations: the child's logs are prefilled with zeros ahead of their end
// (walprefill.go), closed with Pebble's EOF trailer, recycled, and one of
// them is cut short by the kill. Reopening must read past none of the zero
// tails and lose nothing acknowledged.
func TestKillDurabilityRotating(t *testing.T) {
	testKill(t, "TestKillDurabilityRotating", 3000, true)
}

func testKill(t *testing.T, name string, acks int, rotate bool) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir, os.Getenv(crashRotateEnv) != "")
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	if rotate {
		cmd.Env = append(cmd.Env, crashRotateEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]string{}
	var maxID uint64
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < acks {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "put":
			acked[f[1]] = f[2]
		case len(f) == 2 && f[0] == "id":
			id, _ := strconv.ParseUint(f[1], 10, 64)
			maxID = max(maxID, id)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Lines acknowledged before the kill landed are acknowledged too.
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "put" {
			acked[f[1]] = f[2]
		} else if len(f) == 2 && f[0] == "id" {
			id, _ := strconv.ParseUint(f[1], 10, 64)
			maxID = max(maxID, id)
		}
	}
	_ = cmd.Wait()
	if len(acked) < acks {
		t.Fatalf("child acknowledged only %d commits before exiting", len(acked))
	}

	if rotate {
		requireZeroTail(t, dir)
	}
	st, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer st.Close()
	txn, _ := st.Begin(context.Background())
	defer txn.Rollback()
	lost := 0
	for k, v := range acked {
		vals, err := txn.Read(context.Background(), []store.ReadReq{{Key: []byte(k)}})
		if err != nil {
			t.Fatal(err)
		}
		if string(vals[0]) != v {
			lost++
			if lost < 5 {
				t.Errorf("acknowledged %s=%s reads back as %q", k, v, vals[0])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged commits lost", lost, len(acked))
	}
	id, err := st.AllocateIDs(context.Background(), store.CounterInode, 1)
	if err != nil || id <= maxID {
		t.Fatalf("after the crash AllocateIDs = %d (%v), want above every acknowledged id %d", id, err, maxID)
	}
	t.Logf("%d acknowledged commits and ids up to %d survived SIGKILL", len(acked), maxID)
}

// crashChild commits forever until killed. Each transaction writes two rows
// (a key and its echo) and acknowledges the key only after Commit returned.
// With rotate, the value is padded to 2 KB and the memtable (so the log) is
// rotated every megabyte, with 256 KB of log prefilled.
func crashChild(dir string, rotate bool) {
	opts := DefaultOptions()
	opts.IDPrefetch = 8 // cross reservation boundaries often
	pad := ""
	if rotate {
		opts.MemTableSize = 1 << 20
		opts.WALPrefill = 256 << 10
		pad = strings.Repeat("p", 2048)
	}
	st, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	ack := func(line string) {
		mu.Lock()
		w.WriteString(line)
		w.Flush() // unbuffered: a printed line is an acknowledgement
		mu.Unlock()
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("crash-%d-%06d", g, i)
				txn, err := st.Begin(ctx)
				if err != nil {
					os.Exit(3)
				}
				if _, err := txn.Read(ctx, []store.ReadReq{{Key: []byte(k), Mode: store.Exclusive}}); err != nil {
					os.Exit(3)
				}
				txn.Put([]byte(k), []byte("v"+k+pad))
				txn.Put([]byte("echo-"+k), []byte(k))
				if err := txn.Commit(ctx); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				ack(fmt.Sprintf("put %s v%s%s\n", k, k, pad))
				if i%10 == 0 {
					id, err := st.AllocateIDs(ctx, store.CounterInode, 3)
					if err != nil {
						os.Exit(3)
					}
					ack(fmt.Sprintf("id %d\n", id+2))
				}
			}
		})
	}
	wg.Wait()
}

// requireZeroTail checks that the newest write-ahead log in dir ends in
// prefilled zeros, so that the reopen that follows really reads past a
// zero tail.
func requireZeroTail(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log in the child's directory")
	}
	slices.Sort(logs) // zero-padded numbers: the last is the newest
	b, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 4096 || slices.ContainsFunc(b[len(b)-4096:], func(c byte) bool { return c != 0 }) {
		t.Fatalf("%s (%d bytes) does not end in prefilled zeros", logs[len(logs)-1], len(b))
	}
}
