package coordination

import (
	"errors"
	"testing"
	"time"
)

// script writes a history by hand on a fake clock: every step moves the
// clock to a time given in milliseconds since the start.
type script struct {
	t0   time.Time
	now  time.Time
	hist *History
}

func newScript() *script {
	s := &script{t0: time.Unix(1_000_000, 0)}
	s.now = s.t0
	s.hist = newHistoryAt(func() time.Time { return s.now })
	return s
}

func (s *script) at(ms int) *script {
	s.now = s.t0.Add(time.Duration(ms) * time.Millisecond)
	return s
}

// cycle is one whole clean cycle: ask at ask, granted at grant with
// token, unlock sent at end and answered 5 ms later.
func (s *script) cycle(res, client string, api API, ask, grant, end int, token int64) {
	call := s.at(ask).hist.StartCall(res, client, api, OpLock)
	hold := s.at(grant).hist.Grant(call, token, 0)
	s.unlock(hold, api, end)
}

func (s *script) unlock(hold *Hold, api API, end int) {
	s.at(end).hist.EndHold(hold, EndUnlock, "")
	u := s.hist.StartCall(hold.Resource, hold.Client, api, OpUnlock)
	s.at(end+5).hist.EndCall(u, nil)
}

func (s *script) check(t *testing.T, endMs int) Report {
	t.Helper()
	s.at(endMs)
	return Check(s.hist.Snapshot(), CheckConfig{})
}

// expect fails unless r broke exactly rule (n times); "" means no rule.
func expect(t *testing.T, r Report, rule string, n int) {
	t.Helper()
	if rule == "" {
		if len(r.Violations) > 0 {
			t.Fatalf("clean history judged %s: %v", r.Verdict(), r.Violations)
		}
		return
	}
	if got := r.Count(rule); got != n || len(r.Violations) != n {
		t.Fatalf("want %d %s violation(s), got %s: %v", n, rule, r.Verdict(), r.Violations)
	}
	t.Logf("%s", r.Violations[0])
}

func TestCheckerCleanHistory(t *testing.T) {
	s := newScript()
	s.cycle("http/r0", "a", APIHTTP, 0, 10, 100, 5)
	s.cycle("http/r0", "b", APIHTTP, 20, 103, 200, 8) // queued behind a
	s.cycle("sdk/r0", "c", APISDK, 0, 10, 50, 6)
	s.cycle("sdk/r0", "d", APISDK, 60, 70, 90, 9)
	r := s.check(t, 1000)
	expect(t, r, "", 0)
	if r.Grants != 4 || r.Calls != 8 || r.Refusals != 0 || r.MinGap != 3*time.Millisecond {
		t.Fatalf("figures: %+v", r)
	}
}

func TestCheckerFencing(t *testing.T) {
	s := newScript()
	s.cycle("http/r0", "a", APIHTTP, 0, 10, 100, 9)
	s.cycle("http/r0", "b", APIHTTP, 110, 120, 200, 7) // a smaller token after a
	r := s.check(t, 1000)
	expect(t, r, RuleFencing, 1)
	if r.Refusals != 1 {
		t.Fatalf("the fenced resource refused %d writes, want 1 (b's first)", r.Refusals)
	}

	// The same node given its own place back holds the same token again.
	s = newScript()
	call := s.at(0).hist.StartCall("http/r0", "a", APIHTTP, OpLock)
	s.at(10).hist.EndHold(s.hist.Grant(call, 9, 0), EndLost, "")
	s.cycle("http/r0", "a", APIHTTP, 20, 30, 100, 9)
	expect(t, s.check(t, 1000), "", 0)
}

func TestCheckerOverlap(t *testing.T) {
	s := newScript()
	call := s.at(0).hist.StartCall("http/r0", "a", APIHTTP, OpLock)
	a := s.at(10).hist.Grant(call, 5, 0)
	// b is granted while a, whose member froze, still works.
	s.cycle("http/r0", "b", APIHTTP, 20, 4000, 4100, 8)
	s.cycle("http/r0", "c", APIHTTP, 30, 4200, 4300, 9) // overlaps a too: the same violation
	s.at(5000).hist.Write(a)                            // refused: c wrote token 9
	s.unlock(a, APIHTTP, 5000)
	r := s.check(t, 6000)
	expect(t, r, RuleOverlap, 1)
	if r.MinGap != -1000*time.Millisecond || r.Refusals != 1 {
		t.Fatalf("min gap %v, refusals %d; want -1s and a's stale write refused", r.MinGap, r.Refusals)
	}
}

// A belief that Lost() ended before the next grant is no overlap, and one
// never ended overlaps everything after it.
func TestCheckerLostEndsTheBelief(t *testing.T) {
	s := newScript()
	call := s.at(0).hist.StartCall("sdk/r0", "a", APISDK, OpLock)
	a := s.at(10).hist.Grant(call, 5, 0)
	s.at(3900).hist.EndHold(a, EndLost, "")
	s.cycle("sdk/r0", "b", APISDK, 20, 4000, 4100, 8)
	expect(t, s.check(t, 5000), "", 0)

	s = newScript()
	call = s.at(0).hist.StartCall("sdk/r0", "a", APISDK, OpLock)
	s.at(10).hist.Grant(call, 5, 0) // never let go
	s.cycle("sdk/r0", "b", APISDK, 20, 4000, 4100, 8)
	expect(t, s.check(t, 5000), RuleOverlap, 1)
}

