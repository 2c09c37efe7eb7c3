//go:build !unix

package etcdcompat

// fileDescriptorLimit: etcd reports none off Unix either.
func fileDescriptorLimit() (uint64, bool) { return 0, false }
