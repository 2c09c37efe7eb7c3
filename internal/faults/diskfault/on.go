//go:build faultinject

package diskfault

import (
	"fmt"
	"io"
	"os"
)

// active is the process's injector, built from EnvVar when the package
// is initialised, and its file watched for the life of the process.
// Package-level state is the point of this file: it exists only in the
// fault-injection build, where the environment is the one configuration.
var active = func() *injector {
	in, err := fromSpec(os.Getenv(EnvVar), os.Stderr)
	if err != nil {
		// A test asked for a fault it would not get.
		fmt.Fprintln(os.Stderr, "diskfault:", err)
		os.Exit(2)
	}
	go in.watch(nil)
	return in
}()

// BeforeSync applies the plan in force to one fsync of path.
func BeforeSync(path string) error { return active.beforeSync(path) }

// BeforeWrite applies the plan in force to one write to path.
func BeforeWrite(path string) error { return active.beforeWrite(path) }

// Writer returns w with every write passed through BeforeWrite(path).
func Writer(path string, w io.Writer) io.Writer {
	return faultWriter{in: active, path: path, w: w}
}
