package framework

import (
	"testing"
)

// A port held by one lease cannot be locked through another open file of
// the lock file (as another test process would open it) until released.
func TestPortLeasesExclude(t *testing.T) {
	a, err := reservePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := reservePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	high := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range append(a.Ports(), b.Ports()...) {
		if seen[p] {
			t.Fatalf("port %d leased twice", p)
		}
		seen[p] = true
		if p < portRangeLow || p >= high {
			t.Fatalf("port %d outside [%d, %d)", p, portRangeLow, high)
		}
	}
	for _, p := range a.Ports() {
		locked, err := b.lock(p)
		if err != nil {
			t.Fatal(err)
		}
		if locked {
			t.Fatalf("port %d of lease a could be locked by lease b", p)
		}
	}
	a.Release()
	for _, p := range a.Ports() {
		locked, err := b.lock(p)
		if err != nil {
			t.Fatal(err)
		}
		if !locked {
			t.Fatalf("port %d still locked after lease a was released", p)
		}
	}
}
