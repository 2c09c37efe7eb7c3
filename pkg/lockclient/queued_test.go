package lockclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// queuedService answers /lock with queued, then keeps the stream open,
// writing a blank keep-alive every beat (never when beat is 0), and,
// after grantAfter (when positive), acquired.
func queuedService(t *testing.T, beat, grantAfter time.Duration) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = json.NewEncoder(w).Encode(lockapi.Event{Status: lockapi.StatusQueued, Position: 1})
		_ = rc.Flush()
		var beats <-chan time.Time
		if beat > 0 {
			tick := time.NewTicker(beat)
			defer tick.Stop()
			beats = tick.C
		}
		var grant <-chan time.Time
		if grantAfter > 0 {
			grant = time.After(grantAfter)
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-beats:
				_, _ = w.Write([]byte("\n"))
				_ = rc.Flush()
			case <-grant:
				_ = json.NewEncoder(w).Encode(lockapi.Event{Status: lockapi.StatusAcquired, Acquired: true, Token: 9, ValidMS: 60_000})
				_ = rc.Flush()
				grant = nil
			}
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoints: []string{srv.URL}, MaxRetries: -1, KeepAliveTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A queued request whose member falls silent (frozen, cut off) ends after
// KeepAliveTimeout as a network error, which Lock retries elsewhere,
// instead of waiting for as long as ctx allows.
func TestQueuedSilenceEndsTheAttempt(t *testing.T) {
	c := queuedService(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), lateBound+time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Lock(ctx, Request{Type: "t", ResourceID: "r", NodeID: "n"})
	var netErr *NetworkError
	if !errors.As(err, &netErr) {
		t.Fatalf("Lock on a silent member: %v, want a *NetworkError", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > lateBound {
		t.Fatalf("Lock gave up after %v, want after KeepAliveTimeout (300ms)", took)
	}
}

// Keep-alives keep a queued request waiting past KeepAliveTimeout; once
// acquired, the lock outlives the context of the Lock call.
func TestQueuedKeepAlivesWaitAndLockOutlivesCtx(t *testing.T) {
	c := queuedService(t, 50*time.Millisecond, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), lateBound+time.Second)
	l, err := c.Lock(ctx, Request{Type: "t", ResourceID: "r", NodeID: "n"})
	if err != nil {
		cancel()
		t.Fatalf("Lock with keep-alives while queued: %v", err)
	}
	defer l.Close()
	if l.Token() != 9 {
		t.Fatalf("token %d, want 9", l.Token())
	}
	cancel()
	// The stream keeps writing keep-alives; a lock that died with ctx
	// would end at once.
	select {
	case <-l.Lost():
		t.Fatalf("the lock ended with its Lock call's context: %v", l.Err())
	case <-time.After(500 * time.Millisecond):
	}
}
