package promreg

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "test", Name: name, Help: "A test counter."})
}

// TestRegisterAllOrNone: a clash on the third collector leaves none of
// the three registered, and the error is the registry's.
func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := counter("c_total")
	if err := reg.Register(taken); err != nil {
		t.Fatal(err)
	}
	a, b := counter("a_total"), counter("b_total")
	err := RegisterAll(reg, a, b, counter("c_total"))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("RegisterAll over a taken name: %v, want an AlreadyRegisteredError", err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 1 {
		t.Fatalf("after the failed RegisterAll the registry holds %d metrics (%v), want the 1 registered before", n, err)
	}
	// Nothing of the failed attempt is left: the same collectors register.
	if err := RegisterAll(reg, a, b); err != nil {
		t.Fatalf("registering again what a failed RegisterAll rolled back: %v", err)
	}
	UnregisterAll(reg, a, b)
	if n, _ := testutil.GatherAndCount(reg); n != 1 {
		t.Fatalf("after UnregisterAll the registry holds %d metrics, want 1", n)
	}
	if err := RegisterAll(nil, a); err != nil {
		t.Fatalf("RegisterAll on nil: %v", err)
	}
	UnregisterAll(nil, a)
}

// TestReuse: a second collector of the same description gets the first
// one back, and counts go to the one registered.
func TestReuse(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := counter("x_total")
	if got, err := Reuse(reg, first); err != nil || got != first {
		t.Fatalf("first Reuse: %v %v", got, err)
	}
	second, err := Reuse(reg, counter("x_total"))
	if err != nil || second != first {
		t.Fatalf("second Reuse: got %p, %v; want the first collector %p", second, err, first)
	}
	second.Inc()
	if v := testutil.ToFloat64(first); v != 1 {
		t.Fatalf("the registered counter reads %v after an Inc through the reused one, want 1", v)
	}
	if got, err := Reuse[prometheus.Counter](nil, first); err != nil || got != first {
		t.Fatalf("Reuse on nil: %v %v", got, err)
	}
}

// TestReuseClash: the same name with another description, or with other
// labels, is an error, and MustReuse panics with it.
func TestReuseClash(t *testing.T) {
	reg := prometheus.NewRegistry()
	MustReuse(reg, counter("y_total"))
	other := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "test", Name: "y_total", Help: "Another help."})
	if _, err := Reuse(reg, other); err == nil {
		t.Fatal("Reuse of a name registered with another help: no error")
	}
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "test", Name: "z_total", Help: "A test counter."}, []string{"kind"})
	MustReuse(reg, vec)
	if _, err := Reuse(reg, counter("z_total")); err == nil {
		t.Fatal("Reuse of a counter under the description of a registered counter vector: no error")
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(error).Error(), "y_total") && !strings.Contains(r.(error).Error(), "promreg") {
			t.Fatalf("MustReuse of a clashing collector: recovered %v, want its error", r)
		}
	}()
	MustReuse(reg, other)
}
