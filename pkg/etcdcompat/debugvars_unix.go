//go:build unix

package etcdcompat

import "syscall"

// fileDescriptorLimit is the soft limit on open files, etcd's
// file_descriptor_limit.
func fileDescriptorLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
