package statemachine

import (
	"context"
	"testing"
	"time"
)

// A waiter below the watermark returns once it is advanced past its
// value; one at or below returns at once; a cancelled one returns its
// context's error.
func TestWatermarkReleasesWaiters(t *testing.T) {
	var w Watermark
	w.Advance(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Wait(ctx, 3); err != nil {
		t.Fatalf("wait at the watermark: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx, 5) }()
	w.Advance(4)
	w.Advance(5)
	if err := <-done; err != nil {
		t.Fatalf("wait released by advance: %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := w.Wait(cctx, 9); err != context.Canceled {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
}
