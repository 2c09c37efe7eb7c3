//go:build tools

// Package tools pins the reference etcd binaries (etcd, etcdctl, etcdutl,
// benchmark) that the end-to-end tests and benchmarks run side by side
// with MetaStore.
// It is its own module so that etcd's server dependencies never enter
// MetaStore's go.mod.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
	_ "go.etcd.io/etcd/v3/tools/benchmark"
)
