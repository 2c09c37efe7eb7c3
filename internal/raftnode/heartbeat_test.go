package raftnode

import (
	"testing"
	"time"
)

func TestHeartbeatDetector(t *testing.T) {
	d := newHeartbeatDetector(100 * time.Millisecond)
	t0 := time.Unix(1000, 0)
	if !d.onTime(2, t0) {
		t.Fatal("first heartbeat to a follower reported late")
	}
	if !d.onTime(2, t0.Add(200*time.Millisecond)) {
		t.Fatal("heartbeat two intervals after the previous one reported late")
	}
	if d.onTime(2, t0.Add(401*time.Millisecond)) {
		t.Fatal("heartbeat more than two intervals after the previous one reported on time")
	}
	if !d.onTime(3, t0.Add(time.Hour)) {
		t.Fatal("followers are not timed separately")
	}
	d.reset()
	if !d.onTime(2, t0.Add(time.Hour)) {
		t.Fatal("first heartbeat after reset reported late")
	}
}
