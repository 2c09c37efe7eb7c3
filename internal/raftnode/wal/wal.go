package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
)

// DefaultSegmentSize is the size past which the log moves on to a new
// segment file.
const DefaultSegmentSize int64 = 64 << 20

// maxRetainedBuffer bounds the encode buffer kept between saves, so that one
// huge Ready does not pin its size in memory for the life of the process.
const maxRetainedBuffer = 4 << 20

// Metadata identifies the member a log belongs to. It heads every segment so
// that a data directory moved to the wrong member is refused.
type Metadata struct {
	MemberID  uint64
	ClusterID uint64
}

// Snapshot is the position (index and term of the last entry it covers) of a
// state machine snapshot.
type Snapshot struct {
	Index uint64
	Term  uint64
}

// Options tunes a WAL. The zero value is usable.
type Options struct {
	// Logger receives recovery warnings. Nil discards them.
	Logger *slog.Logger
	// SegmentSizeBytes is the size past which a new segment is cut.
	// Zero means DefaultSegmentSize.
	SegmentSizeBytes int64
	// SyncFile makes a segment's written data durable. Nil means SyncData.
	// It is injectable so that callers can time it and tests can count it.
	SyncFile func(*os.File) error
	// OnWrite, if set, is told the bytes and duration of every append to
	// a segment (before its fsync), for metrics.
	OnWrite func(bytes int, took time.Duration)
	// MaxFiles is how many segment files to keep in all (etcd's
	// --max-wals): ReleaseTo deletes released segments, oldest first,
	// only while more files than this remain; segments still needed are
	// never deleted. Zero deletes every released segment at once,
	// negative keeps them all.
	MaxFiles int
	// Preallocate reserves SegmentSizeBytes on disk for each segment when
	// it is cut (fallocate, as etcd does), and for the last one on Open.
	// Records are then written into space the file already has, so their
	// fdatasync does not journal a new file size: about a fifth faster on
	// ext4 here (bench/trace.sh, docs/performance.md "One writer"). The
	// reserved space reads as zeros after the last record, which Open
	// takes for the end of the log; a segment is cut back to its records
	// when the next one is cut.
	Preallocate bool
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SegmentSizeBytes <= 0 {
		o.SegmentSizeBytes = DefaultSegmentSize
	}
	if o.SyncFile == nil {
		o.SyncFile = SyncData
	}
	return o
}

// ErrClosed is returned by operations on a closed WAL.
var ErrClosed = errors.New("wal: closed")

// WAL is an open log, positioned for appending. Its methods are safe for
// concurrent use (the raft loop saves while the snapshot writer records
// markers and releases segments); they serialise on one mutex.
type WAL struct {
	dir  string
	opts Options
	meta Metadata

	// mu guards every field below. Lock order: mu is a leaf, the only
	// lock of the package, and the one lock in MetaStore held across
	// file I/O: appends, fsyncs and segment cuts must happen in order,
	// so a Save holds it through its write and sync. Options.SyncFile and
	// Options.OnWrite run under it and must not call back into the WAL
	// or take a lock a WAL caller may hold.
	mu       sync.Mutex
	segments []segment
	// retired are released segments kept for Options.MaxFiles, oldest
	// first; they are no longer part of the log.
	retired  []segment
	tail     *os.File
	tailSize int64
	// buf is the encode buffer of one Save, kept between saves up to
	// maxRetainedBuffer; apart and iov are its large entries' Data and the
	// pieces written (see pieces), emptied after each write.
	buf   []byte
	apart []dataApart
	iov   [][]byte
	// lastIndex is the index of the last entry in the log; lastIndexKnown
	// is false until the log has an entry or an installed snapshot.
	lastIndex      uint64
	lastIndexKnown bool
	hardState      raftpb.HardState
	newestSnapshot Snapshot
	// unsynced is set when records were written without an fsync (a
	// commit-only hard state); Close syncs them.
	unsynced bool
	// failed is the first write or sync error: after it the file's tail is
	// unknown, so every later write is refused rather than retried.
	failed error
	closed bool
}

