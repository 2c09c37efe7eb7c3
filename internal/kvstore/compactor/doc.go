// Package compactor is etcd's auto-compaction (--auto-compaction-mode and
// --auto-compaction-retention): a loop on every member that, while its
// member leads, proposes compactions through Raft (Compactable is the
// server's Compact, the same path as `etcdctl compact`) so a store under
// constant writes keeps a bounded history without an external cron.
//
// Two modes, with etcd 3.6's schedules (v3compactor):
//
//   - periodic, retention a duration P: every P/10 (P capped at one hour
//     for the interval) it samples the current revision into a window of
//     P/10-spaced samples; once P has passed since the start (later: since
//     the last success, with the interval capped at one hour) it compacts
//     at the oldest sample, the revision of about P ago, unless that is the
//     revision it compacted last. A retention of 10m thus compacts every
//     10 minutes to the revision of 10 minutes ago; 24h compacts every
//     hour to the revision of 24 hours ago.
//   - revision, retention N: every 5 minutes it compacts at current
//     revision - N, unless that is not positive or unchanged since the
//     last success.
//
// A failed compaction is retried at the next tick; ErrCompacted (another
// compaction got there first) counts as success. A follower's loop is
// paused (Pause/Resume follow leadership), so only the leader proposes.
// Time comes from a Clock so tests drive both schedules without sleeping.
package compactor
