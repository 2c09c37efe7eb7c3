package raftsnap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
	"github.com/metastore-io/metastore/internal/host/fileutil"
)

const (
	snapExt = ".snap"
	tmpExt  = ".tmp"
	// DefaultKeep is how many snapshot files Save leaves behind.
	DefaultKeep = 5
)

// Ref names one snapshot file by the position it captures.
type Ref struct {
	Term  uint64
	Index uint64
}

// FileName is <term 16hex>-<index 16hex>.snap.
func (r Ref) FileName() string {
	return fileutil.HexPairName(r.Term, r.Index, snapExt)
}

func parseFileName(name string) (Ref, bool) {
	term, index, ok := fileutil.ParseHexPairName(name, snapExt)
	return Ref{Term: term, Index: index}, ok
}

// Options tunes a Store. The zero value is usable.
type Options struct {
	// Logger receives housekeeping messages. Nil discards them.
	Logger *slog.Logger
	// Keep is how many of the newest files Save keeps. Zero means
	// DefaultKeep, negative all of them (etcd's --max-snapshots=0).
	Keep int
	// NoSync skips the fsync of each file written (--unsafe-no-fsync,
	// for tests only): a crash may leave a damaged newest file.
	NoSync bool
}

// Store is the directory of snapshot files of one member. Save serialises
// with itself; reads may run concurrently with it.
type Store struct {
	dir    string
	logger *slog.Logger
	keep   int
	noSync bool
	saveMu sync.Mutex
}

// Open prepares dir (creating it if needed) and removes temporary files that
// an interrupted Save left behind.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot dir %s: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read snapshot dir %s: %w", dir, err)
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), snapExt+tmpExt) {
			path := filepath.Join(dir, de.Name())
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove unfinished snapshot %s: %w", path, err)
			}
			opts.Logger.Warn("removed unfinished snapshot file", "file", path)
		}
	}
	return &Store{dir: dir, logger: opts.Logger, keep: opts.Keep, noSync: opts.NoSync}, nil
}

// Dir is the directory the store manages.
func (s *Store) Dir() string { return s.dir }

// Path is the file that holds ref.
func (s *Store) Path(ref Ref) string { return filepath.Join(s.dir, ref.FileName()) }

// List returns the snapshot files present, oldest (lowest index) first.
func (s *Store) List() ([]Ref, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read snapshot dir %s: %w", s.dir, err)
	}
	var refs []Ref
	for _, de := range des {
		if ref, ok := parseFileName(de.Name()); ok && de.Type().IsRegular() {
			refs = append(refs, ref)
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Index != refs[j].Index {
			return refs[i].Index < refs[j].Index
		}
		return refs[i].Term < refs[j].Term
	})
	return refs, nil
}

// Save writes a snapshot file for meta holding the bytes image writes, then
// deletes all but the newest Keep files. The file is written under a
// temporary name, fsynced, renamed and the directory fsynced: once Save
// returns the file survives a crash, and before that no reader sees it.
// It returns the image size.
func (s *Store) Save(meta raftpb.SnapshotMetadata, image io.WriterTo) (int64, error) {
	st, err := s.SaveTimed(meta, image)
	return st.Bytes, err
}

// SaveStats tells how a Save went, for metrics.
type SaveStats struct {
	Bytes int64         // the image size
	Write time.Duration // encoding and writing the file, up to its fsync
	Fsync time.Duration // the file's fsync
}

// SaveTimed is Save, also reporting how long its steps took.
func (s *Store) SaveTimed(meta raftpb.SnapshotMetadata, image io.WriterTo) (SaveStats, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	ref := Ref{Term: meta.Term, Index: meta.Index}
	final := s.Path(ref)
	tmp := final + tmpExt
	st, err := writeFile(tmp, &meta, image, s.noSync)
	if err != nil {
		return SaveStats{}, errors.Join(err, removeIfExists(tmp))
	}
	if err := os.Rename(tmp, final); err != nil {
		return SaveStats{}, errors.Join(fmt.Errorf("rename snapshot %s: %w", tmp, err), removeIfExists(tmp))
	}
	if err := syncDir(s.dir); err != nil {
		return SaveStats{}, err
	}
	if err := s.purge(); err != nil {
		return st, err
	}
	return st, nil
}