// Exists reports whether dir holds a log.
func Exists(dir string) (bool, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read WAL dir %s: %w", dir, err)
	}
	for _, de := range des {
		if _, ok := parseSegmentName(de.Name()); ok {
			return true, nil
		}
	}
	return false, nil
}

// Create makes a new, empty log in dir (which must not hold one) for the
// member described by meta. The directory appears atomically: it is built
// under a temporary name and renamed, so a crash leaves either no log or a
// complete one.
func Create(dir string, meta Metadata, opts Options) (*WAL, error) {
	opts = opts.withDefaults()
	if ok, err := Exists(dir); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("create WAL %s: a log already exists", dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("create WAL parent dir %s: %w", parent, err)
	}
	tmpDir := dir + tmpExt
	if err := os.RemoveAll(tmpDir); err != nil {
		return nil, fmt.Errorf("remove leftover %s: %w", tmpDir, err)
	}
	if err := os.Mkdir(tmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("create WAL dir %s: %w", tmpDir, err)
	}
	// An empty directory named like the log (left by an operator or an
	// older crash) would make the rename fail; it holds nothing.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("create WAL %s: %w", dir, err)
	}
	w := &WAL{dir: dir, opts: opts, meta: meta, lastIndexKnown: true}
	first := segment{seq: 0, firstIndex: 0}
	f, err := createSegment(tmpDir, first, w.head(nil), w.reserve(), opts.SyncFile)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close segment %s: %w", f.Name(), err)
	}
	if err := os.Rename(tmpDir, dir); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", tmpDir, dir, err)
	}
	if err := syncDir(parent); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, first.name())
	if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	w.segments = []segment{first}
	w.tail = f
	w.tailSize = int64(len(w.head(nil)))
	return w, nil
}

