package kvstore

import (
	"fmt"
)

// CompareRebuilds rebuilds the key index from the store's committed
// backend content twice, with rebuildIndex and with rebuildIndexPipelined,
// and reports the first difference between the two results.
func CompareRebuilds(s *Store) error {
	view := s.backend.ReadView()
	defer view.Release()
	want, got := newIndexWriter(), newIndexWriter()
	wantRev, err := rebuildIndex(view, want, s)
	if err != nil {
		return fmt.Errorf("rebuildIndex: %w", err)
	}
	gotRev, err := rebuildIndexPipelined(view, got, s)
	if err != nil {
		return fmt.Errorf("rebuildIndexPipelined: %w", err)
	}
	if gotRev != wantRev {
		return fmt.Errorf("last revision %d, rebuildIndex says %d", gotRev, wantRev)
	}
	var wantKeys, gotKeys []*keyIndex
	want.tree.Ascend(func(ki *keyIndex) bool { wantKeys = append(wantKeys, ki); return true })
	got.tree.Ascend(func(ki *keyIndex) bool { gotKeys = append(gotKeys, ki); return true })
	if len(gotKeys) != len(wantKeys) {
		return fmt.Errorf("%d keys, rebuildIndex has %d", len(gotKeys), len(wantKeys))
	}
	for i, w := range wantKeys {
		if d := diffKeyIndex(gotKeys[i], w); d != "" {
			return fmt.Errorf("key %q: %s", w.key, d)
		}
	}
	return nil
}

func diffKeyIndex(got, want *keyIndex) string {
	switch {
	case string(got.key) != string(want.key):
		return fmt.Sprintf("key %q", got.key)
	case got.lease != want.lease:
		return fmt.Sprintf("lease %d, want %d", got.lease, want.lease)
	case got.created != want.created || got.ver != want.ver:
		return fmt.Sprintf("live generation created %d version %d, want %d, %d", got.created, got.ver, want.created, want.ver)
	case got.numEntries() != want.numEntries():
		return fmt.Sprintf("%d revisions, want %d", got.numEntries(), want.numEntries())
	case (got.older == nil) != (want.older == nil):
		return fmt.Sprintf("older revisions %v, want %v", got.older, want.older)
	}
	for i := range want.numEntries() {
		if g, w := got.entry(i), want.entry(i); g != w {
			return fmt.Sprintf("revision %d is %v (tombstone %v), want %v (tombstone %v)", i, g.rev(), g.isTombstone(), w.rev(), w.isTombstone())
		}
	}
	return ""
}
