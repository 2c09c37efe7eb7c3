package statemachine

import (
	"testing"
	"time"
)

// Apply posts without ever blocking, however many notices are pending,
// and the loop takes them all, in the order they were posted, after one
// wake-up.
func TestApplyNoticesNeverBlockAndKeepOrder(t *testing.T) {
	q := NewNotices()
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for term := uint64(1); term <= 100; term++ {
			q.post(Notice{Kind: NoticeClusterVersion, Term: term})
		}
	}()
	select {
	case <-posted:
	case <-time.After(10 * time.Second):
		t.Fatal("post blocked with nobody taking")
	}
	select {
	case <-q.Wake():
	default:
		t.Fatal("no wake-up pending after posts")
	}
	got := q.Take()
	if len(got) != 100 {
		t.Fatalf("took %d notices, want 100", len(got))
	}
	for i, n := range got {
		if n.Term != uint64(i+1) {
			t.Fatalf("notice %d has term %d, want %d", i, n.Term, i+1)
		}
	}
	if rest := q.Take(); len(rest) != 0 {
		t.Fatalf("%d notices left after take", len(rest))
	}
}