func TestCheckerFIFO(t *testing.T) {
	s := newScript()
	s.cycle("http/r0", "h", APIHTTP, 0, 5, 500, 3)
	w := s.at(10).hist.StartCall("http/r0", "w", APIHTTP, OpLock)
	s.at(20).hist.Queued(w)
	// o asks after w was queued, yet is granted first (with a larger
	// token: the fencing rule alone would not see it).
	o := s.at(30).hist.StartCall("http/r0", "o", APIHTTP, OpLock)
	s.at(40).hist.Queued(o)
	for ms := 1000; ms < 4000; ms += 1000 { // both hear heartbeats
		s.at(ms).hist.Answer(w)
		s.hist.Answer(o)
	}
	s.unlock(s.at(4000).hist.Grant(o, 9, 0), APIHTTP, 4100)
	s.unlock(s.at(4200).hist.Grant(w, 12, 0), APIHTTP, 4300)
	expect(t, s.check(t, 5000), RuleFIFO, 1)

	// o asked first, timed out, and asked again after w was queued:
	// the service gave it back its place from the first request.
	s = newScript()
	s.cycle("http/r0", "h", APIHTTP, 0, 5, 500, 3)
	first := s.at(8).hist.StartCall("http/r0", "o", APIHTTP, OpLock)
	s.at(5008).hist.EndCall(first, errors.New("no answer within 5s"))
	w = s.at(10).hist.StartCall("http/r0", "w", APIHTTP, OpLock)
	s.at(20).hist.Queued(w)
	o = s.at(5100).hist.StartCall("http/r0", "o", APIHTTP, OpLock)
	s.at(5110).hist.Queued(o)
	for ms := 1020; ms < 8000; ms += 1000 {
		s.at(ms).hist.Answer(w)
	}
	s.unlock(s.at(6000).hist.Grant(o, 4, 0), APIHTTP, 6100)
	s.unlock(s.at(6200).hist.Grant(w, 6, 0), APIHTTP, 6300)
	expect(t, s.check(t, 7000), "", 0)
}

// A waiter that hears the service's heartbeats is queued behind a
// holder, however long; one whose stream goes silent past the bound is
// hung, granted in the end or not.
func TestCheckerHTTPHang(t *testing.T) {
	s := newScript()
	call := s.at(0).hist.StartCall("http/r0", "h", APIHTTP, OpLock)
	h := s.at(5).hist.Grant(call, 3, 0)
	w := s.at(10).hist.StartCall("http/r0", "w", APIHTTP, OpLock)
	s.at(20).hist.Queued(w)
	for ms := 1020; ms < 30000; ms += 1000 {
		s.at(ms).hist.Answer(w)
	}
	s.unlock(h, APIHTTP, 29900)
	s.unlock(s.at(30000).hist.Grant(w, 7, 0), APIHTTP, 30100)
	expect(t, s.check(t, 31000), "", 0)

	s = newScript()
	call = s.at(0).hist.StartCall("http/r0", "h", APIHTTP, OpLock)
	h = s.at(5).hist.Grant(call, 3, 0)
	w = s.at(10).hist.StartCall("http/r0", "w", APIHTTP, OpLock)
	s.at(20).hist.Queued(w) // then silence: its member froze
	s.at(12000).hist.EndCall(w, errors.New("lock lost"))
	s.unlock(h, APIHTTP, 12500)
	r := s.check(t, 13000)
	expect(t, r, RuleHang, 1)
	if r.MaxSilence != 11980*time.Millisecond {
		t.Fatalf("max silence %v, want 11.98s", r.MaxSilence)
	}
}

func TestCheckerUnlockHang(t *testing.T) {
	s := newScript()
	call := s.at(0).hist.StartCall("sdk/r0", "a", APISDK, OpLock)
	a := s.at(10).hist.Grant(call, 3, 0)
	s.at(100).hist.EndHold(a, EndUnlock, "")
	s.hist.StartCall("sdk/r0", "a", APISDK, OpUnlock) // never answered
	expect(t, s.check(t, 20000), RuleHang, 1)
}

