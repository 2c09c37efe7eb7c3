// Package faults groups the seams through which tests inject faults into
// a real member; it holds no code of its own. Neither seam is in a
// release build: both are compiled in only with their build tags.
//
//	clockfault  a member's clock runs fast or slow (lease and lock timing)
//	diskfault   writes and fsyncs fail, stall or lie (the WAL, snapshots)
package faults
