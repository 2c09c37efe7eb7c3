package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// waitTimeout bounds every wait for goroutines of the suite.
const waitTimeout = 2 * time.Minute

// wait waits for wg, failing the test if that takes longer than
// waitTimeout.
func wait(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("goroutines still running after %v", waitTimeout)
	}
}

// windowKey is the key of item i in testConcurrentReaders.
func windowKey(i int) string { return fmt.Sprintf("k%05d", i) }

const window = 20

// windowBatch makes batch i of testConcurrentReaders: it sets "n" to i,
// adds item i and removes item i-window, so a state holding "n" = i has
// exactly the items max(0, i-window+1) .. i.
func windowBatch(i int) []op {
	ops := []op{put("n", strconv.Itoa(i)), put(windowKey(i), strconv.Itoa(i))}
	if i >= window {
		ops = append(ops, del(windowKey(i-window)))
	}
	return ops
}

// checkWindow verifies one view against the window invariant. It returns
// the "n" it saw (-1 before the first batch).
func checkWindow(r kvstore.Reader) (int, error) {
	nv, ok, err := r.Get([]byte("n"))
	if err != nil {
		return 0, err
	}
	if !ok {
		return -1, nil
	}
	n, err := strconv.Atoi(string(nv))
	if err != nil {
		return 0, fmt.Errorf("n = %q: %w", nv, err)
	}
	var keys []string
	err = r.Ascend([]byte("k"), []byte("l"), func(k, v []byte) bool {
		keys = append(keys, string(k))
		return true
	})
	if err != nil {
		return 0, err
	}
	first := max(0, n-window+1)
	if len(keys) != n-first+1 || keys[0] != windowKey(first) || keys[len(keys)-1] != windowKey(n) {
		return 0, fmt.Errorf("n = %d but items %q: a batch was seen half applied", n, keys)
	}
	var down int
	err = r.Descend([]byte("k"), []byte("l"), func(k, v []byte) bool {
		if down >= len(keys) || string(k) != keys[len(keys)-1-down] || string(v) != strconv.Itoa(mustAtoi(string(k[1:]))) {
			err = fmt.Errorf("descend yields %q=%q at position %d", k, v, down)
			return false
		}
		down++
		return true
	})
	if err != nil {
		return 0, err
	}
	if down != len(keys) {
		return 0, fmt.Errorf("descend saw %d items, Ascend %d", down, len(keys))
	}
	return n, nil
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func testConcurrentReaders(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	const (
		batches = 300
		readers = 4
	)
	writerDone := make(chan struct{})
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last, rounds := -1, 0
			for {
				select {
				case <-writerDone:
					if rounds > 0 {
						return
					}
				default:
				}
				rounds++
				v := b.ReadView()
				n, err := checkWindow(v)
				v.Release()
				if err == nil && n < last {
					err = fmt.Errorf("a later view went back from n = %d to %d", last, n)
				}
				if err != nil {
					errs <- err
					return
				}
				last = n
			}
		}()
	}
	for i := range batches {
		commit(t, b, nil, windowBatch(i)...)
	}
	close(writerDone)
	wait(t, &wg)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	v := b.ReadView()
	defer v.Release()
	if n, err := checkWindow(v); err != nil || n != batches-1 {
		t.Fatalf("final view: n = %d, %v; want %d", n, err, batches-1)
	}
}

// fill commits content with binary keys, empty values and one value
// larger than a megabyte, and returns its model.
func fill(t *testing.T, b kvstore.Backend) model {
	m := model{}
	var ops []op
	for i := range 2000 {
		ops = append(ops, put(fmt.Sprintf("key\x00%04d\xff", i), fmt.Sprintf("value %d", i)))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 80<<10) // 1.25 MiB
	ops = append(ops, put("big", string(big)), put("empty", ""), put("\x00", "\xff"), put("\xff\xff", "\x00"))
	commit(t, b, m, ops...)
	return m
}

