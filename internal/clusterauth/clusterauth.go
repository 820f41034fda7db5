// Package clusterauth authenticates the requests a cluster's own processes
// send each other (coherence messages between NameNode instances, and
// whatever member traffic comes next: a DataNode's registration, a
// platform's control of its instances), so that a client that can reach a
// server's port cannot speak as a member.
//
// Every cluster has one secret: 32 bytes from crypto/rand, made by the
// first server that starts against a store and kept in it (Load), so that
// every server on that store, and every process with access to it, reads
// the same one. Having the store is what makes a process a member: whoever
// can read the store can change the namespace anyway.
//
// A member signs a request (Key.Sign): an HMAC-SHA256, under a key derived
// from the secret, over the method, the path, a timestamp and the body, in
// the Nimbus-Member header. The receiver recomputes it (Key.Verify), in
// constant time, and refuses a request without it, with another, or with
// a timestamp further than MaxSkew from its own clock. What this does and
// does not protect against (docs/OPERATIONS.md, "Cluster secret: traffic
// between a cluster's processes"): a client that does not know the secret
// cannot make a request a member accepts, nor alter a signed one; without
// TLS, a party that can read the traffic between servers (not a client: a
// host on the path) can replay a signed request within MaxSkew, or write
// into a stream it watched open, so the network between servers is still
// trusted for confidentiality.
package clusterauth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// SecretSize is the length of a cluster secret in bytes.
const SecretSize = 32

// Header carries a request's credential: "v1 <unix nanoseconds> <MAC,
// base64url without padding>".
const Header = "Nimbus-Member"

// MaxSkew bounds how far a request's timestamp may be from the receiver's
// clock: the members' clocks must agree within it (NTP keeps them within
// milliseconds), and it is the window in which a recorded request could be
// replayed.
const MaxSkew = 2 * time.Minute

// Errors of Verify; each wraps ErrRefused.
var (
	// ErrRefused: the request is not a member's.
	ErrRefused = errors.New("clusterauth: not a member's request")
	// ErrMissing: the request carries no credential.
	ErrMissing = fmt.Errorf("%w: no %s header", ErrRefused, Header)
	// ErrInvalid: the credential is malformed, or not made with the
	// cluster's secret over this request.
	ErrInvalid = fmt.Errorf("%w: bad credential", ErrRefused)
	// ErrExpired: the credential's timestamp is further than MaxSkew from
	// the receiver's clock.
	ErrExpired = fmt.Errorf("%w: credential outside the clock window", ErrRefused)
)

// Key signs and verifies member requests with one cluster's secret. Safe
// for concurrent use; immutable.
type Key struct {
	mac []byte // derived from the secret: see New
	now func() time.Time
}

// New returns the Key of secret (SecretSize bytes). now is the clock for
// timestamps and their check; nil: time.Now.
func New(secret []byte, now func() time.Time) (*Key, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("clusterauth: a secret of %d bytes, want %d", len(secret), SecretSize)
	}
	if now == nil {
		now = time.Now
	}
	// A key of its own for member requests, so that the secret can give
	// other uses (tokens, say) keys that never sign one of these.
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("nimbus member requests v1"))
	return &Key{mac: h.Sum(nil), now: now}, nil
}

// Sign sets r's credential over r's method, path and body (nil for a
// request without one; the same bytes r sends).
func (k *Key) Sign(r *http.Request, body []byte) {
	ts := strconv.FormatInt(k.now().UnixNano(), 10)
	r.Header.Set(Header, "v1 "+ts+" "+base64.RawURLEncoding.EncodeToString(k.sum(r.Method, r.URL.Path, ts, body)))
}

// Verify checks r's credential against its method, path and body (the
// bytes the handler read; nil for none). The error wraps ErrRefused and
// one of ErrMissing, ErrInvalid or ErrExpired.
func (k *Key) Verify(r *http.Request, body []byte) error {
	v := r.Header.Get(Header)
	if v == "" {
		return ErrMissing
	}
	ts, mac, err := parse(v)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, k.sum(r.Method, r.URL.Path, ts, body)) {
		return ErrInvalid
	}
	// Checked after the MAC: only a member's timestamp says anything.
	n, _ := strconv.ParseInt(ts, 10, 64)
	if d := k.now().Sub(time.Unix(0, n)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w (%v off)", ErrExpired, d.Round(time.Second))
	}
	return nil
}

