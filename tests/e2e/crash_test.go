package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// crashOp is one step of a crash-test client: it changes the set of names in
// the client's own directory.
type crashOp struct {
	desc  string
	run   func(ctx context.Context, c *client.Client) error
	apply func(names map[string]bool)
}

// crashOps returns the i-th step of a client working in dir: files are
// created, written, completed, renamed and deleted, directories made.
func crashOps(dir, lease string, i int) []crashOp {
	root := meta.User{Name: "root"}
	f, g, d := fmt.Sprintf("f%05d", i), fmt.Sprintf("g%05d", i), fmt.Sprintf("d%05d", i)
	prev := fmt.Sprintf("g%05d", i-1)
	data := []byte(strings.Repeat(fmt.Sprint(i%10), 100+i%50))
	return []crashOp{
		{"create " + f, func(ctx context.Context, c *client.Client) error {
			_, err := c.Create(ctx, root, dir+"/"+f, meta.CreateOptions{Client: lease})
			return err
		}, func(n map[string]bool) { n[f] = true }},
		{"write " + f, func(ctx context.Context, c *client.Client) error {
			return c.Write(ctx, root, dir+"/"+f, lease, 0, data)
		}, func(map[string]bool) {}},
		{"complete " + f, func(ctx context.Context, c *client.Client) error {
			_, err := c.Complete(ctx, root, dir+"/"+f, lease)
			return err
		}, func(map[string]bool) {}},
		{"rename " + f, func(ctx context.Context, c *client.Client) error {
			return c.Rename(ctx, root, dir+"/"+f, dir+"/"+g, meta.RenameOptions{})
		}, func(n map[string]bool) { delete(n, f); n[g] = true }},
		{"delete " + prev, func(ctx context.Context, c *client.Client) error {
			if i == 0 {
				return nil
			}
			return c.Delete(ctx, root, dir+"/"+prev, false)
		}, func(n map[string]bool) { delete(n, prev) }},
		{"mkdir " + d, func(ctx context.Context, c *client.Client) error {
			return c.Mkdirs(ctx, root, dir+"/"+d, 0)
		}, func(n map[string]bool) { n[d] = true }},
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCrashKeepsAcknowledgedOperations runs concurrent clients against a real
// server, kills it with SIGKILL mid-stream, restarts it from the same
// directory, and checks that every client's directory holds exactly the
// effect of its acknowledged operations (plus, possibly, the one that was in
// flight), that completed files have their bytes, and that fsck is clean.
func TestCrashKeepsAcknowledgedOperations(t *testing.T) { crashKeepsAcknowledged(t) }

// crashKeepsAcknowledged is the crash test with args given to both
// servers (the one killed and the one started after it on its data), e.g.
// a --store.
func crashKeepsAcknowledged(t *testing.T, args ...string) {
	const clients = 8
	s := startServer(t, t.TempDir(), "", args...)
	ctx := context.Background()
	setup, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := meta.User{Name: "root"}
	for c := 0; c < clients; c++ {
		if err := setup.Mkdirs(ctx, root, fmt.Sprintf("/crash/c%d", c), 0); err != nil {
			t.Fatal(err)
		}
	}
	setup.Close()

	type outcome struct {
		acked    map[string]bool // names after the acknowledged operations
		inflight *crashOp        // the operation whose outcome is unknown
		steps    int
	}
	outcomes := make([]outcome, clients)
	runCtx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			o := &outcomes[c]
			o.acked = map[string]bool{}
			cl, err := client.Dial(ctx, s.url(), client.Options{Conns: 1})
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			dir := fmt.Sprintf("/crash/c%d", c)
			for i := 0; ; i++ {
				for _, op := range crashOps(dir, fmt.Sprintf("lease-c%d", c), i) {
					if runCtx.Err() != nil {
						return
					}
					if err := op.run(ctx, cl); err != nil {
						o.inflight = &op // the server died under it: outcome unknown
						return
					}
					op.apply(o.acked)
					o.steps++
				}
			}
		}(c)
	}
	time.Sleep(1500 * time.Millisecond)
	s.kill()
	stopClients()
	wg.Wait()

	total := 0
	for _, o := range outcomes {
		total += o.steps
	}
	if total < clients*6 {
		t.Fatalf("only %d operations were acknowledged before the kill: the test measured nothing", total)
	}
	t.Logf("%d operations acknowledged by %d clients before SIGKILL", total, clients)

	s2 := startServer(t, s.data, "", args...)
	cl, err := client.Dial(ctx, s2.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for c, o := range outcomes {
		dir := fmt.Sprintf("/crash/c%d", c)
		got := map[string]bool{}
		after := ""
		for {
			l, err := cl.List(ctx, root, dir, after, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range l.Entries {
				got[e.Name()] = true
				if strings.HasPrefix(e.Name(), "g") && !e.UnderConstruction {
					var i int
					fmt.Sscanf(e.Name(), "g%d", &i)
					data, err := cl.Read(ctx, root, e.Path, 0, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					want := strings.Repeat(fmt.Sprint(i%10), 100+i%50)
					if string(data) != want {
						t.Errorf("%s: %d bytes after restart, want %d", e.Path, len(data), len(want))
					}
				}
			}
			if l.Remaining == 0 {
				break
			}
			after = l.Entries[len(l.Entries)-1].Name()
		}
		want := keys(o.acked)
		alt := want
		if o.inflight != nil {
			m := map[string]bool{}
			for k := range o.acked {
				m[k] = true
			}
			o.inflight.apply(m)
			alt = keys(m)
		}
		if g := keys(got); !slices.Equal(g, want) && !slices.Equal(g, alt) {
			desc := "none"
			if o.inflight != nil {
				desc = o.inflight.desc
			}
			t.Errorf("client %d: after restart %v\nacknowledged state %v\nin flight: %s", c, g, want, desc)
		}
	}
	rep, err := cl.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("fsck after crash and restart: %v", rep.Problems)
	}
}
