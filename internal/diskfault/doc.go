// Package diskfault is the seam through which tests make a member's disk
// misbehave: an fsync that fails, or one that stalls.
//
// In a normal build (no build tag) BeforeSync does nothing and costs
// nothing: it is an empty function the compiler inlines away. In a build
// with the tag faultinject (make build-faults writes bin/metastore-faults)
// it reads METASTORE_DISKFAULT once, at the first sync, and then acts on
// every sync the WAL and the snapshot store make:
//
//	METASTORE_DISKFAULT=fsync-error-after=N   the first N syncs succeed,
//	                                          every later one fails with EIO
//	METASTORE_DISKFAULT=fsync-delay=D         every sync first waits D
//	                                          (a Go duration: 200ms)
//
// Both may be given, separated by commas. The failure is injected before
// the real fsync, so the data stays where a failed fsync leaves it: in
// the page cache, not known to be on disk. A member must then stop and
// never acknowledge what it could not make durable (the lesson of
// PostgreSQL's "fsyncgate": after a failed fsync the kernel may drop the
// dirty pages and a retry would falsely succeed).
//
// The RocksDB engine's own syncs happen inside RocksDB and are not
// reached by this seam; the WAL's are, and they are what acknowledges a
// write.
package diskfault
