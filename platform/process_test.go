package platform

import (
	"slices"
	"testing"
)

// childEnv adds the instance's GOMAXPROCS to the environment unless the
// operator set one, and leaves the parent's slice as it was.
func TestChildEnv(t *testing.T) {
	base := []string{"HOME=/root", "PATH=/bin"}
	got := childEnv(base, 1, "")
	if !slices.Equal(got, []string{"HOME=/root", "PATH=/bin", "GOMAXPROCS=1"}) {
		t.Fatalf("childEnv(base, 1) = %q", got)
	}
	if len(base) != 2 {
		t.Fatalf("the parent's environment changed: %q", base)
	}
	if got := childEnv(base, 0, ""); !slices.Equal(got, base) {
		t.Fatalf("childEnv(base, 0) = %q, want it unchanged", got)
	}
	set := []string{"GOMAXPROCS=4", "PATH=/bin"}
	if got := childEnv(set, 1, ""); !slices.Equal(got, set) {
		t.Fatalf("childEnv with GOMAXPROCS set = %q, want the operator's", got)
	}
}

// The gateway's credential goes in the environment, in place of one the
// parent's environment holds.
func TestChildEnvCredential(t *testing.T) {
	base := []string{"PATH=/bin", EnvGatewayCredential + "=old"}
	got := childEnv(base, 0, "new")
	if !slices.Equal(got, []string{"PATH=/bin", EnvGatewayCredential + "=new"}) {
		t.Fatalf("childEnv with a credential = %q", got)
	}
	if got := childEnv(base, 0, ""); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Fatalf("childEnv without a credential = %q, want the parent's removed", got)
	}
	if base[1] != EnvGatewayCredential+"=old" {
		t.Fatalf("the parent's environment changed: %q", base)
	}
}
