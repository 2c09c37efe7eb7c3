//go:build tools

// Package etcd35 pins etcd 3.5's server, whose snapshot files `metastore
// snapshot restore` must read (bin/ref/etcd-3.5, built by make tools). It
// is a module of its own: one module cannot hold two etcd versions.
package etcd35

import (
	_ "go.etcd.io/etcd/server/v3"
)
