package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/metastore-io/metastore/internal/format/etcddir"
	"github.com/metastore-io/metastore/internal/host/progress"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// convertEtcdDataDir converts --data-dir in place if it holds a member of
// etcd 3.5 or 3.6 (member/snap/db and member/wal in etcd's formats, as a
// stopped member or `etcdutl snapshot restore` leaves them), so that the
// member starts where etcd left off: same member and cluster IDs, keys,
// leases, users, member list, and the entries etcd's WAL holds past its
// db, which the member applies on start. etcd's files are kept in
// member.etcd beside the converted ones.
func convertEtcdDataDir(o *options, logger *slog.Logger) error {
	if o.ops.walDir != "" {
		isEtcd, err := etcddir.IsWAL(o.ops.walDir)
		if err != nil {
			return err
		}
		if isEtcd {
			return fmt.Errorf("--wal-dir %s holds etcd's WAL: MetaStore converts an etcd data dir whose WAL is in <data-dir>/member/wal; "+
				"move the directory there and start without --wal-dir", o.ops.walDir)
		}
	}
	bar := progress.New(os.Stderr, "converting etcd data dir", "records", logger)
	converted, err := etcddir.Prepare(etcddir.Config{
		DataDir: o.dataDir,
		OpenBackend: func(dataDir string) (kvstore.Backend, error) {
			at := *o
			at.dataDir = dataDir
			return openBackend(&at, logger)
		},
		Progress: bar.Update,
		Logger:   logger,
	})
	if err != nil {
		return err
	}
	if converted {
		bar.Finish()
	}
	return nil
}
