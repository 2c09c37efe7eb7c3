package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/metastore-io/metastore/internal/host/logging"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// Version is MetaStore's own version, set at build time with
// -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

// verifyError marks a configuration that parsed but that etcd's validation
// refuses: logged as etcd logs it, exit status 1.
type verifyError struct{ err error }

func (e verifyError) Error() string { return e.err.Error() }
func (e verifyError) Unwrap() error { return e.err }

// usageError marks errors caused by the command line: they exit with 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	cmd := newRootCommand()
	cmd.SetArgs(normalizeArgs(cmd, os.Args[1:]))
	if err := cmd.Execute(); err != nil {
		var ve verifyError
		if errors.As(err, &ve) {
			// etcd logs a configuration it refuses, then exits 1.
			if l, lerr := logging.New(logging.Config{Logger: "zap"}); lerr == nil {
				l.Warn("failed to verify flags", "error", ve.err.Error())
				l.Close()
			}
			os.Exit(1)
		}
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
				return verifyError{fmt.Errorf("%q is not a valid flag", args[0])}
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
				return verifyError{err}
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
	root.AddCommand(newGatewayCommand())
	return root
}

func printVersion(cmd *cobra.Command) {
	out := cmd.OutOrStdout()
	// etcd's four lines first (scripts read "etcd Version"), the etcd
	// version being the API MetaStore serves; the build in the Git SHA
	// line; then MetaStore's own.
	fmt.Fprintf(out, "etcd Version: %s\n", etcdcompat.EtcdServerVersion)
	fmt.Fprintf(out, "Git SHA: metastore-%s\n", Version)
	fmt.Fprintf(out, "Go Version: %s\n", runtime.Version())
	fmt.Fprintf(out, "Go OS/Arch: %s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "MetaStore Version: %s\n", Version)
}