// Open reads the log in dir back and positions it for appending.
//
// A record that does not decode in the last segment is where a crash cut the
// log short: Open logs a warning naming the file and offset, truncates the
// file there and keeps the intact prefix. A bad record in any other segment,
// a missing segment or an index gap is damage that truncation would turn
// into silent data loss, so Open refuses with an error naming the file and
// offset instead.
func Open(dir string, opts Options) (*WAL, *Recovered, error) {
	opts = opts.withDefaults()
	segs, removedTmp, err := listSegments(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range removedTmp {
		opts.Logger.Warn("removed unfinished WAL segment", "file", filepath.Join(dir, name))
	}
	if len(segs) == 0 {
		return nil, nil, fmt.Errorf("open WAL %s: no segment files: %w", dir, fs.ErrNotExist)
	}
	var p replay
	var tailSize int64
	for i, s := range segs {
		path := filepath.Join(dir, s.name())
		isLast := i == len(segs)-1
		intact, err := readSegment(path, &p, isLast, opts)
		if err != nil {
			return nil, nil, err
		}
		if isLast {
			tailSize = intact
		}
	}
	if !p.hasMetadata {
		return nil, nil, fmt.Errorf("open WAL %s: no metadata record", dir)
	}

	w := &WAL{
		dir:       dir,
		opts:      opts,
		meta:      p.rec.Metadata,
		segments:  segs,
		hardState: p.rec.HardState,
	}
	w.lastIndex, w.lastIndexKnown = p.lastIndex()
	for _, s := range p.rec.Snapshots {
		if s.Index > w.newestSnapshot.Index {
			w.newestSnapshot = s
		}
	}
	tailPath := filepath.Join(dir, segs[len(segs)-1].name())
	f, err := os.OpenFile(tailPath, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open WAL segment %s for append: %w", tailPath, err)
	}
	w.tail, w.tailSize = f, tailSize
	if r := w.reserve(); r > tailSize {
		// A segment cut before preallocation was on, or cut back to its
		// intact records above, gets its reserve now.
		if err := preallocate(f, r); err != nil {
			return nil, nil, errors.Join(err, f.Close())
		}
	}
	if tailSize == 0 {
		// The whole last segment was torn away, head included: give it its
		// head back so it can be read on its own once older ones go.
		if err := w.write([][]byte{w.head(nil)}, true); err != nil {
			return nil, nil, errors.Join(err, f.Close())
		}
	}
	rec := p.rec
	return w, &rec, nil
}

// readSegment feeds the records of one segment to p and returns the size of
// its intact prefix, truncating a torn tail when isLast.
func readSegment(path string, p *replay, isLast bool, opts Options) (int64, error) {
	data, reserved, err := readSegmentFile(path)
	if err != nil {
		return 0, fmt.Errorf("read WAL segment %s: %w", path, err)
	}
	if reserved && !isLast {
		// Cutting the next segment cuts this one back to its records.
		return 0, fmt.Errorf("WAL segment %s at offset %d (not the last segment): %w: zero-filled space after the last record",
			path, len(data), errCorrupt)
	}
	first := true
	intact, decodeErr, applyErr := scanRecords(data, func(r *record) error {
		if first && r.typ != recordMetadata {
			return fmt.Errorf("%w: segment does not start with a metadata record", errLogBroken)
		}
		first = false
		return p.apply(r)
	})
	if applyErr != nil {
		return 0, fmt.Errorf("WAL segment %s at offset %d: %w", path, intact, applyErr)
	}
	if decodeErr == nil {
		return int64(intact), nil
	}
	if !isLast {
		return 0, fmt.Errorf("WAL segment %s at offset %d (not the last segment): %w", path, intact, decodeErr)
	}
	opts.Logger.Warn("truncating torn WAL tail",
		"file", path, "offset", intact, "dropped_bytes", len(data)-intact, "reason", decodeErr.Error())
	// The reserved space after a torn record goes too; Open reserves it
	// again.
	if err := truncateFile(path, int64(intact), opts.SyncFile); err != nil {
		return 0, err
	}
	return int64(intact), nil
}

// truncateFile cuts path to size and makes the new size durable before
// anything is appended after it.
func truncateFile(path string, size int64, syncFile func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s to truncate: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		return errors.Join(fmt.Errorf("truncate %s to %d: %w", path, size, err), f.Close())
	}
	if err := syncFile(f); err != nil {
		return errors.Join(fmt.Errorf("sync truncated %s: %w", path, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close truncated %s: %w", path, err)
	}
	return nil
}

// head encodes the records every segment starts with: the metadata, and the
// current hard state and newest snapshot marker, so that a segment stays
// self-describing after the segments before it are released.
func (w *WAL) head(buf []byte) []byte {
	buf = appendMetadata(buf, w.meta)
	if !isEmptyHardState(w.hardState) {
		// Marshalling a HardState into a sized buffer cannot fail.
		buf, _ = appendHardState(buf, &w.hardState)
	}
	if w.newestSnapshot.Index != 0 {
		buf, _ = appendSnapshot(buf, recordSnapshot, w.newestSnapshot)
	}
	return buf
}

func isEmptyHardState(hs raftpb.HardState) bool {
	return hs.Term == 0 && hs.Vote == 0 && hs.Commit == 0
}

// Save appends the hard state and entries of one raft Ready and makes them
// durable with a single fsync (group commit: every proposal batched into the
// Ready shares it). Nothing is written when hs is empty or unchanged and ents
// is empty, and the fsync is skipped when only the commit index moved: raft
// can learn a lost commit index again, but never a lost vote, term or entry.
func (w *WAL) Save(hs raftpb.HardState, ents []raftpb.Entry) error {
	return w.save(nil, hs, ents)
}

// SaveInstall is Save for a Ready that carries a snapshot received from the
// leader: it first records that raft replaced its log with the snapshot
// (entries written before are void), then hs and ents, all under one fsync.
// The snapshot file must already be durable.
func (w *WAL) SaveInstall(snap Snapshot, hs raftpb.HardState, ents []raftpb.Entry) error {
	return w.save(&snap, hs, ents)
}

func (w *WAL) save(install *Snapshot, hs raftpb.HardState, ents []raftpb.Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	lastIndex, known := w.lastIndex, w.lastIndexKnown
	buf, apart := w.buf[:0], w.apart[:0]
	var err error
	if install != nil {
		if buf, err = appendSnapshot(buf, recordSnapshotInstall, *install); err != nil {
			return err
		}
		lastIndex, known = install.Index, true
	}
	for i := range ents {
		e := &ents[i]
		if known && e.Index > lastIndex+1 {
			return fmt.Errorf("wal: save entry %d after %d would leave a gap", e.Index, lastIndex)
		}
		if len(e.Data) >= largeDataBytes {
			buf = appendEntryHead(buf, e)
			apart = append(apart, dataApart{at: len(buf), data: e.Data})
		} else if buf, err = appendEntry(buf, e); err != nil {
			return err
		}
		lastIndex, known = e.Index, true
	}
	hsChanged := !isEmptyHardState(hs) && hs != w.hardState
	if hsChanged {
		if buf, err = appendHardState(buf, &hs); err != nil {
			return err
		}
	}
	if len(buf) == 0 {
		return nil
	}
	mustSync := install != nil || len(ents) > 0 || (hsChanged && (hs.Term != w.hardState.Term || hs.Vote != w.hardState.Vote))
	err = w.write(w.pieces(buf, apart), mustSync)
	clear(apart) // the entries' Data is not the WAL's to keep
	w.apart = apart[:0]
	if cap(buf) <= maxRetainedBuffer {
		w.buf = buf[:0]
	} else {
		w.buf = nil
	}
	if err != nil {
		return err
	}
	w.lastIndex, w.lastIndexKnown = lastIndex, known
	if hsChanged {
		w.hardState = hs
	}
	if install != nil && install.Index > w.newestSnapshot.Index {
		w.newestSnapshot = *install
	}
	return w.maybeRotate()
}

// SaveSnapshot durably records that a snapshot file of the local state
// machine at snap exists. It does not change the log; it lets Open tell a
// complete snapshot file from one a crash interrupted.
func (w *WAL) SaveSnapshot(snap Snapshot) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.writable(); err != nil {
		return err
	}
	buf, err := appendSnapshot(w.buf[:0], recordSnapshot, snap)
	if err != nil {
		return err
	}
	if err := w.write([][]byte{buf}, true); err != nil {
		return err
	}
	if snap.Index > w.newestSnapshot.Index {
		w.newestSnapshot = snap
	}
	return w.maybeRotate()
}

// ReleaseTo releases the segments that hold only entries below index (the
// caller has a durable snapshot at or above index-1) and deletes released
// segment files beyond Options.MaxFiles. The segment being written is
// never deleted. The files are removed outside the lock, so a
// concurrent Save does not wait for the directory fsync.
func (w *WAL) ReleaseTo(index uint64) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	n := 0
	for n+1 < len(w.segments) && w.segments[n+1].firstIndex <= index {
		n++
	}
	w.retired = append(w.retired, w.segments[:n]...)
	w.segments = w.segments[n:]
	var released []segment
	switch max := w.opts.MaxFiles; {
	case max == 0:
		released, w.retired = w.retired, nil
	case max > 0:
		if extra := len(w.retired) + len(w.segments) - max; extra > 0 {
			extra = min(extra, len(w.retired))
			released = slices.Clone(w.retired[:extra])
			w.retired = w.retired[extra:]
		}
	}
	w.mu.Unlock()
	if len(released) == 0 {
		return nil
	}
	for _, s := range released {
		path := filepath.Join(w.dir, s.name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("release WAL segment %s: %w", path, err)
		}
	}
	return syncDir(w.dir)
}

