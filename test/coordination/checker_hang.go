package coordination

import (
	"fmt"
	"time"
)

// checkHangs holds every call to the bound. A call is answered when it
// returns, and an HTTP /lock call also by every read of its stream: the
// queued event, then a heartbeat line every second while it waits. So an
// HTTP call is hung once it went bound without any answer, whether it
// was queued or not: a call legitimately queued behind a holder hears
// the service's heartbeats; one on a dead or frozen stream hears nothing.
// Unlock calls have nothing to wait for but the answer.
//
// The SDK's Lock says nothing while it waits, and a waiter may sit
// silently behind a holder that died, whose key stays until its lease
// expires (a whole TTL after a quorum is back). What tells an SDK call
// queued behind a holder from a stuck one is its key: an observer
// follows the SDK's queues (observer.go), and a call that was not in the
// queue, nor answered, for longer than the bound is hung; one whose key
// waits in line is not, however long (Lock re-joins at the back on its
// own when its lease is lost: that is a new key, and legitimate).
func checkHangs(r *Report, s Snapshot, bound time.Duration) {
	keys := map[string][]KeyLife{}
	for _, k := range s.Keys {
		keys[k.Resource] = append(keys[k.Resource], k)
	}
	for _, c := range s.Calls {
		end := c.End
		if end.IsZero() {
			end = s.At
		}
		if c.Op == OpLock && end.Sub(c.Start) > r.MaxLockWait {
			r.MaxLockWait = end.Sub(c.Start)
		}
		if c.API == APISDK && c.Op == OpLock {
			checkSDKWait(r, c, end, keys[c.Resource], s.At, bound)
			continue
		}
		silence, from := longestSilence(c, end)
		if silence > r.MaxSilence {
			r.MaxSilence = silence
		}
		if silence > bound {
			r.Violations = append(r.Violations, Violation{Rule: RuleHang, Resource: c.Resource, At: from.Add(bound),
				What: fmt.Sprintf("%s's %s %s call went %v without an answer (%s)", c.Client, c.API, c.Op, silence.Round(time.Millisecond), outcome(c))})
		}
	}
}

// longestSilence is the longest stretch of c without an answer, from its
// start to end, and where that stretch began.
func longestSilence(c Call, end time.Time) (time.Duration, time.Time) {
	prev, longest, from := c.Start, time.Duration(0), c.Start
	for _, a := range append(append([]time.Time(nil), c.Answers...), end) {
		if a.Sub(prev) > longest {
			longest, from = a.Sub(prev), prev
		}
		if a.After(prev) {
			prev = a
		}
	}
	return longest, from
}

func outcome(c Call) string {
	switch {
	case c.End.IsZero():
		return "still unanswered at the end"
	case c.Granted:
		return "then granted"
	case c.Err != "":
		return "then: " + c.Err
	}
	return "then answered"
}

// checkSDKWait holds SDK lock call c, waiting from its start to end, to
// the bound outside the stretches its contender had a key in the lock's
// queue (keys: the observer's record of that queue).
func checkSDKWait(r *Report, c Call, end time.Time, keys []KeyLife, at time.Time, bound time.Duration) {
	cursor, longest, from := c.Start, time.Duration(0), c.Start
	for _, k := range keys { // in creation order
		if k.Owner != c.Client || !k.Created.Before(end) {
			continue
		}
		gone := k.Deleted
		if gone.IsZero() {
			gone = at
		}
		if !gone.After(cursor) {
			continue
		}
		if gap := k.Created.Sub(cursor); gap > longest {
			longest, from = gap, cursor
		}
		cursor = gone
	}
	if gap := end.Sub(cursor); gap > longest {
		longest, from = gap, cursor
	}
	if longest > r.MaxSilence {
		r.MaxSilence = longest
	}
	if longest > bound {
		r.Violations = append(r.Violations, Violation{Rule: RuleHang, Resource: c.Resource, At: from.Add(bound),
			What: fmt.Sprintf("%s's sdk lock call went %v without a place in the queue and without an answer (%s)",
				c.Client, longest.Round(time.Millisecond), outcome(c))})
	}
}
