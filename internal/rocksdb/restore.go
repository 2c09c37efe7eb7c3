package rocksdb

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/linxGnu/grocksdb"

	"github.com/metastore-io/metastore/internal/format/kvimage"
)

// Restore replaces the whole content with an image written by
// ReadView.WriteTo, atomically: the image is decoded into SST files in a
// staging directory, its checksum verified, the files ingested into a new
// database db-(n+1), that database fsynced, and only then is ACTIVE
// switched to it. Any error before the switch deletes the staging files
// and leaves the old content in place, on disk and in memory. Views taken
// before Restore keep reading the old database, which closes and is
// deleted when the last of them is released.
func (b *Backend) Restore(r io.Reader) error {
	if b.closed.Load() {
		return ErrClosed
	}
	old := b.current.Load()
	n := old.n + 1
	gen, records, err := b.buildGeneration(n, r)
	if err != nil {
		return fmt.Errorf("rocksdb restore: %w", err)
	}
	if err := writeActive(b.dir, n); err != nil {
		// The rename may have happened before the failure: point ACTIVE
		// back so that disk and memory agree on the old content.
		if rerr := writeActive(b.dir, old.n); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore ACTIVE to %s: %w", dbName(old.n), rerr))
		}
		gen.retired.Store(true)
		gen.unref()
		return fmt.Errorf("rocksdb restore: %w", err)
	}
	b.current.Store(gen)
	old.retired.Store(true)
	old.unref()
	b.logger.Info("rocksdb restore installed", "db", gen.path, "records", records, "size", gen.size())
	return nil
}

// buildGeneration decodes r into a new, durable, opened database db-n
// that nothing points at yet. On error nothing of it is left on disk.
func (b *Backend) buildGeneration(n uint64, r io.Reader) (*generation, uint64, error) {
	path := filepath.Join(b.dir, dbName(n))
	ingestDir := path + stagingSuffix
	// Leftovers of an earlier failed attempt (Open removes them too).
	for _, p := range []string{path, ingestDir} {
		if err := os.RemoveAll(p); err != nil {
			return nil, 0, fmt.Errorf("remove leftover %s: %w", p, err)
		}
	}
	if err := os.Mkdir(ingestDir, dirPerm); err != nil {
		return nil, 0, fmt.Errorf("create staging directory: %w", err)
	}
	defer os.RemoveAll(ingestDir)

	files, records, err := b.writeSSTs(r, ingestDir)
	if err != nil {
		return nil, 0, err
	}
	gen, err := b.openGeneration(n, true)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*generation, uint64, error) {
		gen.retired.Store(true)
		gen.unref()
		return nil, 0, err
	}
	if len(files) > 0 {
		ingest := grocksdb.NewDefaultIngestExternalFileOptions()
		ingest.SetMoveFiles(true) // same file system: a rename, no copy
		err := gen.db.IngestExternalFile(files, ingest)
		ingest.Destroy()
		if err != nil {
			return fail(fmt.Errorf("ingest %d files: %w", len(files), err))
		}
	}
	if err := syncTree(path); err != nil {
		return fail(err)
	}
	return gen, records, nil
}

// writeSSTs decodes the image into sorted SST files of about one
// WriteBufferSize each and returns their paths once the image's checksum
// has been verified.
func (b *Backend) writeSSTs(r io.Reader, dir string) ([]string, uint64, error) {
	native := b.opts.nativeOptions(b.cache)
	defer native.Destroy()
	env := grocksdb.NewDefaultEnvOptions()
	defer env.Destroy()

	var (
		files   []string
		writer  *grocksdb.SSTFileWriter
		written int64
	)
	finish := func() error {
		err := writer.Finish()
		writer.Destroy()
		writer = nil
		if err != nil {
			return fmt.Errorf("finish %s: %w", files[len(files)-1], err)
		}
		return nil
	}
	records, err := kvimage.Decode(r, imageFormat, func(key, value []byte) error {
		if writer == nil {
			path := filepath.Join(dir, fmt.Sprintf("%06d.sst", len(files)+1))
			writer = grocksdb.NewSSTFileWriter(env, native)
			if err := writer.Open(path); err != nil {
				writer.Destroy()
				writer = nil
				return fmt.Errorf("create %s: %w", path, err)
			}
			files = append(files, path)
			written = 0
		}
		if err := writer.Add(key, value); err != nil {
			return fmt.Errorf("write %s: %w", files[len(files)-1], err)
		}
		written += int64(len(key) + len(value))
		if written >= b.opts.WriteBufferSize {
			return finish()
		}
		return nil
	})
	if err == nil && writer != nil {
		err = finish()
	}
	if writer != nil {
		writer.Destroy()
	}
	if err != nil {
		return nil, 0, err
	}
	return files, records, nil
}

// Checkpoint writes a consistent copy of the current content into dir,
// which must not exist, in the layout Open reads (so Open(dir) serves the
// copy). SST files are hard-linked when dir is on the same file system,
// which makes this cheap enough for routine local backups.
func (b *Backend) Checkpoint(dir string) error {
	gen, err := b.acquire()
	if err != nil {
		return err
	}
	defer gen.unref()
	if err := os.Mkdir(dir, dirPerm); err != nil {
		return fmt.Errorf("rocksdb checkpoint: %w", err)
	}
	cp, err := gen.db.NewCheckpoint()
	if err != nil {
		return fmt.Errorf("rocksdb checkpoint: %w", err)
	}
	defer cp.Destroy()
	path := filepath.Join(dir, dbName(1))
	// 0: flush the memtables first, so the copy does not depend on WAL
	// replay.
	if err := cp.CreateCheckpoint(path, 0); err != nil {
		return fmt.Errorf("rocksdb checkpoint into %s: %w", path, err)
	}
	if err := syncTree(path); err != nil {
		return fmt.Errorf("rocksdb checkpoint: %w", err)
	}
	if err := writeActive(dir, 1); err != nil {
		return fmt.Errorf("rocksdb checkpoint: %w", err)
	}
	return nil
}
