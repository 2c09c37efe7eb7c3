package main

import (
	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/server"
)

// opsFlags are etcd's operations flags: the backend quota and its alarms.
// Names, defaults and meanings are etcd 3.6's.
type opsFlags struct {
	quotaBackendBytes int64
}

func (o *opsFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&o.quotaBackendBytes, "quota-backend-bytes", 0, "Raise alarms when backend size exceeds the given quota. 0 means use the default quota.")
}

func (o *opsFlags) validate() error { return nil }

// apply copies the flags into the member's configuration.
func (o *opsFlags) apply(cfg *server.Config) {
	cfg.QuotaBackendBytes = o.quotaBackendBytes
}