// Close makes any unsynced records durable and closes the log.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var syncErr error
	if w.unsynced && w.failed == nil {
		syncErr = w.opts.SyncFile(w.tail)
	}
	if err := w.tail.Close(); err != nil {
		return errors.Join(syncErr, fmt.Errorf("close WAL segment: %w", err))
	}
	return syncErr
}

func (w *WAL) writable() error {
	if w.closed {
		return ErrClosed
	}
	if w.failed != nil {
		return fmt.Errorf("wal: refusing to write after an earlier failure: %w", w.failed)
	}
	return nil
}

// reserve is the size preallocated for a segment, 0 without
// Options.Preallocate.
func (w *WAL) reserve() int64 {
	if !w.opts.Preallocate {
		return 0
	}
	return w.opts.SegmentSizeBytes
}

func totalLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// dataApart is the Data of a large entry, written from the entry after
// buf[:at] rather than copied into buf (appendEntryHead).
type dataApart struct {
	at   int
	data []byte
}

// pieces is what one Save writes: buf with each apart's data between
// buf[:at] and the rest.
func (w *WAL) pieces(buf []byte, apart []dataApart) [][]byte {
	out := w.iov[:0]
	from := 0
	for _, a := range apart {
		out = append(out, buf[from:a.at], a.data)
		from = a.at
	}
	out = append(out, buf[from:])
	w.iov = out
	return out
}

