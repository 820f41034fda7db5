package routing

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Sequential inode ids spread evenly over the deployments.
func TestOwnerBalance(t *testing.T) {
	const keys = 200_000
	for _, n := range []int{1, 2, 3, 8, 32} {
		counts := make([]int, n)
		for k := uint64(1); k <= keys; k++ {
			d := Owner(k, n)
			if d < 0 || d >= n {
				t.Fatalf("Owner(%d, %d) = %d", k, n, d)
			}
			counts[d]++
		}
		want := float64(keys) / float64(n)
		for d, c := range counts {
			// Binomial: a few standard deviations.
			if math.Abs(float64(c)-want) > 5*math.Sqrt(want)+1 {
				t.Errorf("n=%d: deployment %d owns %d keys, want about %.0f", n, d, c, want)
			}
		}
	}
}

// Growing from n to n+1 deployments moves only the keys the new one
// takes, about 1/(n+1) of them; nothing moves between the old ones.
func TestOwnerMovesLittle(t *testing.T) {
	const keys = 100_000
	for _, n := range []int{1, 2, 4, 7} {
		moved := 0
		for k := uint64(1); k <= keys; k++ {
			a, b := Owner(k, n), Owner(k, n+1)
			if a != b {
				if b != n {
					t.Fatalf("key %d moved from %d to %d when deployment %d was added", k, a, b, n)
				}
				moved++
			}
		}
		want := float64(keys) / float64(n+1)
		if math.Abs(float64(moved)-want) > 5*math.Sqrt(want) {
			t.Errorf("%d→%d deployments: %d keys moved, want about %.0f", n, n+1, moved, want)
		}
	}
}

func TestMapFromMembersAndBack(t *testing.T) {
	m := FromMembers(42, 3, []coordinator.Member{
		{ID: "b", Deployment: 1, Addr: "http://h2:1"},
		{ID: "a", Deployment: 1, Addr: "http://h1:1"},
		{ID: "c", Deployment: 0, Addr: "http://h3:1"},
		{ID: "x", Deployment: 7, Addr: "http://nowhere"}, // not a deployment of the map
	})
	if m.N() != 3 || len(m.Instances(1)) != 2 || m.Instances(1)[0].ID != "a" || m.Instances(2) != nil || m.Instances(9) != nil {
		t.Fatalf("map %+v", m)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Map
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*m, back) {
		t.Fatalf("round trip: %+v, want %+v", back, *m)
	}
	for k := uint64(0); k < 100; k++ {
		if m.Owner(k) != back.Owner(k) || m.Owner(k) != Owner(k, 3) {
			t.Fatalf("owner of %d differs", k)
		}
	}
	for _, bad := range [][]byte{nil, {9}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		if err := new(Map).UnmarshalBinary(bad); !errors.Is(err, ErrBadMap) {
			t.Errorf("%x: %v, want ErrBadMap", bad, err)
		}
	}
}

// FuzzMap: any bytes decode to an error or to a map that encodes back to
// the same bytes.
func FuzzMap(f *testing.F) {
	m := FromMembers(7, 2, []coordinator.Member{{ID: "n1", Deployment: 0, Addr: "http://a:1"}, {ID: "n2", Deployment: 1, Addr: "http://b:2"}})
	b, _ := m.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Map
		if err := m.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrBadMap) {
				t.Fatalf("error %v does not wrap ErrBadMap", err)
			}
			return
		}
		again, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var m2 Map
		if err := m2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-encoding changed the map: %v", err)
		}
	})
}
