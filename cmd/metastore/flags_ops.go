package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/kvstore/compactor"
	"github.com/metastore-io/metastore/internal/member"
)

// opsFlags are etcd's operations flags: the backend quota and its alarms,
// auto-compaction and the corruption checks. Names, defaults and meanings are etcd 3.6's.
type opsFlags struct {
	quotaBackendBytes       int64
	autoCompactionMode      string
	autoCompactionRetention string

	// The InitialCorruptCheck and CompactHashCheck switches are feature
	// gates (featuregate.go, with their --experimental-* flags); the
	// --experimental-*-time spellings are aliases (flags_deprecated.go).
	corruptCheckTime     time.Duration
	compactHashCheckTime time.Duration

	walDir        string
	maxSnapshots  uint
	maxWALs       uint
	unsafeNoFsync bool
	forceNew      bool

	// derived by validate
	retention time.Duration
}

func (o *opsFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&o.quotaBackendBytes, "quota-backend-bytes", 0, "Raise alarms when backend size exceeds the given quota. 0 means use the default quota.")
	fs.StringVar(&o.autoCompactionRetention, "auto-compaction-retention", "0", "Auto compaction retention for mvcc key value store. 0 means disable auto compaction.")
	fs.DurationVar(&o.corruptCheckTime, "corrupt-check-time", 0, "Duration of time between cluster corruption check passes.")
	fs.DurationVar(&o.compactHashCheckTime, "compact-hash-check-time", time.Minute, "Duration of time between leader checks followers compaction hashes.")
	fs.StringVar(&o.walDir, "wal-dir", "", "Path to the dedicated wal directory.")
	fs.UintVar(&o.maxSnapshots, "max-snapshots", 5, "Maximum number of snapshot files to retain (0 is unlimited). Deprecated in v3.6 and will be decommissioned in v3.8.")
	fs.UintVar(&o.maxWALs, "max-wals", 5, "Maximum number of wal files to retain (0 is unlimited).")
	fs.BoolVar(&o.forceNew, "force-new-cluster", false, "Force to create a new one member cluster.")
	fs.BoolVar(&o.unsafeNoFsync, "unsafe-no-fsync", false, "Disables fsync, unsafe, will cause data loss.")
	fs.StringVar(&o.autoCompactionMode, "auto-compaction-mode", compactor.ModePeriodic, "interpret 'auto-compaction-retention' one of: periodic|revision. 'periodic' for duration based retention, defaulting to hours if no time unit is provided (e.g. '5m'). 'revision' for revision number based retention.")
}

func (o *opsFlags) validate() error {
	if o.compactHashCheckTime <= 0 {
		return fmt.Errorf("--compact-hash-check-time must be >0 (set to %v)", o.compactHashCheckTime)
	}
	if err := compactor.ValidateMode(o.autoCompactionMode); err != nil {
		return err
	}
	if o.autoCompactionRetention == "" {
		o.autoCompactionRetention = "0"
	}
	r, err := compactor.ParseRetention(o.autoCompactionMode, o.autoCompactionRetention)
	if err != nil {
		return err
	}
	o.retention = r
	return nil
}

// apply copies the flags (and the corruption-check gates) into the
// member's configuration.
func (o *opsFlags) apply(cfg *member.ServerConfig, gates *featureGates) {
	cfg.QuotaBackendBytes = o.quotaBackendBytes
	cfg.AutoCompactionMode = o.autoCompactionMode
	cfg.AutoCompactionRetention = o.retention
	cfg.WALDir = o.walDir
	cfg.MaxSnapshotFiles = int(o.maxSnapshots)
	if o.maxSnapshots == 0 {
		cfg.MaxSnapshotFiles = -1 // etcd: 0 is unlimited
	}
	cfg.MaxWALFiles = int(o.maxWALs)
	if o.maxWALs == 0 {
		cfg.MaxWALFiles = -1 // etcd: 0 is unlimited
	}
	cfg.UnsafeNoFsync = o.unsafeNoFsync
	cfg.ForceNewCluster = o.forceNew
	cfg.InitialCorruptCheck = gates.Enabled("InitialCorruptCheck")
	cfg.CorruptCheckTime = o.corruptCheckTime
	cfg.CompactHashCheck = gates.Enabled("CompactHashCheck")
	cfg.CompactHashCheckTime = o.compactHashCheckTime
}
