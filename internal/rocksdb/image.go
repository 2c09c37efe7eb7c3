package rocksdb

import "github.com/metastore-io/metastore/internal/format/kvimage"

// imageFormat names this engine's images (ReadView.WriteTo,
// Backend.Restore); the framing is internal/format/kvimage's. Bump Version when
// the meaning of the keys changes (layout.go).
var imageFormat = kvimage.Format{Name: "RocksDB backend image", Magic: "MSROCKS\x00", Version: 1}

// ErrBadImage is wrapped by every error that comes from the content of an
// image (as opposed to the reader failing).
var ErrBadImage = kvimage.ErrCorrupt
