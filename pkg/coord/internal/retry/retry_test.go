package retry

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestDelaysGrowExponentiallyUpToTheCap(t *testing.T) {
	p := Policy{MaxAttempts: 6, InitialDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Multiplier: 2}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if got := Delays(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

func TestDoRetriesOnlyTransientErrors(t *testing.T) {
	p := Policy{MaxAttempts: 3, InitialDelay: time.Millisecond, Multiplier: 2}
	calls := 0
	err := Do(context.Background(), p, func(context.Context) error { calls++; return rpctypes.ErrNoLeader })
	if calls != 3 || !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Fatalf("transient: %d calls, %v", calls, err)
	}
	calls = 0
	permanent := errors.New("bad request")
	if err := Do(context.Background(), p, func(context.Context) error { calls++; return permanent }); calls != 1 || err != permanent {
		t.Fatalf("permanent: %d calls, %v", calls, err)
	}
	calls = 0
	if err := Do(context.Background(), p, func(context.Context) error {
		calls++
		if calls < 2 {
			return rpctypes.ErrTimeout
		}
		return nil
	}); err != nil || calls != 2 {
		t.Fatalf("recovering: %d calls, %v", calls, err)
	}
}