// parse splits a Header value into its timestamp (decimal, as signed) and
// MAC.
func parse(v string) (ts string, mac []byte, err error) {
	ver, rest, ok := strings.Cut(v, " ")
	if !ok || ver != "v1" {
		return "", nil, fmt.Errorf("%w: version", ErrInvalid)
	}
	ts, enc, ok := strings.Cut(rest, " ")
	if !ok || len(ts) == 0 || len(ts) > 19 || len(enc) != base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return "", nil, fmt.Errorf("%w: format", ErrInvalid)
	}
	if n, err := strconv.ParseInt(ts, 10, 64); err != nil || n <= 0 || strconv.FormatInt(n, 10) != ts {
		return "", nil, fmt.Errorf("%w: timestamp", ErrInvalid)
	}
	mac, err = base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", nil, fmt.Errorf("%w: MAC", ErrInvalid)
	}
	return ts, mac, nil
}

// sum is the MAC of a request: method, path, timestamp and body, each
// but the body followed by a newline. A method is a token and a timestamp
// digits, neither can hold a newline; a decoded path can, so its length
// leads it: no two requests give one input.
func (k *Key) sum(method, path, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, k.mac)
	h.Write([]byte(method))
	h.Write([]byte{'\n'})
	h.Write([]byte(strconv.Itoa(len(path))))
	h.Write([]byte{'\n'})
	h.Write([]byte(path))
	h.Write([]byte{'\n'})
	h.Write([]byte(ts))
	h.Write([]byte{'\n'})
	h.Write(body)
	return h.Sum(nil)
}

// The secret's row, in the store-wide metadata table:
//
//	'm' "cluster/secret" -> SecretSize bytes
//
// Written once, by the first process that finds it missing, and never
// changed: every server on the store reads it at start. Replacing it means
// stopping every server, deleting the row, and starting them again (the
// first makes a new one).
var secretKey = store.MetaKey("cluster/secret")

// Load returns the Key of st's cluster secret, making the secret (from
// crypto/rand) and recording it if st has none. Processes that start
// together agree: one records it, the others read what it recorded.
func Load(ctx context.Context, st store.Store, now func() time.Time) (*Key, error) {
	s, err := LoadSecret(ctx, st)
	if err != nil {
		return nil, err
	}
	return New(s, now)
}

// LoadSecret returns st's cluster secret (SecretSize bytes), making and
// recording it if st has none, as Load does. Other uses of the secret
// (block tokens: package dataxfer/blocktoken) derive keys of their own
// from it.
func LoadSecret(ctx context.Context, st store.Store) ([]byte, error) {
	// Once recorded the row never changes: a read without a lock settles
	// it in one round trip for every process after the first.
	if s, err := readSecret(ctx, st); err != nil || s != nil {
		if err != nil {
			return nil, fmt.Errorf("clusterauth: read the cluster secret: %w", err)
		}
		return s, nil
	}
	for attempt := 0; ; attempt++ {
		s, err := recordSecret(ctx, st)
		if err == nil {
			return s, nil
		}
		if attempt < 3 && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLockBusy)) {
			continue // another process recorded it meanwhile: read it again
		}
		return nil, fmt.Errorf("clusterauth: record the cluster secret: %w", err)
	}
}

func readSecret(ctx context.Context, st store.Store) ([]byte, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: secretKey, Mode: store.ReadCommitted}})
	if err != nil {
		return nil, err
	}
	return checkSecret(vals[0])
}

func checkSecret(v []byte) ([]byte, error) {
	if v != nil && len(v) != SecretSize {
		return nil, fmt.Errorf("clusterauth: the cluster/secret row has %d bytes, want %d", len(v), SecretSize)
	}
	return bytes.Clone(v), nil
}

// recordSecret makes and records a secret unless one is there (which it
// returns).
func recordSecret(ctx context.Context, st store.Store) ([]byte, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: secretKey, Mode: store.Exclusive}})
	if err != nil {
		return nil, err
	}
	if vals[0] != nil {
		return checkSecret(vals[0])
	}
	s := make([]byte, SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	if ins, ok := txn.(store.Inserter); ok {
		ins.Insert(secretKey, s)
	} else {
		txn.Put(secretKey, s)
	}
	if err := txn.Commit(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