func writeFile(path string, meta *raftpb.SnapshotMetadata, image io.WriterTo, noSync bool) (SaveStats, error) {
	start := time.Now()
	prefix, err := encodePrefix(meta)
	if err != nil {
		return SaveStats{}, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return SaveStats{}, fmt.Errorf("create snapshot %s: %w", path, err)
	}
	var out io.Writer = f
	if !noSync {
		out = &flushBehind{f: f}
	}
	bw := bufio.NewWriterSize(diskfault.Writer(path, out), 1<<20)
	cw := &crcWriter{w: bw}
	fail := func(err error) (SaveStats, error) { return SaveStats{}, errors.Join(err, f.Close()) }
	if _, err := cw.Write(prefix); err != nil {
		return fail(fmt.Errorf("write snapshot header %s: %w", path, err))
	}
	imageStart := cw.n
	if _, err := image.WriteTo(cw); err != nil {
		return fail(fmt.Errorf("write snapshot image %s: %w", path, err))
	}
	imageLen := cw.n - imageStart
	var trailer [trailerSize]byte
	binary.LittleEndian.PutUint64(trailer[:8], uint64(imageLen))
	if _, err := cw.Write(trailer[:8]); err != nil {
		return fail(fmt.Errorf("write snapshot trailer %s: %w", path, err))
	}
	binary.LittleEndian.PutUint32(trailer[8:], cw.crc)
	if _, err := bw.Write(trailer[8:]); err != nil {
		return fail(fmt.Errorf("write snapshot trailer %s: %w", path, err))
	}
	if err := bw.Flush(); err != nil {
		return fail(fmt.Errorf("write snapshot %s: %w", path, err))
	}
	st := SaveStats{Bytes: imageLen, Write: time.Since(start)}
	syncStart := time.Now()
	if !noSync {
		if err := diskfault.BeforeSync(path); err != nil {
			return fail(err)
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("sync snapshot %s: %w", path, err))
		}
	}
	st.Fsync = time.Since(syncStart)
	if err := f.Close(); err != nil {
		return SaveStats{}, fmt.Errorf("close snapshot %s: %w", path, err)
	}
	return st, nil
}

// purge deletes all but the newest keep files.
func (s *Store) purge() error {
	refs, err := s.List()
	if err != nil {
		return err
	}
	if s.keep < 0 || len(refs) <= s.keep {
		return nil
	}
	for _, ref := range refs[:len(refs)-s.keep] {
		if err := removeIfExists(s.Path(ref)); err != nil {
			return err
		}
		s.logger.Debug("removed old snapshot file", "file", s.Path(ref))
	}
	return syncDir(s.dir)
}

// Remove deletes the file for ref (a file a crash left without the WAL
// record that would make it usable).
func (s *Store) Remove(ref Ref) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := removeIfExists(s.Path(ref)); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// Load validates the whole file for ref and returns its metadata. Any
// damage is an error wrapping ErrCorrupt and naming the file; a missing file
// wraps fs.ErrNotExist.
func (s *Store) Load(ref Ref) (raftpb.SnapshotMetadata, error) {
	f, l, err := s.open(ref)
	if err != nil {
		return raftpb.SnapshotMetadata{}, err
	}
	if err := f.Close(); err != nil {
		return raftpb.SnapshotMetadata{}, fmt.Errorf("close snapshot %s: %w", f.Name(), err)
	}
	return l.meta, nil
}

func (s *Store) open(ref Ref) (*os.File, layout, error) {
	path := s.Path(ref)
	f, err := os.Open(path)
	if err != nil {
		return nil, layout{}, fmt.Errorf("open snapshot %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, layout{}, errors.Join(fmt.Errorf("stat snapshot %s: %w", path, err), f.Close())
	}
	l, err := decode(f, st.Size())
	if err == nil && (l.meta.Index != ref.Index || l.meta.Term != ref.Term) {
		err = fmt.Errorf("%w: header says term %d index %d", ErrCorrupt, l.meta.Term, l.meta.Index)
	}
	if err != nil {
		return nil, layout{}, errors.Join(fmt.Errorf("snapshot %s: %w", path, err), f.Close())
	}
	return f, l, nil
}

// Source is a point-in-time image of a state machine, what a snapshot file
// carries after its header. WriteTo may run in another goroutine while the
// state machine goes on applying; Release is called once when done.
type Source interface {
	WriteTo(w io.Writer) (int64, error)
	Release()
}

// Image is an open snapshot file positioned at the state machine image.
type Image struct {
	Metadata raftpb.SnapshotMetadata
	// Size is the image length in bytes.
	Size int64
	f    *os.File
	r    verifyingReader
}

// OpenImage validates the file for ref and opens its image for reading. The
// reader checks the checksum again as it reaches the end, so bytes that
// changed on disk since validation surface as an error rather than as a
// silently different state.
func (s *Store) OpenImage(ref Ref) (*Image, error) {
	f, l, err := s.open(ref)
	if err != nil {
		return nil, err
	}
	img := &Image{Metadata: l.meta, Size: l.imageLen, f: f}
	img.r = verifyingReader{
		r:    bufio.NewReaderSize(io.NewSectionReader(f, l.imageOffset, l.imageLen), 1<<20),
		crc:  l.prefixCRC,
		left: l.imageLen,
		want: l.storedCRC,
		path: f.Name(),
	}
	binary.LittleEndian.PutUint64(img.r.trailer[:], uint64(l.imageLen))
	return img, nil
}

// Read reads the image.
func (i *Image) Read(p []byte) (int, error) { return i.r.Read(p) }

// Close closes the file.
func (i *Image) Close() error {
	if err := i.f.Close(); err != nil {
		return fmt.Errorf("close snapshot %s: %w", i.f.Name(), err)
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error { return fileutil.SyncDir(dir) }
