package raftkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/testutil"
)

// Timeout bounds every wait in tests built on the kit; generous for a
// loaded 2-core machine under -race.
const Timeout = 30 * time.Second

// Context is a context cancelled at Timeout or when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds or Timeout passes, for state that has
// no event to wait on.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, Timeout, what, cond)
}

// PayloadRange names payloads prefix-from … prefix-(to-1), zero-padded so
// that they sort in order.
func PayloadRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%05d", prefix, i))
	}
	return out
}

// AgreedLeader waits until every member names the same leader (leader
// returns 0 for none) and returns it.
func AgreedLeader[N any](t testing.TB, members map[uint64]N, leader func(N) uint64) uint64 {
	t.Helper()
	var lead uint64
	WaitFor(t, "members to agree on a leader", func() bool {
		lead = 0
		for _, m := range members {
			l := leader(m)
			if l == 0 || (lead != 0 && l != lead) {
				return false
			}
			lead = l
		}
		return true
	})
	return lead
}