func image(t *testing.T, b kvstore.Backend) []byte {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func testSnapshotRoundTrip(t *testing.T, b kvstore.Backend, newBackend func(*testing.T) kvstore.Backend) {
	m := fill(t, b)
	img := image(t, b)
	other := newBackend(t)
	if err := other.Restore(bytes.NewReader(img)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	checkContent(t, other, m)
	// The restored backend goes on like any other.
	commit(t, other, m, put("after", "restore"), del("big"))
	checkContent(t, other, m)
	if !bytes.Equal(image(t, b), img) {
		t.Fatal("two images of unchanged content differ")
	}
}

func testSnapshotWhileWriting(t *testing.T, b kvstore.Backend, newBackend func(*testing.T) kvstore.Backend) {
	m := fill(t, b)
	at := model{}
	for k, v := range m {
		at[k] = v
	}
	v := b.ReadView()
	var (
		buf    bytes.Buffer
		err    error
		wg     sync.WaitGroup
		wrote  = make(chan struct{})
		copied = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer v.Release()
		defer close(wrote)
		// Start writing, then let the writer change everything.
		_, err = v.WriteTo(&signalWriter{w: &buf, first: copied})
	}()
	select {
	case <-copied:
	case <-wrote: // failed before writing anything; reported below
	}
	for i := range 50 {
		commit(t, b, m, put(fmt.Sprintf("key\x00%04d\xff", i), "overwritten"), delRange("key\x00"+fmt.Sprintf("%04d", 1000+i), "key\x00"+fmt.Sprintf("%04d", 1001+i)), del("big"))
	}
	wait(t, &wg)
	<-wrote
	if err != nil {
		t.Fatalf("WriteTo while writing: %v", err)
	}
	other := newBackend(t)
	if err := other.Restore(&buf); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	checkContent(t, other, at)
	checkContent(t, b, m)
}

// signalWriter closes first once the first bytes are written.
type signalWriter struct {
	w     io.Writer
	first chan struct{}
	once  sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.once.Do(func() { close(s.first) })
	return n, err
}

func testRestoreReplaces(t *testing.T, b kvstore.Backend, newBackend func(*testing.T) kvstore.Backend) {
	src := newBackend(t)
	want := model{}
	commit(t, src, want, put("b", "from image"), put("x", "only in image"))
	img := image(t, src)

	old := model{}
	commit(t, b, old, put("a", "only here"), put("b", "here"))
	v := b.ReadView()
	defer v.Release()
	if err := b.Restore(bytes.NewReader(img)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	checkContent(t, b, want)
	checkReader(t, v, old) // a view from before keeps the old content
	commit(t, b, want, put("c", "after"))
	checkContent(t, b, want)
}

// failingReader yields data and then an I/O error.
type failingReader struct{ data []byte }

var errInjected = errors.New("injected read error")

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errInjected
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func testRestoreRejectsGarbage(t *testing.T, b kvstore.Backend, newBackend func(*testing.T) kvstore.Backend) {
	src := newBackend(t)
	fill(t, src)
	img := image(t, src)

	m := model{}
	commit(t, b, m, put("keep", "me"), put("and", "me"))
	bad := []struct {
		name string
		r    io.Reader
	}{
		{"empty", bytes.NewReader(nil)},
		{"garbage", bytes.NewReader([]byte("this is not a snapshot image of any engine"))},
		{"first half", bytes.NewReader(img[:len(img)/2])},
		{"all but the last byte", bytes.NewReader(img[:len(img)-1])},
		{"read error", &failingReader{data: img[:len(img)/3]}},
	}
	for _, tc := range bad {
		if err := b.Restore(tc.r); err == nil {
			t.Fatalf("Restore of %s succeeded", tc.name)
		}
		checkContent(t, b, m)
	}
	commit(t, b, m, put("still", "writable"))
	checkContent(t, b, m)
}

func testSizes(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	fill(t, b)
	size, inUse := b.Size(), b.SizeInUse()
	if size <= 0 || inUse <= 0 || inUse > size {
		t.Fatalf("after writing: Size %d, SizeInUse %d; want 0 < SizeInUse <= Size", size, inUse)
	}
}
