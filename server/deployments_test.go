package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeployments: the server joins as a member of its deployment; the
// first server on a store records the number of deployments, and a server
// started on it with another number refuses to start.
func TestDeployments(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Deployment, cfg.Deployments = 2, 3
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if m := s.Member().Member(); m.Deployment != 2 {
		t.Errorf("member %+v, want deployment 2", m)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	other := cfg
	other.Deployment, other.Deployments = 0, 2
	if s, err := New(other); !errors.Is(err, ErrDeployments) {
		if err == nil {
			s.Stop(ctx)
		}
		t.Fatalf("New with 2 deployments on a store of 3: %v, want ErrDeployments", err)
	} else {
		t.Log(err)
	}
	same := cfg
	same.Deployment = 0
	s, err = New(same)
	if err != nil {
		t.Fatalf("New with the store's 3 deployments: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	bad := testConfig(t)
	bad.Deployment, bad.Deployments = 3, 3
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepts deployment 3 of 3")
	}
}

// TestRequestTTLAgreed: the first server on a store records its request
// TTL, and a server started on it with another (a shorter one, or 0,
// which reads no records) refuses to start: its records would not be
// there for the others' resubmissions.
func TestRequestTTLAgreed(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Namespace.RequestTTL = 5 * time.Minute
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{time.Minute, 0} {
		other := cfg
		other.Namespace.RequestTTL = ttl
		if s, err := New(other); !errors.Is(err, ErrRequestTTL) {
			if err == nil {
				s.Stop(ctx)
			}
			t.Fatalf("New with --request-ttl %v on a store of 5m: %v, want ErrRequestTTL", ttl, err)
		} else {
			t.Log(err)
		}
	}
	s, err = New(cfg)
	if err != nil {
		t.Fatalf("New with the store's TTL: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
