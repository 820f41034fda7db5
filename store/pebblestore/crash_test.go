package pebblestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// crashChildEnv names the directory the child process commits into; when it
// is set, TestKillDurability runs as the child.
const crashChildEnv = "NIMBUS_PEBBLESTORE_CRASH_CHILD"

// TestKillDurability: a child process commits from several goroutines and
// prints every acknowledged key and id range; the parent SIGKILLs it
// mid-stream, reopens the directory and checks that everything acknowledged
// is there.
func TestKillDurability(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
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
	for sc.Scan() && len(acked) < 400 {
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
	if len(acked) < 400 {
		t.Fatalf("child acknowledged only %d commits before exiting", len(acked))
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
func crashChild(dir string) {
	opts := DefaultOptions()
	opts.IDPrefetch = 8 // cross reservation boundaries often
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
				txn.Put([]byte(k), []byte("v"+k))
				txn.Put([]byte("echo-"+k), []byte(k))
				if err := txn.Commit(ctx); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				ack(fmt.Sprintf("put %s v%s\n", k, k))
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
