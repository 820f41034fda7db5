package clusterauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func key(t testing.TB, fill byte, now func() time.Time) *Key {
	t.Helper()
	k, err := New(bytes.Repeat([]byte{fill}, SecretSize), now)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func req(method, path string) *http.Request {
	r, _ := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
	return r
}

// TestSignVerify: a signed request verifies with the same secret; a
// request without the credential, with another secret's, changed after
// signing (method, path, body), or too old or too new is refused.
func TestSignVerify(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	clock := func() time.Time { return now }
	k, other := key(t, 1, clock), key(t, 2, clock)
	body := []byte("batch")

	r := req("POST", "/coherence")
	k.Sign(r, body)
	if err := k.Verify(r, body); err != nil {
		t.Fatalf("a member's request: %v", err)
	}
	if err := other.Verify(r, body); !errors.Is(err, ErrInvalid) {
		t.Errorf("verified with another secret: %v, want ErrInvalid", err)
	}
	if err := k.Verify(r, []byte("batcH")); !errors.Is(err, ErrInvalid) {
		t.Errorf("another body: %v, want ErrInvalid", err)
	}
	if err := k.Verify(req("POST", "/coherence"), body); !errors.Is(err, ErrMissing) || !errors.Is(err, ErrRefused) {
		t.Errorf("no credential: %v, want ErrMissing", err)
	}
	moved := req("POST", "/other")
	moved.Header = r.Header.Clone()
	if err := k.Verify(moved, body); !errors.Is(err, ErrInvalid) {
		t.Errorf("another path: %v, want ErrInvalid", err)
	}
	get := req("GET", "/coherence")
	get.Header = r.Header.Clone()
	if err := k.Verify(get, body); !errors.Is(err, ErrInvalid) {
		t.Errorf("another method: %v, want ErrInvalid", err)
	}
	for _, d := range []time.Duration{MaxSkew + time.Second, -MaxSkew - time.Second} {
		now = t0.Add(d)
		if err := k.Verify(r, body); !errors.Is(err, ErrExpired) {
			t.Errorf("verified %v after signing: %v, want ErrExpired", d, err)
		}
	}
	now = t0.Add(MaxSkew - time.Second)
	if err := k.Verify(r, body); err != nil {
		t.Errorf("verified within the window: %v", err)
	}
	for _, bad := range []string{"v1", "v2 1 x", "v1 1", "v1 -5 " + r.Header.Get(Header)[len("v1 1800000000000000000 "):], "v1 01800000000000000000 AAAA"} {
		b := req("POST", "/coherence")
		b.Header.Set(Header, bad)
		if err := k.Verify(b, body); !errors.Is(err, ErrInvalid) {
			t.Errorf("credential %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := New(make([]byte, 31), nil); err == nil {
		t.Error("New took a 31-byte secret")
	}
}

// TestLoad: the first Load on a store makes the secret and records it;
// later Loads (and concurrent first ones) get the same Key; another store
// has another secret. On the embedded store and on PostgreSQL.
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"pebble", func(t *testing.T) store.Store {
			st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"postgres", func(t *testing.T) store.Store {
			st, err := pgstore.Open(context.Background(), pgtest.DB(t), pgstore.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.open(t)
			defer st.Close()
			ctx := context.Background()
			keys := make([]*Key, 4)
			var wg sync.WaitGroup
			for i := range keys {
				wg.Go(func() {
					k, err := Load(ctx, st, nil)
					if err != nil {
						t.Error(err)
					}
					keys[i] = k
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			r := req("POST", "/coherence")
			keys[0].Sign(r, nil)
			for i, k := range keys {
				if err := k.Verify(r, nil); err != nil {
					t.Errorf("Load %d has another key: %v", i, err)
				}
			}
			again, err := Load(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := again.Verify(r, nil); err != nil {
				t.Errorf("a later Load has another key: %v", err)
			}
			other := tc.open(t)
			defer other.Close()
			ok, err := Load(ctx, other, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ok.Verify(r, nil); !errors.Is(err, ErrInvalid) {
				t.Errorf("another store's key verified: %v", err)
			}
		})
	}
}

// FuzzVerify: no credential header, however malformed, verifies or
// panics.
func FuzzVerify(f *testing.F) {
	k := key(f, 1, nil)
	r := req("POST", "/coherence")
	k.Sign(r, []byte("x"))
	f.Add(r.Header.Get(Header), []byte("x"))
	f.Add("v1 1 AAAA", []byte(nil))
	f.Add("v1 9223372036854775807 "+r.Header.Get(Header)[len("v1 1800000000000000000 "):], []byte(""))
	f.Fuzz(func(t *testing.T, h string, body []byte) {
		r := req("POST", "/coherence")
		r.Header.Set(Header, h)
		want := req("POST", "/coherence")
		k.Sign(want, body)
		if err := k.Verify(r, body); err == nil && h != want.Header.Get(Header) {
			// Only a credential this key made (perhaps at another
			// nanosecond) verifies: it must carry a MAC over this request.
			ts, mac, perr := parse(h)
			if perr != nil || !bytes.Equal(mac, k.sum("POST", "/coherence", ts, body)) {
				t.Fatalf("header %q verified", h)
			}
		}
	})
}

// BenchmarkSignVerify: one request signed and verified, with a body of a
// coherence batch's size (a stream's upgrade has none; a plain POST
// carries one batch). docs/OPERATIONS.md sets it against an INV's round
// trip.
func BenchmarkSignVerify(b *testing.B) {
	k := key(b, 1, nil)
	for _, size := range []int{0, 100, 4096} {
		body := bytes.Repeat([]byte{'x'}, size)
		b.Run(fmt.Sprintf("body%d", size), func(b *testing.B) {
			r := req("POST", "/coherence")
			b.ReportAllocs()
			for b.Loop() {
				k.Sign(r, body)
				if err := k.Verify(r, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
