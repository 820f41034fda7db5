// Package promreg registers a package's Prometheus collectors on the
// registerer its caller injects, in the two ways Nimbus's packages need:
//
//   - all or none (RegisterAll, with UnregisterAll at Close): a component
//     that owns its metrics, of which one runs per registerer (a store, a
//     lock manager, a block store), fails to start when a name is taken and
//     leaves nothing registered behind;
//   - register or reuse (Reuse, MustReuse): components of which several may
//     run on one registerer (the coherence loop of each engine, the
//     coordinator's sessions, the WebHDFS handlers) share the collectors
//     the first one registered, and count together.
//
// A nil registerer registers nothing, in every function.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterAll registers cs on reg in order. If one fails, it unregisters
// those it registered and returns that error (wrapping it: errors.As finds
// a prometheus.AlreadyRegisteredError).
func RegisterAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			UnregisterAll(reg, cs[:i]...)
			return err
		}
	}
	return nil
}

// UnregisterAll unregisters cs from reg, so that another component may
// register collectors of the same names there.
func UnregisterAll(reg prometheus.Registerer, cs ...prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, c := range cs {
		reg.Unregister(c)
	}
}

// Reuse registers c on reg and returns it, or, when reg already holds a
// collector of the same description, returns that one, to be used in c's
// place. A collector of the same name but another description, or of
// another type than C, is an error; with a nil reg it returns c.
func Reuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("promreg: the collector registered under %T's description is a %T", c, are.ExistingCollector)
	}
	return c, err
}

// MustReuse is Reuse for collectors whose names a package fixes in its
// code: a clash is a programming error, and it panics.
func MustReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	got, err := Reuse(reg, c)
	if err != nil {
		panic(err)
	}
	return got
}
