package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/member"
)

// raftFlags are etcd's Raft tuning flags beyond the heartbeat and
// election timeout. --raft-read-timeout and --raft-write-timeout are
// accepted without effect (flags_noeffect.go says why).
type raftFlags struct {
	preVote                    bool
	snapshotCatchUpEntries     uint64
	initialElectionTickAdvance bool
	readTimeout, writeTimeout  time.Duration
}

func (o *options) registerRaft(fs *pflag.FlagSet) {
	r := &o.raft
	fs.BoolVar(&r.preVote, "pre-vote", true, "Enable the raft Pre-Vote algorithm to prevent disruption when a node that has been partitioned away rejoins the cluster.")
	fs.Uint64Var(&r.snapshotCatchUpEntries, "snapshot-catchup-entries", 5000, "Number of entries for a slow follower to catch up after compacting the raft storage entries.")
	fs.BoolVar(&r.initialElectionTickAdvance, "initial-election-tick-advance", true, "Whether to fast-forward initial election ticks on boot for faster election.")
	fs.DurationVar(&r.readTimeout, "raft-read-timeout", 5*time.Second, "Read timeout set on each rafthttp connection")
	fs.DurationVar(&r.writeTimeout, "raft-write-timeout", 5*time.Second, "Write timeout set on each rafthttp connection")
}

// apply copies the Raft flags into the member's configuration. The
// catch-up entries count only when given (either spelling): left alone,
// the member keeps etcd's 5000, or half the snapshot count when that is
// smaller.
func (r *raftFlags) apply(cfg *member.ServerConfig, fs *pflag.FlagSet) {
	for _, name := range []string{"snapshot-catchup-entries", "experimental-snapshot-catchup-entries"} {
		if f := fs.Lookup(name); f != nil && f.Changed {
			cfg.SnapshotCatchUpEntries = r.snapshotCatchUpEntries
		}
	}
	cfg.DisablePreVote = !r.preVote
	cfg.DisableElectionTickAdvance = !r.initialElectionTickAdvance
}
