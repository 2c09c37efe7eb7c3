package rocksdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentReaders: while one writer commits batches that each bump
// every counter key to the same generation number (and, every few
// batches, restores an image or range-deletes a scratch area), readers on
// other goroutines take views and check that each one is internally
// consistent and never goes back in time.
func TestConcurrentReaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b := newTestBackend(t)
	const counters, batches, readers = 16, 300, 4
	writeGen := func(bt interface{ Put(k, v []byte) }, gen uint64) {
		for c := range counters {
			bt.Put(fmt.Appendf(nil, "c%02d", c), binary.BigEndian.AppendUint64(nil, gen))
		}
	}
	bt := b.NewBatch()
	writeGen(bt, 0)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	restoreImage := image(t, b) // generation 0

	var (
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		errs   = make(chan error, readers+1)
		states = make([]readerState, readers)
	)
	firstViews := make(chan struct{}, readers)
	for r := range readers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				if err := checkView(b, &states[r]); err != nil {
					errs <- err
					return
				}
				if states[r].views++; states[r].views == 1 {
					firstViews <- struct{}{}
				}
			}
		})
	}
	// Start writing once every reader is reading.
	for range readers {
		select {
		case <-firstViews:
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("readers did not start before the deadline")
		}
	}
	for gen := uint64(1); gen <= batches && ctx.Err() == nil; gen++ {
		bt := b.NewBatch()
		writeGen(bt, gen)
		bt.Put(fmt.Appendf(nil, "s%06d", gen), bytes.Repeat([]byte{'s'}, 100))
		if gen%10 == 0 {
			bt.DeleteRange([]byte("s"), []byte("t"))
		}
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		if gen == batches/2 {
			if err := b.Restore(bytes.NewReader(restoreImage)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ctx.Err() != nil {
		t.Fatal("deadline exceeded")
	}
}

// readerState is what one reader has seen so far. Generations only grow,
// except once, back to 0, at the writer's Restore.
type readerState struct {
	views    int
	last     uint64
	restored bool
}

// checkView takes one view: all counters must hold one generation, Get
// must agree with Ascend and Descend, and the generation must follow the
// writer's order.
func checkView(b *Backend, st *readerState) error {
	v := b.ReadView()
	defer v.Release()
	var gens []uint64
	err := v.Ascend([]byte("c"), []byte("d"), func(k, val []byte) bool {
		gens = append(gens, binary.BigEndian.Uint64(val))
		return true
	})
	if err != nil {
		return err
	}
	if len(gens) == 0 {
		return fmt.Errorf("view holds no counters")
	}
	for _, g := range gens {
		if g != gens[0] {
			return fmt.Errorf("torn view: counters at generations %v", gens)
		}
	}
	var back []uint64
	err = v.Descend([]byte("c"), []byte("d"), func(k, val []byte) bool {
		back = append(back, binary.BigEndian.Uint64(val))
		return true
	})
	if err != nil {
		return err
	}
	if len(back) != len(gens) || back[0] != gens[0] {
		return fmt.Errorf("Descend saw %v after Ascend saw %v in the same view", back, gens)
	}
	got, ok, err := v.Get([]byte("c07"))
	if err != nil || !ok || binary.BigEndian.Uint64(got) != gens[0] {
		return fmt.Errorf("Get(c07) = %x, %v, %v in a view at generation %d", got, ok, err, gens[0])
	}
	if g := gens[0]; g < st.last {
		if g != 0 || st.restored {
			return fmt.Errorf("view went back from generation %d to %d", st.last, g)
		}
		st.restored = true
	}
	st.last = gens[0]
	return nil
}

func TestCompactAndSizes(t *testing.T) {
	var logs bytes.Buffer
	opts := testOptions(t)
	opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil))
	b, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() < 0 || b.SizeInUse() > b.Size() {
		t.Fatalf("empty backend: Size %d, SizeInUse %d", b.Size(), b.SizeInUse())
	}
	content := bigContent(4000)
	for i := 0; i < len(content); i += 200 {
		putAll(t, b, content[i:i+200]...)
	}
	// Overwrite everything twice and delete most of it: garbage to drop.
	for range 2 {
		for i := 0; i < len(content); i += 200 {
			putAll(t, b, content[i:i+200]...)
		}
	}
	bt := b.NewBatch()
	bt.DeleteRange([]byte("r00000100"), nil)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	before := b.Size()
	if before <= 0 {
		t.Fatalf("Size = %d after writing %d keys", before, len(content))
	}
	if err := b.compact(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	after, inUse := b.Size(), b.SizeInUse()
	if after >= before/4 {
		t.Fatalf("Size %d -> %d after deleting 97%% and compacting", before, after)
	}
	if inUse <= 0 || inUse > after {
		t.Fatalf("SizeInUse %d, Size %d", inUse, after)
	}
	mustEqualKVs(t, "content after Compact", contents(t, b), content[:100])
	for _, msg := range []string{"rocksdb compaction started", "rocksdb compaction finished"} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("log lacks %q:\n%s", msg, logs.String())
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSyncKeepsContent(t *testing.T) {
	b := newTestBackend(t)
	putAll(t, b, kv{"k", "v"})
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "content", contents(t, b), []kv{{"k", "v"}})
}

func TestCompressions(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(string(c), func(t *testing.T) {
			opts := testOptions(t)
			opts.Compression = c
			dir := t.TempDir()
			b, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			content := bigContent(1000)
			putAll(t, b, content...)
			if err := b.Compact(); err != nil { // writes SST files in c
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b, err = Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			mustEqualKVs(t, "content", contents(t, b), content)
		})
	}
}

func TestOptions(t *testing.T) {
	for in, want := range map[string]Compression{"none": CompressionNone, " LZ4 ": CompressionLZ4, "Zstd": CompressionZstd, "snappy": CompressionSnappy} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseCompression("gzip"); err == nil {
		t.Error("ParseCompression(gzip) succeeded")
	}
	if err := DefaultOptions().validate(); err != nil {
		t.Fatalf("DefaultOptions invalid: %v", err)
	}
	bad := map[string]func(*Options){
		"cache":       func(o *Options) { o.BlockCacheSize = 0 },
		"bloom":       func(o *Options) { o.BloomBitsPerKey = -1 },
		"compression": func(o *Options) { o.Compression = "" },
		"buffer":      func(o *Options) { o.WriteBufferSize = 1024 },
		"buffers":     func(o *Options) { o.MaxWriteBuffers = 1 },
		"jobs":        func(o *Options) { o.MaxBackgroundJobs = 0 },
	}
	for name, mutate := range bad {
		opts := DefaultOptions()
		mutate(&opts)
		if b, err := Open(t.TempDir(), opts); err == nil {
			b.Close()
			t.Errorf("%s: Open accepted invalid options", name)
		}
	}
	opts := testOptions(t)
	opts.BloomBitsPerKey = 0 // filters off is valid
	b, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, b, kv{"k", "v"})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEmptyKeyThroughCompaction pushes the empty key and range tombstones
// starting at it through flush and compaction: with Debian's assertion-
// enabled librocksdb a nil key slice in the wrong place aborts the process.
func TestEmptyKeyThroughCompaction(t *testing.T) {
	b := newTestBackend(t)
	content := bigContent(2000)
	putAll(t, b, content...)
	putAll(t, b, kv{"", "empty"}, kv{"\x00", "zero"})
	bt := b.NewBatch()
	bt.DeleteRange(nil, []byte("r00000500"))
	bt.DeleteRange([]byte{}, []byte("r00000010"))
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Compact(); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "after range delete from the empty key", contents(t, b), content[500:])
	putAll(t, b, kv{"", "again"})
	if err := b.Compact(); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "after re-adding the empty key", contents(t, b), append([]kv{{"", "again"}}, content[500:]...))
}
