// Package backendtest is the conformance suite every kvstore.Backend
// engine must pass: ordering of arbitrary byte keys, Get / Ascend /
// Descend over every kind of bound, Delete and DeleteRange (bounded,
// unbounded, empty, inverted), operations applied in batch order,
// atomicity of a batch as seen by concurrent readers, isolation of a
// ReadView from later commits, the WriteTo / Restore round trip (also
// while the writer goes on committing), and Restore rejecting garbage
// and truncated images while keeping the old content.
//
// The suite checks behaviour only through the kvstore.Backend interface,
// so the in-RAM and the RocksDB engines run exactly the same tests:
//
//	func TestBackend(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) kvstore.Backend { ... })
//	}
package backendtest
