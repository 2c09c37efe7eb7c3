package raftsnap

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func testMeta(term, index uint64) raftpb.SnapshotMetadata {
	return raftpb.SnapshotMetadata{Term: term, Index: index, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}}
}

func mustOpenStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readImage(t *testing.T, s *Store, ref Ref) (raftpb.SnapshotMetadata, []byte, error) {
	t.Helper()
	img, err := s.OpenImage(ref)
	if err != nil {
		return raftpb.SnapshotMetadata{}, nil, err
	}
	defer img.Close()
	data, err := io.ReadAll(img)
	return img.Metadata, data, err
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s := mustOpenStore(t, t.TempDir())
	// Larger than the buffers, and than two rounds of flushBehind.
	image := bytes.Repeat([]byte("state machine image "), 1_000_000)
	meta := testMeta(2, 10000)
	n, err := s.Save(meta, bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(image)) {
		t.Fatalf("Save reported %d image bytes, want %d", n, len(image))
	}
	ref := Ref{Term: 2, Index: 10000}
	got, err := s.Load(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, meta) {
		t.Fatalf("metadata %+v, want %+v", got, meta)
	}
	gotMeta, data, err := readImage(t, s, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotMeta, meta) || !bytes.Equal(data, image) {
		t.Fatalf("image round trip differs (%d bytes, want %d)", len(data), len(image))
	}
	refs, err := s.List()
	if err != nil || len(refs) != 1 || refs[0] != ref {
		t.Fatalf("List = %v, %v", refs, err)
	}
}

func TestEmptyImage(t *testing.T) {
	s := mustOpenStore(t, t.TempDir())
	if _, err := s.Save(testMeta(1, 1), bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	_, data, err := readImage(t, s, Ref{Term: 1, Index: 1})
	if err != nil || len(data) != 0 {
		t.Fatalf("empty image: %d bytes, %v", len(data), err)
	}
}

func TestMissingFileIsNotExist(t *testing.T) {
	s := mustOpenStore(t, t.TempDir())
	if _, err := s.Load(Ref{Term: 1, Index: 5}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

// smallFile saves a small snapshot and returns the store, its ref and bytes.
func smallFile(t *testing.T) (*Store, Ref, []byte) {
	t.Helper()
	s := mustOpenStore(t, t.TempDir())
	ref := Ref{Term: 3, Index: 77}
	if _, err := s.Save(testMeta(3, 77), bytes.NewReader([]byte("a small image of the state machine"))); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.Path(ref))
	if err != nil {
		t.Fatal(err)
	}
	return s, ref, data
}

func TestEveryFlippedByteIsDetected(t *testing.T) {
	s, ref, data := smallFile(t)
	path := s.Path(ref)
	for off := range data {
		bad := bytes.Clone(data)
		bad[off] ^= 0x20
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load(ref)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("flip at %d: Load err = %v, want ErrCorrupt naming %s", off, err, path)
		}
		if _, err := s.OpenImage(ref); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: OpenImage err = %v, want ErrCorrupt", off, err)
		}
	}
}

func TestEveryTruncationIsDetected(t *testing.T) {
	s, ref, data := smallFile(t)
	path := s.Path(ref)
	for cut := 0; cut < len(data); cut++ {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ref); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: Load err = %v, want ErrCorrupt", cut, err)
		}
	}
}

func TestHeaderMustMatchFileName(t *testing.T) {
	s, ref, data := smallFile(t)
	other := Ref{Term: 3, Index: 78}
	if err := os.WriteFile(s.Path(other), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(other); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("renamed file: Load err = %v, want ErrCorrupt", err)
	}
	if _, err := s.Load(ref); err != nil {
		t.Fatal(err)
	}
}

func TestImageChangedAfterValidation(t *testing.T) {
	s, ref, data := smallFile(t)
	img, err := s.OpenImage(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	// Damage the image on disk behind the open reader's back.
	bad := bytes.Clone(data)
	bad[len(data)-trailerSize-1] ^= 0xff
	if err := os.WriteFile(s.Path(ref), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(img); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading a changed image: %v, want ErrCorrupt", err)
	}
}

func TestSaveKeepsNewestFive(t *testing.T) {
	s := mustOpenStore(t, t.TempDir())
	for i := uint64(1); i <= 8; i++ {
		if _, err := s.Save(testMeta(1, i*100), bytes.NewReader([]byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != DefaultKeep || refs[0].Index != 400 || refs[len(refs)-1].Index != 800 {
		t.Fatalf("kept %v, want indexes 400..800", refs)
	}
}

func TestOpenRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, Ref{Term: 1, Index: 9}.FileName()+tmpExt)
	if err := os.WriteFile(tmp, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpenStore(t, dir)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file survived Open: %v", err)
	}
	if refs, _ := s.List(); len(refs) != 0 {
		t.Fatalf("List = %v, want none", refs)
	}
}

func TestRemove(t *testing.T) {
	s, ref, _ := smallFile(t)
	if err := s.Remove(ref); err != nil {
		t.Fatal(err)
	}
	if refs, _ := s.List(); len(refs) != 0 {
		t.Fatalf("List after Remove = %v", refs)
	}
}

type failingImage struct{}

func (failingImage) WriteTo(w io.Writer) (int64, error) {
	n, _ := w.Write([]byte("partial"))
	return int64(n), errors.New("engine failed mid-image")
}

func TestFailedSaveLeavesNothing(t *testing.T) {
	s := mustOpenStore(t, t.TempDir())
	if _, err := s.Save(testMeta(1, 5), failingImage{}); err == nil {
		t.Fatal("Save with a failing image succeeded")
	}
	des, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 0 {
		t.Fatalf("failed Save left %d files", len(des))
	}
}

func FuzzDecode(f *testing.F) {
	var valid bytes.Buffer
	meta := testMeta(3, 77)
	prefix, err := encodePrefix(&meta)
	if err != nil {
		f.Fatal(err)
	}
	valid.Write(prefix)
	valid.WriteString("image")
	f.Add(valid.Bytes())
	s := mustOpenStore(&testing.T{}, f.TempDir())
	if _, err := s.Save(meta, bytes.NewReader([]byte("image bytes"))); err != nil {
		f.Fatal(err)
	}
	whole, err := os.ReadFile(s.Path(Ref{Term: 3, Index: 77}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Add([]byte(magic + "\xff\xff\xff\xff"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := decode(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if l.imageOffset < int64(prefixSize) || l.imageOffset+l.imageLen+trailerSize != int64(len(data)) {
			t.Fatalf("accepted layout %+v does not tile %d bytes", l, len(data))
		}
	})
}
