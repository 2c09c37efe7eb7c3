// Package kvimage is the wire and file format in which a storage engine
// writes its whole content — every key with its value, in key order — and
// reads it back: the image a Raft snapshot carries (ReadView.WriteTo and
// Backend.Restore of internal/memory and internal/rocksdb).
//
// An image is framed, versioned and checksummed. Each engine names its
// own Format (magic and version), so an image of one engine is refused by
// the other with a message saying what it is. The image of
// {"a": "xy", "b": ""} in the format {Magic: "MSROCKS\x00", Version: 1}
// is, byte by byte:
//
//	4d 53 52 4f 43 4b 53 00   magic (8 bytes)
//	00 01                     version 1 (big endian)
//	01 01 61 02 78 79         record: tag 1, key length 1, "a", value length 2, "xy"
//	01 01 62 00               record: tag 1, key length 1, "b", value length 0
//	02                        end tag
//	00 00 00 00 00 00 00 02   record count (big endian)
//	xx xx xx xx               CRC32C (Castagnoli) of every byte above, big endian
//
// Invariants, enforced by Decode: lengths are minimal uvarints and keys
// strictly ascend, so one content has exactly one image; the count and
// the CRC match; the stream ends right after the CRC. Every violation is
// an error wrapping ErrCorrupt, and a failing reader's error is passed
// through unwrapped by ErrCorrupt. The CRC can only be checked at the
// end, so a caller must not make anything irreversible of the records
// before Decode returns nil. A corrupt length cannot make the decoder
// allocate more than a megabyte ahead of the bytes actually received.
package kvimage
