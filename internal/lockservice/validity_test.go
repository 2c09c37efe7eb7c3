package lockservice

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// lateBound is how late a timer may fire on a loaded machine before a
// test calls it a failure; the early side is checked exactly.
const lateBound = 5 * time.Second

// TestValidityDeadline: the deadline is the send time plus TTL·(1−2ρ)
// minus the lock delay, and expired closes at it, not before.
func TestValidityDeadline(t *testing.T) {
	sent := time.Now()
	v := newValidity(sent, time.Second, 500*time.Millisecond)
	defer v.stop()
	want := sent.Add(980*time.Millisecond - 500*time.Millisecond)
	select {
	case <-v.expired:
	case <-time.After(time.Until(want) + lateBound):
		t.Fatal("expired did not close")
	}
	if now := time.Now(); now.Before(want) {
		t.Fatalf("expired %v before the deadline", want.Sub(now))
	}
	if v.valid() || v.remaining() != 0 {
		t.Fatalf("valid after the deadline: remaining %v", v.remaining())
	}
}

// TestValidityConfirmMovesThenStays: a confirmation moves the deadline
// later (never earlier), and none revives a passed deadline.
func TestValidityConfirmMovesThenStays(t *testing.T) {
	start := time.Now()
	v := newValidity(start, time.Second, 700*time.Millisecond) // 280 ms
	defer v.stop()
	v.confirm(start.Add(-time.Second), time.Second) // older: no effect
	v.confirm(start.Add(200*time.Millisecond), time.Second)
	select {
	case <-v.expired:
	case <-time.After(lateBound):
		t.Fatal("expired did not close")
	}
	if took := time.Since(start); took < 480*time.Millisecond {
		t.Fatalf("expired after %v, before the moved deadline (480 ms)", took)
	}
	v.confirm(time.Now(), time.Hour)
	if v.valid() {
		t.Fatal("a confirmation revived a passed deadline")
	}
}

// TestConfigValidate: the lock delay must leave validity after a renewal
// period, and the write timeout must cover a lease.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" for valid
	}{
		{Config{}, ""},
		{Config{LockDelay: 3 * time.Second}, ""},
		{Config{LockDelay: 4500 * time.Millisecond}, "lock delay 4.5s"},
		{Config{LockDelay: -time.Second}, "lock delay -1s"},
		{Config{WriteTimeout: time.Second}, "write timeout 1s"},
	} {
		c.cfg.Client = &clientv3.Client{}
		_, err := New(c.cfg)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}
