package kvstore

import (
	"errors"
	"fmt"
)

// PersistentView is implemented by the ReadViews of a Backend that keeps
// its content on disk by itself (internal/rocksdb). Commit hands such an
// engine each batch without an fsync (see Backend); Persist is that fsync,
// for when the Raft log is about to drop entries the engine would
// otherwise need to replay after a power loss.
type PersistentView interface {
	ReadView
	// Persist makes everything committed to the engine so far, and so
	// the content of the view, survive power loss.
	Persist() error
}

// PersistsInPlace reports whether the backend keeps this image on disk by
// itself, so that a Raft snapshot can be taken by Persist instead of by
// writing the image out (raftnode.PersistentImage).
func (v *snapshotView) PersistsInPlace() bool {
	_, ok := v.snap.view.(PersistentView)
	return ok
}

// Persist makes at least the state of this image, consistent index
// included, survive power loss in the backend.
func (v *snapshotView) Persist() error {
	if v.released.Load() {
		return errors.New("kvstore: snapshot view used after Release")
	}
	pv, ok := v.snap.view.(PersistentView)
	if !ok {
		return errors.New("kvstore: the backend keeps its content in memory only; write the image out instead")
	}
	if err := pv.Persist(); err != nil {
		return fmt.Errorf("persist store image at consistent index %d: %w", v.snap.appliedIndex, err)
	}
	return nil
}
