package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/format/backup"
	"github.com/metastore-io/metastore/internal/format/etcddb"
	"github.com/metastore-io/metastore/internal/host/progress"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/member/restore"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// newSnapshotCommand is `metastore snapshot`, the counterpart of
// `etcdutl snapshot` for the files `etcdctl snapshot save` fetches from a
// MetaStore member.
func newSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot <subcommand>",
		Short: "Inspects and restores snapshot files saved with `etcdctl snapshot save`",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSnapshotStatusCommand(), newSnapshotRestoreCommand())
	return cmd
}

func newSnapshotStatusCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status <filename>",
		Short: "Gets the status of a snapshot file",
		Long: `Prints a snapshot file's hash, revision, total keys, total size and
storage version. When --write-out is simple, they are printed
comma-separated. For an etcd snapshot (what etcdctl snapshot save writes,
from etcd or MetaStore) the figures are etcdutl's; for a file in
MetaStore's older format the file is verified and the hash is the one
Maintenance.Hash reports.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("snapshot status requires exactly one argument")}
			}
			printer, err := statusPrinter(format)
			if err != nil {
				return usageError{err}
			}
			st, err := readSnapshotStatus(args[0])
			if err != nil {
				return err
			}
			return printer(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().StringVarP(&format, "write-out", "w", "simple", "Set the output format (simple, table, json).")
	return cmd
}

// restoreFlags are etcdutl's restore flags that the serve options lack.
type restoreFlags struct {
	walDir          string
	skipHashCheck   bool
	revisionBump    uint64
	markCompacted   bool
	initialMmapSize uint64
}

func newSnapshotRestoreCommand() *cobra.Command {
	o := &options{}
	r := &restoreFlags{}
	// Everything restore does not set keeps the serve defaults, so the
	// storage engine is opened exactly as `metastore` opens it.
	o.register(pflag.NewFlagSet("serve defaults", pflag.ContinueOnError))
	cmd := &cobra.Command{
		Use:   "restore <filename> --data-dir {output dir} [options]",
		Short: "Restores a snapshot file into a new data directory",
		Long: `Creates a new data directory from a snapshot file, like etcdutl snapshot
restore: the member started on it holds the snapshot's keys, revisions and
leases, in a new cluster whose members are those of --initial-cluster (the
member list of the cluster the snapshot was saved from is dropped). Start
the member with the same --name, --initial-cluster,
--initial-cluster-token, --initial-advertise-peer-urls and
--storage-engine. For a cluster of several members, restore the same file
once per member with the same --initial-cluster.

The file may be an etcd 3.5 or 3.6 snapshot (etcdctl snapshot save against
etcd or MetaStore, or with --skip-hash-check a member's member/snap/db) or
a snapshot in MetaStore's older format. Progress is drawn as a bar on a
terminal and logged every few seconds otherwise.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("snapshot restore requires exactly one argument")}
			}
			if err := o.validate(); err != nil {
				return usageError{err}
			}
			if (r.revisionBump > 0) != r.markCompacted {
				return usageError{restore.ErrBumpWithoutCompact}
			}
			return restoreSnapshot(o, r, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dataDir, "data-dir", "", "Path to the output data directory (default \"${name}.metastore\"); it must not exist or be empty.")
	fs.StringVar(&o.name, "name", "default", "Human-readable name for this member.")
	fs.StringVar(&o.initialCluster, "initial-cluster", "", "Initial cluster configuration for restore bootstrap (default \"${name}=${initial-advertise-peer-urls}\").")
	fs.StringVar(&o.initialClusterToken, "initial-cluster-token", "etcd-cluster", "Initial cluster token for the cluster during restore bootstrap.")
	fs.StringVar(&o.initialAdvertisePeerURLs, "initial-advertise-peer-urls", "http://localhost:2380", "List of this member's peer URLs to advertise to the rest of the cluster.")
	fs.StringVar(&o.storageEngine, "storage-engine", "memory", "Storage engine the member will run: memory or rocksdb.")
	fs.StringVar(&r.walDir, "wal-dir", "", "Path to the WAL directory (use --data-dir if none given)")
	fs.BoolVar(&r.skipHashCheck, "skip-hash-check", false, "Ignore snapshot integrity hash value (required if copied from data directory)")
	fs.Uint64Var(&r.revisionBump, "bump-revision", 0, "How much to increase the latest revision after restore")
	fs.BoolVar(&r.markCompacted, "mark-compacted", false, "Mark the latest revision after restore as the point of scheduled compaction (required if --bump-revision > 0, disallowed otherwise)")
	fs.Uint64Var(&r.initialMmapSize, "initial-memory-map-size", 0, "Accepted for etcdutl compatibility; MetaStore's engines do not memory-map a bbolt file, so it has no effect.")
	return cmd
}

// restoreSnapshot runs the restore for validated options.
func restoreSnapshot(o *options, r *restoreFlags, path string) error {
	built, err := newLogger(o)
	if err != nil {
		return err
	}
	defer built.Close()
	logger := built.Logger
	initial, err := membership.ParseInitialCluster(o.initialCluster)
	if err != nil {
		return usageError{err}
	}
	isEtcd, err := etcddb.IsDBFile(path)
	if err != nil {
		return err
	}
	unit := "bytes"
	if isEtcd {
		unit = "records"
	}
	bar := progress.New(os.Stderr, "restoring snapshot", unit, logger)
	err = restore.DataDir(restore.Config{
		SkipHashCheck:       r.skipHashCheck,
		RevisionBump:        r.revisionBump,
		MarkCompacted:       r.markCompacted,
		Progress:            bar.Update,
		SnapshotPath:        path,
		DataDir:             o.dataDir,
		Name:                o.name,
		InitialCluster:      initial,
		InitialClusterToken: o.initialClusterToken,
		PeerURLs:            splitURLs(o.initialAdvertisePeerURLs),
		OpenBackend: func(dataDir string) (kvstore.Backend, error) {
			at := *o
			at.dataDir = dataDir
			return openBackend(&at, logger)
		},
		Logger: logger,
	})
	if err == nil {
		bar.Finish()
	}
	return err
}

// readSnapshotStatus reads the status of either format.
func readSnapshotStatus(path string) (snapshotStatus, error) {
	isEtcd, err := etcddb.IsDBFile(path)
	if err != nil {
		return snapshotStatus{}, err
	}
	if isEtcd {
		st, err := etcddb.ReadStatus(path)
		return snapshotStatus(st), err
	}
	st, err := backup.ReadStatus(path)
	if err != nil {
		return snapshotStatus{}, err
	}
	// Every file of MetaStore's own format was saved from a member
	// reporting this storage version.
	return snapshotStatus{Hash: st.Hash, Revision: st.Revision, TotalKey: st.TotalKey, TotalSize: st.TotalSize,
		Version: etcdcompat.StorageVersion}, nil
}
