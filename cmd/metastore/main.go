package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// Version is MetaStore's own version, set at build time with
// -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

// usageError marks errors caused by the command line: they exit with 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	cmd := newRootCommand()
	cmd.SetArgs(normalizeArgs(cmd, os.Args[1:]))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "metastore: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	opts := &options{}
	var showVersion bool
	root := &cobra.Command{
		Use:   "metastore",
		Short: "An etcd v3-compatible metadata server replicated with Raft",
		// etcd's message for a stray argument (cobra would call it an
		// unknown command, the root having subcommands).
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%q is not a valid flag", args[0])
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				printVersion(cmd)
				return nil
			}
			fs, notes, err := resolveFlags(cmd.Flags(), opts)
			if err != nil {
				// etcd: "failed to verify flags", exit status 1.
				return err
			}
			return run(cmd.Context(), opts, fs, notes)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{etcdFlagError(err)} })
	opts.register(root.Flags())
	root.Flags().BoolVar(&showVersion, "version", false, "Print the version and exit.")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { printVersion(cmd) },
	})
	root.AddCommand(newSnapshotCommand())
	return root
}

func printVersion(cmd *cobra.Command) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "MetaStore Version: %s\n", Version)
	fmt.Fprintf(out, "etcd API Version: %s\n", etcdcompat.EtcdServerVersion)
	fmt.Fprintf(out, "Go Version: %s\n", runtime.Version())
	fmt.Fprintf(out, "Go OS/Arch: %s/%s\n", runtime.GOOS, runtime.GOARCH)
}