// An SDK waiter is queued while its key is in the queue, however long;
// out of the queue and unanswered past the bound, it is hung.
func TestCheckerSDKHang(t *testing.T) {
	// Behind a holder that died: its Lost() fired, its key waits for
	// its lease, nobody believes for 12 s; not a hang.
	s := newScript()
	call := s.at(0).hist.StartCall("sdk/r0", "h", APISDK, OpLock)
	s.at(1).hist.KeyCreated("sdk/r0", "h", "/q/r0/1")
	h := s.at(5).hist.Grant(call, 3, 0)
	w := s.at(10).hist.StartCall("sdk/r0", "w", APISDK, OpLock)
	s.at(40).hist.KeyCreated("sdk/r0", "w", "/q/r0/2")
	s.at(1000).hist.EndHold(h, EndLost, "")
	s.at(12990).hist.KeyDeleted("/q/r0/1")
	s.unlock(s.at(13000).hist.Grant(w, 5, 0), APISDK, 13100)
	expect(t, s.check(t, 14000), "", 0)

	// Its key expired at 3 s and Lock did not come back until 25 s.
	s = newScript()
	w = s.at(0).hist.StartCall("sdk/r0", "w", APISDK, OpLock)
	s.at(100).hist.KeyCreated("sdk/r0", "w", "/q/r0/2")
	s.cycle("sdk/r0", "h", APISDK, 50, 60, 20000, 3)
	s.at(3000).hist.KeyDeleted("/q/r0/2")
	s.at(25000).hist.EndCall(w, errors.New("context deadline exceeded"))
	expect(t, s.check(t, 26000), RuleHang, 1)

	// It lost its place at 3 s and joined again at 4 s: queued again.
	s = newScript()
	w = s.at(0).hist.StartCall("sdk/r0", "w", APISDK, OpLock)
	s.at(100).hist.KeyCreated("sdk/r0", "w", "/q/r0/2")
	s.cycle("sdk/r0", "h", APISDK, 50, 60, 20000, 3)
	s.at(3000).hist.KeyDeleted("/q/r0/2")
	s.at(4000).hist.KeyCreated("sdk/r0", "w", "/q/r0/3")
	s.unlock(s.at(20010).hist.Grant(w, 7, 0), APISDK, 20100)
	expect(t, s.check(t, 21000), "", 0)

	// It never got into the queue for 12 s.
	s = newScript()
	w = s.at(0).hist.StartCall("sdk/r0", "w", APISDK, OpLock)
	s.at(12000).hist.KeyCreated("sdk/r0", "w", "/q/r0/2")
	s.unlock(s.at(12010).hist.Grant(w, 7, 0), APISDK, 12100)
	expect(t, s.check(t, 13000), RuleHang, 1)
}

func TestCheckerLeaseProbe(t *testing.T) {
	s := newScript()
	s.hist.AddProbe(LeaseProbe{Fault: "leader-freeze", Member: "m1", Survived: true})
	expect(t, s.check(t, 0), "", 0)
	s.hist.AddProbe(LeaseProbe{Fault: "peer-cut", Member: "m2", Survived: false, Detail: "the lease expired"})
	expect(t, s.check(t, 0), RuleLease, 1)
}

// abandoned is a holder a granted the lock at 10 ms that abandons it at
// 20 ms, and a waiter b queued from 15 ms, hearing a heartbeat every
// second, granted at grantMs (0: never) with token 8.
func abandoned(grantMs, endMs int) *script {
	s := newScript()
	call := s.at(0).hist.StartCall("http/r0", "a", APIHTTP, OpLock)
	a := s.at(10).hist.Grant(call, 5, 0)
	s.at(20).hist.EndHold(a, EndStopped, "")
	s.hist.Abandoned(a, "stops-reading", s.now, StopReadingBound)
	wait := s.at(15).hist.StartCall("http/r0", "b", APIHTTP, OpLock)
	for ms := 1000; ms < endMs && (grantMs == 0 || ms < grantMs); ms += 1000 {
		s.at(ms).hist.Answer(wait)
	}
	if grantMs > 0 {
		s.unlock(s.at(grantMs).hist.Grant(wait, 8, 0), APIHTTP, grantMs+100)
	}
	return s
}

func TestCheckerRelease(t *testing.T) {
	in := abandoned(20+int(StopReadingBound/time.Millisecond)-1, 40_000)
	r := in.check(t, 40_000)
	expect(t, r, "", 0)
	if len(r.Releases) != 1 {
		t.Fatalf("releases %v, want one", r.Releases)
	}
	expect(t, abandoned(20+int(StopReadingBound/time.Millisecond)+1, 40_000).check(t, 40_000), RuleRelease, 1)
	// Never granted: a violation once the bound has passed, not before.
	expect(t, abandoned(0, 40_000).check(t, 40_000), RuleRelease, 1)
	expect(t, abandoned(0, 9_000).check(t, 9_000), "", 0)
}

// A stale holder's late write must be refused; a fenced store that took
// it breaks fencing.
func TestCheckerLateWrite(t *testing.T) {
	s := newScript()
	call := s.at(0).hist.StartCall("http/r0", "a", APIHTTP, OpLock)
	a := s.at(10).hist.Grant(call, 5, 0)
	s.at(20).hist.EndHold(a, EndStopped, "")
	s.cycle("http/r0", "b", APIHTTP, 30, 100, 200, 8)
	if s.at(300).hist.LateWrite(a) {
		t.Fatal("the fenced store accepted a late write with token 5 after token 8")
	}
	expect(t, s.check(t, 1000), "", 0)

	// A store that lost its memory of token 8 would take it.
	s.hist.highest["http/r0"] = 0
	s.at(400).hist.LateWrite(a)
	expect(t, s.check(t, 1000), RuleFencing, 1)
}
