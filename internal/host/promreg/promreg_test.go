package promreg

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

// families is the number of metric families reg gathers.
func families(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(mfs)
}

func TestAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := counter("b")
	reg.MustRegister(taken)
	_, err := Register(reg, counter("a"), counter("b"), counter("c"))
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("registering a clashing set: %v, want an AlreadyRegisteredError", err)
	}
	// Only the collector registered before remains: "a" was taken back.
	if n := families(t, reg); n != 1 {
		t.Fatalf("after a failed set: %d series, want the 1 registered before", n)
	}
	reg.Unregister(taken)
	s, err := Register(reg, counter("a"), counter("b"))
	if err != nil {
		t.Fatal(err)
	}
	if n := families(t, reg); n != 2 {
		t.Fatalf("after a set of 2: %d series", n)
	}
	s.Unregister()
	s.Unregister()
	if n := families(t, reg); n != 0 {
		t.Fatalf("after Unregister: %d series", n)
	}
	if s, err := Register(nil, counter("a")); err != nil || s == nil {
		t.Fatalf("nil registry: %v %v", s, err)
	}
}
