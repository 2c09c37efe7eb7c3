package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

// testStore is a store with a few revisions: puts, an overwrite, a delete
// and an aux record, committed at consistent index 7.
func testStore(t testing.TB, keys int) *kvstore.Store {
	t.Helper()
	kv, err := kvstore.Open(memory.New(), kvstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	for i := range keys {
		if _, err := kv.Put(&pb.PutRequest{Key: fmt.Appendf(nil, "key/%04d", i), Value: bytes.Repeat([]byte{byte(i)}, i%300)}); err != nil {
			t.Fatal(err)
		}
	}
	if keys > 1 {
		if _, err := kv.Put(&pb.PutRequest{Key: []byte("key/0001"), Value: []byte("again")}); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.DeleteRange(&pb.DeleteRangeRequest{Key: []byte("key/0000")}); err != nil {
			t.Fatal(err)
		}
	}
	kv.PutAux(kvstore.BucketLease, []byte("aux"), []byte("record"))
	kv.SetConsistentIndex(7, 2)
	if _, err := kv.Commit(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// encode writes the snapshot file of kv's current state.
func encode(t *testing.T, kv *kvstore.Store) []byte {
	t.Helper()
	view := kv.SnapshotView()
	defer view.Release()
	var buf bytes.Buffer
	n, err := Write(&buf, view)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("Write reported %d bytes, wrote %d", n, buf.Len())
	}
	size, err := Size(context.Background(), view)
	if err != nil {
		t.Fatal(err)
	}
	if size != n {
		t.Fatalf("Size says %d bytes, Write wrote %d", size, n)
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// records reads every record of the view.
func viewRecords(t *testing.T, r kvstore.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := r.Ascend(nil, nil, func(k, v []byte) bool { out[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteThenReadGivesTheSameRecords(t *testing.T) {
	for _, keys := range []int{0, 1, 50, 2000} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			kv := testStore(t, keys)
			data := encode(t, kv)
			// etcdctl accepts a file only if it looks like whole 512-byte
			// blocks plus a sha256 digest.
			if len(data)%512 != sha256.Size {
				t.Fatalf("file of %d bytes: size %% 512 = %d, want %d", len(data), len(data)%512, sha256.Size)
			}
			if got := sha256.Sum256(data[:len(data)-DigestSize]); !bytes.Equal(got[:], data[len(data)-DigestSize:]) {
				t.Fatal("the file does not end with the sha256 of the rest")
			}
			f, err := Open(writeFile(t, data))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.BodySize() != int64(len(data)-DigestSize) {
				t.Fatalf("BodySize %d, want %d", f.BodySize(), len(data)-DigestSize)
			}
			b := memory.New()
			n, err := f.LoadInto(b)
			if err != nil {
				t.Fatal(err)
			}
			view := kv.SnapshotView()
			defer view.Release()
			want := viewRecords(t, view)
			if n != uint64(len(want)) {
				t.Fatalf("loaded %d records, the store has %d", n, len(want))
			}
			loaded := b.ReadView()
			defer loaded.Release()
			if got := viewRecords(t, loaded); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("loaded records differ from the store's:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestSizeStopsWhenTheContextEnds(t *testing.T) {
	kv := testStore(t, 5000)
	view := kv.SnapshotView()
	defer view.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Size(ctx, view); !errors.Is(err, context.Canceled) {
		t.Fatalf("Size with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestReadStatusReportsTheStore(t *testing.T) {
	kv := testStore(t, 20)
	data := encode(t, kv)
	st, err := ReadStatus(writeFile(t, data))
	if err != nil {
		t.Fatal(err)
	}
	wantHash, err := kv.Hash()
	if err != nil {
		t.Fatal(err)
	}
	// 20 puts, one overwrite, one delete: revision 23, 19 keys left.
	want := Status{Hash: wantHash, Revision: 23, TotalKey: 19, TotalSize: int64(len(data) - DigestSize)}
	if st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	if kv.Rev() != want.Revision {
		t.Fatalf("test store at revision %d, expected %d", kv.Rev(), want.Revision)
	}
}

// resign replaces the digest of a body so that the checks after it run.
func resign(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

func TestOpenRefusesDamagedFilesNamingThem(t *testing.T) {
	good := encode(t, testStore(t, 30))
	body := good[:len(good)-DigestSize]
	imageLen := int64(binary.BigEndian.Uint64(body[len(body)-footerSize:]))
	boltFile := make([]byte, 4*512+DigestSize)
	binary.LittleEndian.PutUint32(boltFile[boltMagicOffset:], boltMagic)

	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":                    {nil, "shorter than its magic"},
		"truncated by a byte":      {good[:len(good)-1], "not whole 512-byte blocks"},
		"truncated by a block":     {good[:len(good)-512], "sha256 mismatch"},
		"digest cut off":           {good[:len(good)-DigestSize], "not whole 512-byte blocks"},
		"bit flipped in the image": {flip(good, 100), "sha256 mismatch"},
		"bit flipped in digest":    {flip(good, len(good)-1), "sha256 mismatch"},
		"etcd bbolt snapshot":      {boltFile, "etcd snapshot (a bbolt database)"},
		"something else":           {bytes.Repeat([]byte("x"), 4*512+DigestSize), `starts with "xxxxxxxx"`},
		"footer damaged":           {resign(flip(body, len(body)-1)), "no footer"},
		"padding not zero":         {resign(flip(body, int(imageLen))), "padding after the image is not zero"},
		"image length too long":    {resign(withImageLen(body, uint64(len(body)))), "footer gives an image"},
		"image length too short":   {resign(withImageLen(body, 3)), "footer gives an image"},
		"a whole block too much":   {resign(append(append(append([]byte(nil), body[:len(body)-footerSize]...), make([]byte, 512)...), body[len(body)-footerSize:]...)), "footer gives an image"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, tc.data)
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatal("Open accepted the file")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrCorrupt naming %s and saying %q", err, path, tc.want)
			}
		})
	}
}

func TestRecordsRefuseAnImageThatPassesTheDigest(t *testing.T) {
	// A writer bug, not disk damage: the digest matches but a record was
	// changed before it was hashed. The image's own CRC catches it.
	good := encode(t, testStore(t, 30))
	body := flip(good[:len(good)-DigestSize], 200)
	path := writeFile(t, resign(body))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.LoadInto(memory.New()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadInto: %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := ReadStatus(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadStatus: %v, want ErrCorrupt", err)
	}
}

func TestReadStatusRefusesAStoreThatIsNotOne(t *testing.T) {
	// Framing and image are fine, but the records are not an MVCC store.
	b := memory.New()
	batch := b.NewBatch()
	batch.Put([]byte("r-not-a-revision"), []byte("x"))
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	view := b.ReadView()
	defer view.Release()
	var buf bytes.Buffer
	if _, err := Write(&buf, view); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatus(writeFile(t, buf.Bytes())); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadStatus: %v, want ErrCorrupt", err)
	}
}

func TestOpenReportsAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.db")
	if _, err := Open(path); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open: %v, want ErrNotExist naming %s", err, path)
	}
}

func flip(data []byte, i int) []byte {
	out := append([]byte(nil), data...)
	out[i] ^= 0x01
	return out
}

func withImageLen(body []byte, n uint64) []byte {
	out := append([]byte(nil), body...)
	binary.BigEndian.PutUint64(out[len(out)-footerSize:], n)
	return out
}

// FuzzVerify feeds arbitrary bytes to Verify, once as they are and once
// with a correct digest appended (so that the checks behind the digest
// see fuzzed input too). It must never panic, and whatever it accepts
// must decode or fail with ErrCorrupt.
func FuzzVerify(f *testing.F) {
	kvSmall, kvEmpty := testStore(f, 3), testStore(f, 0)
	for _, kv := range []*kvstore.Store{kvSmall, kvEmpty} {
		view := kv.SnapshotView()
		var buf bytes.Buffer
		if _, err := Write(&buf, view); err != nil {
			f.Fatal(err)
		}
		view.Release()
		f.Add(buf.Bytes())
		f.Add(buf.Bytes()[:buf.Len()-DigestSize])
	}
	f.Add([]byte("MSBACKUP"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, candidate := range [][]byte{data, resign(data)} {
			imageLen, err := Verify(bytes.NewReader(candidate), int64(len(candidate)))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Verify: %v does not wrap ErrCorrupt", err)
				}
				continue
			}
			if _, err := decodeImage(bytes.NewReader(candidate), imageLen, "fuzz", func(_, _ []byte) error { return nil }); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode of a verified file: %v does not wrap ErrCorrupt", err)
			}
		}
	})
}
