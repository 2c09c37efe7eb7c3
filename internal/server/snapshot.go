package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/internal/format/etcddb"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// snapshotProgressInterval spaces the progress lines of a snapshot being
// sent, so that a large one shows it is moving and a small one logs only
// its start and end.
const snapshotProgressInterval = 5 * time.Second

// SnapshotImage is a point-in-time image of this member's whole state in
// etcd's snapshot format (package etcddb): what Maintenance.Snapshot
// streams to `etcdctl snapshot save`, so that etcdutl and etcd take the
// file as one of their own.
type SnapshotImage interface {
	// Size is the number of bytes WriteTo writes; the last
	// etcddb.DigestSize of them are the sha256 digest of the others.
	Size() int64
	// WriteTo writes the file. It stops with ErrStopped once the member
	// begins to stop.
	WriteTo(w io.Writer) (int64, error)
	// Release lets the image go (and removes its file); call it once,
	// after WriteTo.
	Release()
}

// snapshotTempDir is where images are built, under the data dir: an etcd
// snapshot is a bbolt database, which only exists as a file, and the
// data dir is the disk the operator sized for the store's data. Files
// left by a member that died while sending are removed on start.
func snapshotTempDir(dataDir string) string {
	return filepath.Join(memberDataDir(dataDir), "snapshot.tmp")
}

// removeStaleSnapshotImages deletes what a previous run of the member left
// in snapshotTempDir.
func removeStaleSnapshotImages(dataDir string) error {
	if err := os.RemoveAll(snapshotTempDir(dataDir)); err != nil {
		return fmt.Errorf("server: remove stale snapshot images: %w", err)
	}
	return nil
}

// Snapshot builds an image of the state as of the last applied entry: it
// converts a read view of the store (which neither writes, apply nor
// other reads wait for) into a bbolt file in snapshotTempDir, a pass over
// every key that ctx can cut short, and releases the view once the file
// is complete. The file's size is the size announced to the client, as
// etcd announces its database's.
func (s *Server) Snapshot(ctx context.Context) (SnapshotImage, error) {
	if !s.users.enter() {
		return nil, ErrStopped
	}
	img, err := s.buildSnapshotImage(ctx)
	if err != nil {
		s.users.leave()
		return nil, err
	}
	return img, nil
}

func (s *Server) buildSnapshotImage(ctx context.Context) (*snapshotImage, error) {
	dir := snapshotTempDir(s.cfg.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server: create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "etcd-snapshot-*.db")
	if err != nil {
		return nil, fmt.Errorf("server: create snapshot image: %w", err)
	}
	path := f.Name()
	if err := errors.Join(f.Close(), os.Remove(path)); err != nil {
		return nil, fmt.Errorf("server: reserve snapshot image name: %w", err)
	}
	start := time.Now()
	view := s.kv.SnapshotView()
	db, err := etcddb.Build(ctx, path, view)
	view.Release()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if errors.Is(err, kvstore.ErrClosed) {
			return nil, ErrStopped
		}
		return nil, fmt.Errorf("server: build snapshot image: %w", err)
	}
	s.log.Info("built database snapshot", "path", path, "size", db.Size(), "took", time.Since(start))
	// etcd times a backend snapshot from its start until it is closed.
	done := func() {
		s.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
		s.users.leave()
	}
	return &snapshotImage{db: db, log: s.log, stopping: s.stopping, done: done}, nil
}

// snapshotImage is a SnapshotImage over a built etcd database.
type snapshotImage struct {
	db       *etcddb.DB
	log      *slog.Logger
	stopping <-chan struct{}
	done     func() // tells the server the view is released
	released atomic.Bool
}

func (i *snapshotImage) Size() int64 { return i.db.Size() }

// WriteTo streams the file and logs its progress as etcd does ("sending
// database snapshot to client"), plus a line every
// snapshotProgressInterval while it goes on.
func (i *snapshotImage) WriteTo(w io.Writer) (int64, error) {
	start := time.Now()
	size := i.db.Size()
	i.log.Info("sending database snapshot to client", "total-bytes", size)
	pw := &progressWriter{w: w, img: i, start: start, nextLog: start.Add(snapshotProgressInterval)}
	n, err := i.db.WriteTo(pw)
	if err == nil && n != size {
		// The file cannot change, so this would be a bug in the sizing.
		err = fmt.Errorf("server: snapshot wrote %d bytes, announced %d", n, size)
	}
	if err != nil {
		select {
		case <-i.stopping:
			// bbolt's copy does not wrap its writer's error.
			err = fmt.Errorf("%w (%w)", ErrStopped, err)
		default:
		}
		i.log.Warn("failed to send database snapshot to client",
			"sent-bytes", pw.sent, "total-bytes", size, "took", time.Since(start), "error", err)
		return n, err
	}
	i.log.Info("successfully sent database snapshot to client", "total-bytes", n, "took", time.Since(start))
	return n, nil
}

func (i *snapshotImage) Release() {
	if i.released.CompareAndSwap(false, true) {
		if err := i.db.Close(); err != nil {
			i.log.Warn("could not remove a sent snapshot image", "error", err)
		}
		i.done()
	}
}

// progressWriter counts what reaches the client, logs it now and then,
// and fails once the member stops, which ends the pass over the view
// before the store under it closes.
type progressWriter struct {
	w       io.Writer
	img     *snapshotImage
	start   time.Time
	nextLog time.Time
	sent    int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	select {
	case <-p.img.stopping:
		return 0, ErrStopped
	default:
	}
	n, err := p.w.Write(b)
	p.sent += int64(n)
	if now := time.Now(); !now.Before(p.nextLog) {
		p.nextLog = now.Add(snapshotProgressInterval)
		p.img.log.Info("sending database snapshot to client",
			"sent-bytes", p.sent, "total-bytes", p.img.db.Size(), "took", now.Sub(p.start))
	}
	return n, err
}