// write appends bufs, in order, to the tail segment after its last
// record, with an fsync when sync is set.
func (w *WAL) write(bufs [][]byte, sync bool) error {
	start := time.Now()
	var n int
	var err error
	if totalLen(bufs) > 0 {
		err = diskfault.BeforeWrite(w.tail.Name())
	}
	if err == nil {
		n, err = writeBuffersAt(w.tail, bufs, w.tailSize)
	}
	clear(w.iov) // nor is the encode buffer held through iov between saves
	w.tailSize += int64(n)
	if w.opts.OnWrite != nil {
		w.opts.OnWrite(n, time.Since(start))
	}
	if err != nil {
		w.failed = fmt.Errorf("write WAL segment %s: %w", w.tail.Name(), err)
		return w.failed
	}
	if !sync {
		w.unsynced = true
		return nil
	}
	if err := w.opts.SyncFile(w.tail); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages;
		// retrying could report success for data that is gone.
		w.failed = fmt.Errorf("sync WAL segment %s: %w", w.tail.Name(), err)
		return w.failed
	}
	w.unsynced = false
	return nil
}

// maybeRotate cuts a new segment once the tail has grown past the segment
// size. The old tail is synced first so that the log stays a durable prefix.
func (w *WAL) maybeRotate() error {
	if w.tailSize < w.opts.SegmentSizeBytes {
		return nil
	}
	if w.unsynced {
		if err := w.write(nil, true); err != nil {
			return err
		}
	}
	if err := w.cutBackTail(); err != nil {
		return err
	}
	next := segment{seq: w.segments[len(w.segments)-1].seq + 1, firstIndex: w.lastIndex + 1}
	head := w.head(nil)
	f, err := createSegment(w.dir, next, head, w.reserve(), w.opts.SyncFile)
	if err != nil {
		w.failed = err
		return err
	}
	old := w.tail
	w.tail, w.tailSize = f, int64(len(head))
	w.segments = append(w.segments, next)
	if err := old.Close(); err != nil {
		return fmt.Errorf("close WAL segment %s: %w", old.Name(), err)
	}
	return nil
}

// cutBackTail drops the tail segment's reserved space before the next
// segment is cut: only the last segment may end in zeros (Open refuses
// them anywhere else, where they would hide lost records).
func (w *WAL) cutBackTail() error {
	st, err := w.tail.Stat()
	if err != nil {
		w.failed = fmt.Errorf("stat WAL segment %s: %w", w.tail.Name(), err)
		return w.failed
	}
	if st.Size() <= w.tailSize {
		return nil
	}
	if err := w.tail.Truncate(w.tailSize); err != nil {
		w.failed = fmt.Errorf("cut back WAL segment %s: %w", w.tail.Name(), err)
		return w.failed
	}
	if err := w.opts.SyncFile(w.tail); err != nil {
		w.failed = fmt.Errorf("sync WAL segment %s: %w", w.tail.Name(), err)
		return w.failed
	}
	return nil
}
