package kvstore

import (
	"fmt"
	"slices"
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
	case got.modified != want.modified:
		return fmt.Sprintf("modified %v, want %v", got.modified, want.modified)
	case got.lease != want.lease:
		return fmt.Sprintf("lease %d, want %d", got.lease, want.lease)
	case len(got.generations) != len(want.generations):
		return fmt.Sprintf("%d generations, want %d", len(got.generations), len(want.generations))
	}
	for i, g := range want.generations {
		h := got.generations[i]
		if h.ver != g.ver || h.created != g.created || !slices.Equal(h.revs, g.revs) {
			return fmt.Sprintf("generation %d is %+v, want %+v", i, h, g)
		}
	}
	return ""
}
