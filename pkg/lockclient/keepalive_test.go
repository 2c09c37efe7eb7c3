package lockclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// lateBound is how late a deadline may fire on a loaded machine before a
// test calls it a failure; the tests check the early side exactly.
const lateBound = 5 * time.Second

// fakeService answers /lock with acquired (validMS, 0 for none), then
// runs beats, then keeps the stream open and silent until the request
// ends; /unlock answers 403 (the lock was lost).
func fakeService(t *testing.T, validMS int64, beats func(w http.ResponseWriter, rc *http.ResponseController)) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == lockapi.PathUnlock {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(lockapi.ErrorResponse{Error: "not the holder"})
			return
		}
		var req lockapi.LockRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.ReportValidity {
			t.Errorf("lock request %+v (%v): want ReportValidity", req, err)
		}
		rc := http.NewResponseController(w)
		_ = json.NewEncoder(w).Encode(lockapi.Event{Status: lockapi.StatusAcquired, Acquired: true, Token: 7, ValidMS: validMS})
		_ = rc.Flush()
		beats(w, rc)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoints: []string{srv.URL}, MaxRetries: -1, KeepAliveTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quiet(http.ResponseWriter, *http.ResponseController) {}

// lockThenLose locks through c and checks Lost fires no earlier than from
// after the request, with ErrKeepAliveTimeout.
func lockThenLose(t *testing.T, c *Client, from time.Duration) {
	t.Helper()
	start := time.Now()
	l, err := c.Lock(context.Background(), Request{Type: "t", ResourceID: "r", NodeID: "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	select {
	case <-l.Lost():
	case <-time.After(from + lateBound):
		t.Fatalf("Lost did not fire within %v", from+lateBound)
	}
	if took := time.Since(start); took < from {
		t.Fatalf("Lost fired after %v, before the %v deadline", took, from)
	}
	if !errors.Is(l.Err(), ErrKeepAliveTimeout) {
		t.Fatalf("Err() = %v, want ErrKeepAliveTimeout", l.Err())
	}
}

// A service that reports validity and then goes silent: Lost fires at the
// receipt of acquired plus its valid_ms, not sooner.
func TestLostAtValidityDeadline(t *testing.T) {
	c := fakeService(t, 300, quiet)
	lockThenLose(t, c, 300*time.Millisecond)
}

// Each held event moves the deadline; blank keep-alives from a service
// that reports validity do not.
func TestHeldEventsMoveTheDeadline(t *testing.T) {
	const beats = 8
	c := fakeService(t, 300, func(w http.ResponseWriter, rc *http.ResponseController) {
		for range beats {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprintf(w, "%s\n", `{"status":"held","acquired":true,"token":7,"valid_ms":300}`)
			_ = rc.Flush()
		}
		for range beats {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprint(w, "   \n")
			_ = rc.Flush()
		}
	})
	lockThenLose(t, c, beats*100*time.Millisecond+300*time.Millisecond)
}

// A service that reports no validity: any line, blank or not, moves the
// deadline to KeepAliveTimeout after its receipt.
func TestKeepAliveTimeoutWithoutValidity(t *testing.T) {
	const beats = 5
	c := fakeService(t, 0, func(w http.ResponseWriter, rc *http.ResponseController) {
		for range beats {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprint(w, "\n")
			_ = rc.Flush()
		}
	})
	lockThenLose(t, c, beats*100*time.Millisecond+200*time.Millisecond)
}

// Do cancels the critical section's context when the lock is lost, and
// reports why.
func TestDoCancelsOnLoss(t *testing.T) {
	c := fakeService(t, 200, quiet)
	var opErr error
	_, err := c.Do(context.Background(), Request{Type: "t", ResourceID: "r", NodeID: "n"}, func(ctx context.Context, l *Lock) error {
		select {
		case <-ctx.Done():
			opErr = ctx.Err()
		case <-time.After(200*time.Millisecond + lateBound):
			opErr = errors.New("the critical section's context was not cancelled")
		}
		return opErr
	})
	if !errors.Is(opErr, context.Canceled) {
		t.Fatalf("op ended with %v, want its context cancelled", opErr)
	}
	if !errors.Is(err, ErrKeepAliveTimeout) {
		t.Fatalf("Do = %v, want ErrKeepAliveTimeout in it", err)
	}
}

// A passed deadline stays passed: a line read late cannot revive it.
func TestDeadlineStaysPassed(t *testing.T) {
	fired := make(chan struct{})
	d := newDeadline(time.Now().Add(10*time.Millisecond), func() { close(fired) })
	d.start()
	<-fired
	if d.move(time.Now().Add(time.Hour)) {
		t.Fatal("a passed deadline was moved")
	}
}
