// Package memory is an in-RAM kvstore.Backend: the engine for tests, for
// members that keep their state in the Raft log and snapshots only, and
// the reference the persistent engine is compared with.
//
// # Layout
//
// The content is one B-tree (github.com/google/btree) of key/value items
// ordered by key bytes. The writer (the single apply goroutine) owns a
// mutable tree. Batch.Commit applies its operations to it in order and
// then publishes Clone() of it through an atomic.Pointer as the current
// immutable image; Restore does the same with a freshly parsed tree.
// Cloning is O(1): the two trees share every node until the writer
// changes one, and then the writer copies that node first (copy on
// write). For example, after
//
//	Commit{Put a=1, Put b=2}  -> image I1 = {a:1 b:2}
//	v := ReadView()           -> v holds I1
//	Commit{Delete a, Put c=3} -> image I2 = {b:2 c:3}
//
// v still reads {a:1 b:2}: the delete copied the node holding "a" before
// removing it from the writer's tree, and I1 kept the original.
//
// ReadViews are therefore lock-free and isolated from later commits, and
// a view costs nothing to keep but the memory of the nodes only it still
// references. Items are never modified once inserted: keys and values are
// copied into the batch when they are added to it.
//
// Invariants: only the writer touches the mutable tree and its size
// counter; a published image is never changed; Size is the number of key
// and value bytes of the current image.
//
// # Snapshots
//
// ReadView.WriteTo writes the image in internal/format/kvimage's framed,
// versioned format with a CRC-32C over everything (magic "MSMEMSNP"; the
// byte layout is drawn there), and Restore parses and verifies the whole
// stream into a new tree before swapping it in: a truncated, reordered or corrupt
// image is rejected with an error wrapping ErrCorruptSnapshot and the old
// content is kept.
package memory
