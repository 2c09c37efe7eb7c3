// Package gcheadroom sizes the Go garbage collector's headroom for a
// server whose heap is mostly one long-lived structure (MetaStore's key
// index): it keeps the heap goal at
//
//	live + max(min(MinHeadroom, live), live × Percent / 100)
//
// by re-setting the collector's target percentage (what GOGC sets) as the
// live heap changes.
//
// # Why
//
// The collector starts a cycle when the heap has grown by GOGC percent of
// what the last cycle found live. Go's default, 100, suits heaps that turn
// over: the headroom is as large as the live heap. Here the live heap is
// the key index, which requests do not free, and the garbage comes from
// requests; at GOGC=100 a server holding a 200 MiB index keeps up to
// another 200 MiB of RAM only so that collections are rarer.
//
// The trade is memory for CPU either way. A cycle costs time in proportion
// to the live heap (it marks all of it) and cycles happen once per
// headroom's worth of allocation, so the collector's CPU per allocated
// byte is proportional to live/headroom: 1 at GOGC=100, 2 at Percent=50,
// whatever the index size. A fixed headroom instead would make a large
// index's collections ever more frequent. So: a percentage for large
// heaps (Percent, default 50: Prometheus made the same change of its
// default GOGC, from 100 to 50, in 2.53, for the same heap shape, its
// in-memory TSDB head, and found the CPU cost small), and a floor in bytes
// (MinHeadroom, default 32 MiB) so that a store of a few tens of MiB does
// not collect twice as often as Go's default would. The floor is never
// more than the live heap itself (GOGC=100, etcd's setting): the headroom
// is sized from the live heap, so a small member's resident memory stays
// near etcd's instead of carrying a fixed floor of garbage. Below 32 MiB
// of live heap that is GOGC=100, from 32 to 64 MiB 32 MiB, and above
// 64 MiB half the live heap: half of GOGC=100's excess memory, for twice
// its collector CPU per allocated byte.
//
// The floor was 64 MiB. On the memory engine, whose live heap holds every
// stored revision, a member with 60 to 130 MiB live then carried up to
// 64 MiB of garbage, which the standard workload's peak resident size
// showed; a smaller floor lowered the peak without moving server CPU per
// put beyond the noise, as the band where the floor applies is narrow
// (docs/performance.md, "Peak memory").
//
// For example, with the defaults: 20 MiB live -> goal 40 MiB (target
// 100%); 50 MiB -> 82 MiB (64%); 100 MiB -> 150 MiB (50%).
//
// Under a memory limit (GOMEMLIMIT) the runtime collects at whichever of
// the two goals comes first, so the headroom shrinks as the heap nears
// the limit; the member's other bounds (internal/host/memlimit) are shares of
// the same limit.
//
// # How
//
// Run sets the target, then re-sets it after every GC cycle, when it
// moved by more than a twentieth, from the heap that cycle marked live
// (/gc/heap/live:bytes in runtime/metrics). The hook is a runtime cleanup on an
// unreferenced sentinel, re-armed each time it runs, so the target is
// never more than a cycle behind the live heap; a timer would be, by a
// whole period, and a restart's index rebuild allocates hundreds of MiB in
// less than a second.
//
// An operator's choice wins: when the GOGC environment variable is set,
// Run leaves the collector alone. GOMEMLIMIT (or debug.SetMemoryLimit)
// needs nothing from here (see above): a memory limit keeps working as a
// ceiling.
package gcheadroom
