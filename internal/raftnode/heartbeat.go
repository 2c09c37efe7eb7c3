package raftnode

import "time"

// heartbeatDetector tells, per follower, whether the leader's heartbeats
// leave on time: a heartbeat sent more than two heartbeat intervals after
// the previous one to the same follower is late, which is what etcd counts
// as etcd_server_heartbeat_send_failures_total (a leader stalled behind a
// slow disk or an overloaded Ready loop misses its heartbeats, and the
// followers start elections). Used only by the raft loop, so unlocked.
type heartbeatDetector struct {
	interval time.Duration // the longest gap allowed: two heartbeat intervals
	last     map[uint64]time.Time
}

func newHeartbeatDetector(heartbeat time.Duration) heartbeatDetector {
	return heartbeatDetector{interval: 2 * heartbeat, last: map[uint64]time.Time{}}
}

// onTime records a heartbeat to follower at now and reports whether it
// came within the allowed gap of the previous one (the first always does).
func (d *heartbeatDetector) onTime(follower uint64, now time.Time) bool {
	prev, seen := d.last[follower]
	d.last[follower] = now
	return !seen || now.Sub(prev) <= d.interval
}

// reset forgets every follower: a new term's first heartbeats are not late.
func (d *heartbeatDetector) reset() { clear(d.last) }
