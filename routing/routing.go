// Package routing maps an operation to the deployment that owns it (issue
// 28, item 2), one function shared by client and server.
//
// The routing key of an operation is the inode id of the directory whose
// entries it reads or changes: the parent's id for a stat, create, delete,
// mkdir or rename of a path (the source's parent for a rename), the
// directory's own id for a listing. That is also the key its cache entries
// live under (cache.Key(parent, name), cache.ListingOf(dir)) and the key
// its invalidations name, so the deployment that serves an operation is
// the one that caches what it reads and the one a writer must invalidate.
// λFS's prototype routed by the parent's path and invalidated by its inode
// id, and an ancestor cached in one deployment could miss an invalidation
// sent to another; one key avoids that.
//
// Owner is a jump consistent hash (Lamping and Veach, 2014) of the key
// after a 64-bit mix (inode ids are sequential; the jump hash wants its
// input spread): it needs no table, gives each of n deployments 1/n of
// the keys, and when n grows to n+1 moves only the 1/(n+1) of the keys
// that the new deployment takes.
package routing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Owner returns the deployment, 0..n-1, that owns routing key k among n
// deployments (n < 1 is taken as 1).
func Owner(k uint64, n int) int {
	if n <= 1 {
		return 0
	}
	key := mix(k)
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// mix is splitmix64's finaliser: sequential ids become spread keys.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Instance is one live instance of a deployment, as clients reach it.
type Instance struct {
	ID   string
	Addr string
}

// Map is the routing state at one version: how many deployments share the
// namespace and the live instances of each, as the coordinator's
// membership lists them. A request that reaches an instance of the wrong
// deployment gets the current map back (a wrong-owner answer), and the
// client retries at an instance of the owner.
type Map struct {
	Version     int64
	Deployments [][]Instance // by deployment; instances sorted by ID
}

// FromMembers builds the map of n deployments from the coordinator's
// members at version. Members of deployments outside 0..n-1 are left out.
func FromMembers(version int64, n int, members []coordinator.Member) *Map {
	m := &Map{Version: version, Deployments: make([][]Instance, max(n, 1))}
	for _, mb := range members {
		if mb.Deployment >= 0 && mb.Deployment < len(m.Deployments) {
			m.Deployments[mb.Deployment] = append(m.Deployments[mb.Deployment], Instance{ID: mb.ID, Addr: mb.Addr})
		}
	}
	for _, d := range m.Deployments {
		slices.SortFunc(d, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	}
	return m
}

// N returns the number of deployments.
func (m *Map) N() int { return len(m.Deployments) }

// Owner returns the deployment that owns routing key k.
func (m *Map) Owner(k uint64) int { return Owner(k, m.N()) }

// Instances returns deployment d's live instances (nil when none: the
// platform must start one, or the caller waits).
func (m *Map) Instances(d int) []Instance {
	if d < 0 || d >= len(m.Deployments) {
		return nil
	}
	return m.Deployments[d]
}

// The binary form of a Map (a wrong-owner answer carries it): a version
// byte, the map's version, the number of deployments, then per deployment
// its instance count and each instance's ID and address, lengths as
// uvarints.
const mapFormat = 1

// maxMapDeployments and maxMapInstances bound what UnmarshalBinary accepts
// from the wire.
const (
	maxMapDeployments = 1 << 12
	maxMapInstances   = 1 << 16
	maxMapString      = 1 << 12
)

// ErrBadMap is wrapped by UnmarshalBinary's errors.
var ErrBadMap = errors.New("routing: bad map encoding")

// MarshalBinary encodes m.
func (m *Map) MarshalBinary() ([]byte, error) {
	b := []byte{mapFormat}
	b = binary.AppendVarint(b, m.Version)
	b = binary.AppendUvarint(b, uint64(len(m.Deployments)))
	for _, d := range m.Deployments {
		b = binary.AppendUvarint(b, uint64(len(d)))
		for _, in := range d {
			b = appendString(b, in.ID)
			b = appendString(b, in.Addr)
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalBinary decodes what MarshalBinary encoded, refusing anything
// else (a truncated or oversized map, trailing bytes) with ErrBadMap.
func (m *Map) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != mapFormat {
		return fmt.Errorf("%w: unknown format", ErrBadMap)
	}
	r := reader{b: b[1:]}
	version := r.varint()
	n := r.uvarint()
	if r.err == nil && n > maxMapDeployments {
		return fmt.Errorf("%w: %d deployments", ErrBadMap, n)
	}
	out := Map{Version: version}
	total := uint64(0)
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := r.uvarint()
		total += k
		if r.err == nil && total > maxMapInstances {
			return fmt.Errorf("%w: more than %d instances", ErrBadMap, maxMapInstances)
		}
		var d []Instance
		for j := uint64(0); j < k && r.err == nil; j++ {
			d = append(d, Instance{ID: r.str(), Addr: r.str()})
		}
		out.Deployments = append(out.Deployments, d)
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the map", ErrBadMap, len(r.b))
	}
	*m = out
	return nil
}

// reader decodes a map's fields, keeping the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated", ErrBadMap)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated", ErrBadMap)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	l := r.uvarint()
	if r.err != nil {
		return ""
	}
	if l > maxMapString || l > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: a string of %d bytes", ErrBadMap, l)
		return ""
	}
	s := string(r.b[:l])
	r.b = r.b[l:]
	return s
}
