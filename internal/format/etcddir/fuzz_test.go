package etcddir

import (
	"errors"
	"testing"
)

// FuzzDecodeLog feeds arbitrary bytes to the WAL reader as the last of
// two segments (the first a valid one) and as a lone segment: it reads
// bytes from disk, so it must never panic, and every refusal is an
// ErrCorrupt. Whatever it accepts holds contiguous entries after the
// index it was given.
func FuzzDecodeLog(f *testing.F) {
	names, segs := twoSegments(f)
	f.Add(segs[1], uint64(4))
	f.Add(segs[0], uint64(0))
	f.Add(segs[1][:len(segs[1])-4100], uint64(9))
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, index uint64) {
		for _, in := range [][][]byte{{segs[0], data}, {data}} {
			log, err := decodeLog(names[:len(in)], in, index%16)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not ErrCorrupt", err)
				}
				continue
			}
			for i, e := range log.Entries {
				if e.Index != index%16+1+uint64(i) {
					t.Fatalf("entry %d at position %d after index %d", e.Index, i, index%16)
				}
			}
		}
	})
}
