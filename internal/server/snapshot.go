package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/internal/backup"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// snapshotProgressInterval spaces the progress lines of a snapshot being
// sent, so that a large one shows it is moving and a small one logs only
// its start and end.
const snapshotProgressInterval = 5 * time.Second

// SnapshotImage is a point-in-time image of this member's whole state as
// a snapshot file (package backup): what Maintenance.Snapshot streams to
// `etcdctl snapshot save`. It holds a read view of the store open, which
// neither writes, apply nor other reads wait for.
type SnapshotImage interface {
	// Size is the number of bytes WriteTo writes; the last
	// backup.DigestSize of them are the sha256 digest of the others.
	Size() int64
	// WriteTo writes the file. It stops with ErrStopped once the member
	// begins to stop.
	WriteTo(w io.Writer) (int64, error)
	// Release lets the image go; call it once, after WriteTo.
	Release()
}

// Snapshot opens an image of the state as of the last applied entry.
// Sizing it takes a pass over every key (a sender announces the size up
// front, as etcd does from its database file), which ctx can cut short.
func (s *Server) Snapshot(ctx context.Context) (SnapshotImage, error) {
	s.imagesMu.Lock()
	if s.imagesClosed {
		s.imagesMu.Unlock()
		return nil, ErrStopped
	}
	s.images.Add(1)
	s.imagesMu.Unlock()
	view := s.kv.SnapshotView()
	size, err := backup.Size(ctx, view)
	if err != nil {
		view.Release()
		s.images.Done()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if errors.Is(err, kvstore.ErrClosed) {
			return nil, ErrStopped
		}
		return nil, fmt.Errorf("server: size snapshot: %w", err)
	}
	return &snapshotImage{view: view, size: size, log: s.log, stopping: s.stopping, done: s.images.Done}, nil
}

// snapshotImage is a SnapshotImage over a store view.
type snapshotImage struct {
	view     kvstore.ReadView
	size     int64
	log      *slog.Logger
	stopping <-chan struct{}
	done     func() // tells the server the view is released
	released atomic.Bool
}

func (i *snapshotImage) Size() int64 { return i.size }

// WriteTo streams the file and logs its progress as etcd does ("sending
// database snapshot to client"), plus a line every
// snapshotProgressInterval while it goes on.
func (i *snapshotImage) WriteTo(w io.Writer) (int64, error) {
	start := time.Now()
	i.log.Info("sending database snapshot to client", "total-bytes", i.size)
	pw := &progressWriter{w: w, img: i, start: start, nextLog: start.Add(snapshotProgressInterval)}
	n, err := backup.Write(pw, i.view)
	if err == nil && n != i.size {
		// The view cannot change, so this would be a bug in the sizing.
		err = fmt.Errorf("server: snapshot wrote %d bytes, announced %d", n, i.size)
	}
	if err != nil {
		i.log.Warn("failed to send database snapshot to client",
			"sent-bytes", pw.sent, "total-bytes", i.size, "took", time.Since(start), "error", err)
		if errors.Is(err, kvstore.ErrClosed) {
			err = ErrStopped
		}
		return n, err
	}
	i.log.Info("successfully sent database snapshot to client", "total-bytes", n, "took", time.Since(start))
	return n, nil
}

func (i *snapshotImage) Release() {
	if i.released.CompareAndSwap(false, true) {
		i.view.Release()
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
			"sent-bytes", p.sent, "total-bytes", p.img.size, "took", now.Sub(p.start))
	}
	return n, err
}
