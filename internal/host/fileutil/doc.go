// Package fileutil holds the few file-system helpers the durable parts of a
// member (WAL, snapshot files, the RocksDB engine) share: making directory
// changes durable, and the fixed-width hexadecimal file names they use.
package fileutil
