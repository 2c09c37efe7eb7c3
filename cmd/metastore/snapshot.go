package main

import (
	"errors"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/backup"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/server"
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
		Long: `Verifies a snapshot file and prints its hash, revision, total keys, total
size and storage version. When --write-out is simple, they are printed
comma-separated.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("snapshot status requires exactly one argument")}
			}
			printer, err := statusPrinter(format)
			if err != nil {
				return usageError{err}
			}
			st, err := backup.ReadStatus(args[0])
			if err != nil {
				return err
			}
			return printer(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().StringVarP(&format, "write-out", "w", "simple", "Set the output format (simple, table, json).")
	return cmd
}

func newSnapshotRestoreCommand() *cobra.Command {
	o := &options{}
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
once per member with the same --initial-cluster.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("snapshot restore requires exactly one argument")}
			}
			if err := o.validate(); err != nil {
				return usageError{err}
			}
			return restoreSnapshot(o, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dataDir, "data-dir", "", "Path to the output data directory (default \"${name}.metastore\"); it must not exist or be empty.")
	fs.StringVar(&o.name, "name", "default", "Human-readable name for this member.")
	fs.StringVar(&o.initialCluster, "initial-cluster", "", "Initial cluster configuration for restore bootstrap (default \"${name}=${initial-advertise-peer-urls}\").")
	fs.StringVar(&o.initialClusterToken, "initial-cluster-token", "etcd-cluster", "Initial cluster token for the cluster during restore bootstrap.")
	fs.StringVar(&o.initialAdvertisePeerURLs, "initial-advertise-peer-urls", "http://localhost:2380", "List of this member's peer URLs to advertise to the rest of the cluster.")
	fs.StringVar(&o.storageEngine, "storage-engine", "memory", "Storage engine the member will run: memory or rocksdb.")
	return cmd
}

// restoreSnapshot runs the restore for validated options.
func restoreSnapshot(o *options, path string) error {
	logger := newLogger(o)
	initial, err := membership.ParseInitialCluster(o.initialCluster)
	if err != nil {
		return usageError{err}
	}
	return server.RestoreSnapshot(server.RestoreConfig{
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
}
