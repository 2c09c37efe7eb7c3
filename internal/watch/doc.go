// Package watch delivers the store's changes to etcd watchers: it is the
// engine behind etcd's Watch service, with etcd 3.6's semantics.
//
// # Pieces
//
// A Hub serves every watcher of a member. The apply goroutine hands it each
// commit's events with Publish. A Stream is one client stream (etcd's watch
// stream): it creates and cancels watches (etcd's WatchCreateRequest
// options: key, range_end, start_revision, filters, prev_kv,
// progress_notify, fragment, a chosen watch_id), answers progress requests,
// and yields, through Next, the responses to send, in the order to send
// them. The gRPC layer (pkg/etcdcompat) only translates requests, fills in
// the cluster and member IDs and the Raft term, and splits fragmented
// responses.
//
// History is the store seen from here: the events of past revisions, the
// current and compacted revisions, and old values for prev_kv.
//
// # Delivery
//
// Publish never waits. When the fan-out is idle (nothing in the backlog)
// and the commit concerns at most 256 synced watchers (64 events at
// most), Publish fans it out itself, sparing the event a goroutine
// hand-off; it takes the hub's lock only if it is free (see direct.go).
// Otherwise it appends the commit to the backlog and wakes the fan-out
// goroutine, and later commits follow it there until the fan-out has
// caught up. The fan-out takes whole commits from the backlog (up
// to 4096 events at a time), matches each event to the groups of watchers
// whose keys contain it, copies each touched group's events once for all
// its watchers, and hands each watcher that wants any a response, each
// stream's responses in one batch. A response therefore carries one or
// more whole revisions, all the events of a transaction together.
//
// A watcher whose previous response is still queued (its client reads
// slower than its keys change) has the new events added to that response
// rather than queued in a new one: it keeps its place in the queue and
// takes the header revision the new events came with. A slow client gets
// fewer, larger responses instead of ever more of them, and a watcher's
// events wait at most for the responses queued ahead of its oldest unsent
// one. With 1,000 watchers of one key on a stream whose client reads
// slowly, a put at revision 7 queues w1{7} w2{7} ... w1000{7}; the sender
// takes w1{7}; then
//
//	put 8:  w2{7,8} ... w1000{7,8} w1{8}
//	put 9:  w2{7,8,9} ... w1000{7,8,9} w1{8,9}
//
// Event responses also leave a stream at a bounded rate
// (Options.StreamResponseRate, 5000 a second once a burst of 1000 is
// spent), since a client's work is mostly per response: beyond that rate,
// events wait in the queue and merge there rather than reach the client
// one response each (see pace.go).
//
// A merged response holds at most 1000 events and 1 MiB of payload (etcd's
// own batches stop at 1000 revisions; gRPC clients refuse 4 MiB by
// default), and nothing is added to a response queued before a control
// response (created, canceled, progress), which must not be followed by
// older events or preceded by newer ones than it reports.
//
// A watcher is synced (fed by the fan-out) or lagging (fed by the catch-up
// goroutine from History). It lags when it starts in the past, when its
// stream's queue is over its budget (the client reads too slowly), or when
// the backlog overflowed or skipped revisions (a restored snapshot). The
// catch-up path serves lagging watchers whose stream has room again, up
// to 512 at a time, with one bounded History read over the union of their
// keys, and returns each to the fan-out as soon as it has read past the
// fan-out point. Nothing is dropped: whatever a watcher misses on one
// path, it reads on the other. Nothing blocks: the fan-out never waits for
// a client, the catch-up reads History without holding the hub's lock.
//
// Memory is bounded. A stream queues up to Options.StreamBufferBytes
// (estimated) before its watchers lag; the catch-up path also stops at the
// budget. A queued response pins only its own events: the fan-out and the
// catch-up path copy a group's events out of the commit or History read
// they came from (the KeyValues themselves are shared, never copied), so a
// slow stream cannot hold a large commit alive through one small event.
// The estimate counts each response's overhead and event pointers, and
// each group's events once per stream however many of its responses share
// them: with the newest of those responses, the last to leave the queue,
// so that the events are counted exactly as long as the stream pins them.
// The backlog holds up to Options.BacklogEvents events before it is
// dropped in favour of History. Watchers that asked for prev_kv get their
// own copies, made when the response is taken.
//
// # Matching
//
// Watchers watching exactly the same keys share a group. Single-key groups
// sit in a hash map; range groups in an interval treap ordered by
// (key, end) and augmented with each subtree's largest end, so finding the
// groups containing a key costs O(log n + matches). For example, with
// watchers on "a" (two of them), ["a","c") and ["b", +inf):
//
//	keys:   "a" -> group{w1, w2}
//	ranges:       ["a","c") maxEnd +inf
//	             /                \
//	                         ["b",+inf) maxEnd +inf
//
// an event on "b" costs one map miss and visits both range nodes; an event
// on "a" finds {w1, w2} in the map and ["a","c") in the treap, where the
// right subtree is skipped because it starts above "a".
//
// # Revisions and invariants
//
// Three revisions order everything (all guarded by Hub.mu except pubRev):
//
//   - pubRev, the last revision published. A watch created "from now" starts
//     after it, and its created response carries it, as etcd's carries the
//     store's revision.
//   - fanRev, the fan-out point: every synced watcher has been queued every
//     event it wants at or below fanRev. Revisions above it are in the
//     backlog.
//   - each watcher's minRev: it has been given every event it wants below
//     minRev and none at or above. A lagging watcher reads History from
//     minRev; the fan-out gives a synced watcher only events at or above
//     minRev.
//
// A lagging watcher becomes synced only when its minRev is above fanRev:
// everything from there on is still in the backlog, so no revision is
// missed and none is delivered twice. Every response is queued with the
// hub's lock held, so a watcher's responses are in revision order, after
// its created response, and nothing follows its canceled response.
//
// # etcd's rules kept here
//
// Watch IDs are per stream; ID 0 asks for the lowest free one counting up.
// A refused creation (negative start revision, empty range, duplicate ID)
// is answered with watch ID -1, created and canceled, and etcd's reason. A
// lagging watcher whose next revision was compacted gets canceled with
// compact_revision set and a header revision of 0, and keeps its ID until
// the client cancels it. A stream-wide progress request (watch ID -1) is
// answered only when every watcher of the stream is synced and has reached
// its start revision (etcd drops it otherwise), with a revision at least
// the one published when it came: because the fan-out runs behind
// Publish, such a request waits for the fan-out to get there rather than
// report an older revision. progress_notify watchers hear from the hub
// every ProgressNotifyInterval (plus up to a tenth of jitter) unless an
// event was queued for them since the previous tick. prev_kv values are
// read from History when a response is taken, as etcd reads them when it
// sends; the event that created a key has none.
//
// # Using it
//
// The member builds one Hub over its store, publishes every commit's
// events from the apply goroutine (and Publish(rev, nil) after restoring a
// snapshot), and gives each client stream a Stream: requests go to Watch,
// Cancel and RequestProgress, and one goroutine per stream sends what Next
// returns.
package watch
