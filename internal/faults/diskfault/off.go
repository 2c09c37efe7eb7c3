//go:build !faultinject

package diskfault

import "io"

// BeforeSync is called before each fsync of path; in this build it never
// fails (see the package doc).
func BeforeSync(path string) error { return nil }

// BeforeWrite is called before each write to path; in this build it
// never fails.
func BeforeWrite(path string) error { return nil }

// Writer returns w itself in this build: writes to path go straight to
// it.
func Writer(path string, w io.Writer) io.Writer { return w }
