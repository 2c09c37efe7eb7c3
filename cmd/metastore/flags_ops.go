package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/compactor"
	"github.com/metastore-io/metastore/internal/server"
)

// opsFlags are etcd's operations flags: the backend quota and its alarms,
// and auto-compaction. Names, defaults and meanings are etcd 3.6's.
type opsFlags struct {
	quotaBackendBytes       int64
	autoCompactionMode      string
	autoCompactionRetention string

	// derived by validate
	retention time.Duration
}

func (o *opsFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&o.quotaBackendBytes, "quota-backend-bytes", 0, "Raise alarms when backend size exceeds the given quota. 0 means use the default quota.")
	fs.StringVar(&o.autoCompactionRetention, "auto-compaction-retention", "0", "Auto compaction retention for mvcc key value store. 0 means disable auto compaction.")
	fs.StringVar(&o.autoCompactionMode, "auto-compaction-mode", compactor.ModePeriodic, "interpret 'auto-compaction-retention' one of: periodic|revision. 'periodic' for duration based retention, defaulting to hours if no time unit is provided (e.g. '5m'). 'revision' for revision number based retention.")
}

func (o *opsFlags) validate() error {
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

// apply copies the flags into the member's configuration.
func (o *opsFlags) apply(cfg *server.Config) {
	cfg.QuotaBackendBytes = o.quotaBackendBytes
	cfg.AutoCompactionMode = o.autoCompactionMode
	cfg.AutoCompactionRetention = o.retention
}
