package etcdcompat

import (
	"errors"
	"net"
	"testing"

	"github.com/soheilhy/cmux"
)

// TestWaitServingReportsFailureNotOrder checks a Serve ending on Stop is
// no failure whatever order its goroutines end in (the mux's matchers may
// say "mux: server closed" before the mux says its listener closed), and
// that a real failure is reported even when a closing error came first.
func TestWaitServingReportsFailureNotOrder(t *testing.T) {
	failure := errors.New("accept: too many open files")
	for _, c := range []struct {
		name string
		errs []error
		want error
	}{
		{"stop, matchers first", []error{cmux.ErrServerClosed, net.ErrClosed, nil}, nil},
		{"stop, mux first", []error{net.ErrClosed, cmux.ErrServerClosed, cmux.ErrListenerClosed}, nil},
		{"failure after a closing error", []error{cmux.ErrServerClosed, failure, nil}, failure},
		{"failure first", []error{failure, cmux.ErrServerClosed, net.ErrClosed}, failure},
	} {
		errc := make(chan error, len(c.errs))
		closed := 0
		for _, err := range c.errs {
			errc <- err
		}
		err := waitServing(errc, len(c.errs), func() { closed++ })
		if isServingEnd(err) {
			err = nil
		}
		if err != c.want || closed != 1 {
			t.Errorf("%s: %v (closed %d times), want %v (closed once)", c.name, err, closed, c.want)
		}
	}
}
