//go:build !faultinject

package clockfault

import "github.com/metastore-io/metastore/internal/lease"

// LeaseClock is the clock the lessor reads; in this build nil, the
// system clock (see the package doc).
func LeaseClock() lease.Clock { return nil }
