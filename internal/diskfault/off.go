//go:build !faultinject

package diskfault

// BeforeSync is called before each fsync of path; in this build it never
// fails (see the package doc).
func BeforeSync(path string) error { return nil }
