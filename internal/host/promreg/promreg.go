// Package promreg registers the Prometheus collectors of one part of a
// member as a set: all of them or none, so that a part whose metrics
// clash with another's (two members in one process on one registry)
// fails to start cleanly instead of exporting half its series, and a
// part that stops can take its series away for the next one.
package promreg

import "github.com/prometheus/client_golang/prometheus"

// Set is collectors registered together on one registry.
type Set struct {
	reg        prometheus.Registerer
	registered []prometheus.Collector
}

// Register registers every collector with reg, in order. On the first
// failure it unregisters those it had registered and returns that
// failure's error unwrapped (a prometheus.AlreadyRegisteredError stays
// one for errors.As). A nil reg registers nothing.
func Register(reg prometheus.Registerer, collectors ...prometheus.Collector) (*Set, error) {
	s := &Set{reg: reg}
	if reg == nil {
		return s, nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			s.Unregister()
			return nil, err
		}
		s.registered = append(s.registered, c)
	}
	return s, nil
}

// Unregister removes the set's collectors from their registry. It is
// safe to call more than once, and on a nil Set.
func (s *Set) Unregister() {
	if s == nil {
		return
	}
	for _, c := range s.registered {
		s.reg.Unregister(c)
	}
	s.registered = nil
}
