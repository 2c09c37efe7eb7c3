package kvstore

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Stored values are mvccpb.KeyValue in protobuf wire format, byte for byte
// what etcd stores. Decoding is on the hot read path, so decodeKeyValue
// parses the six known fields itself and makes Key and Value point into
// one buffer instead of allocating each; anything it does not recognise
// (unknown fields, odd wire types) goes through the generated Unmarshal,
// so both always agree (FuzzDecodeKeyValue checks this).

// Protobuf tags of mvccpb.KeyValue: field number << 3 | wire type, the
// wire type being 2 (length-delimited) for bytes and 0 (varint) for ints.
const (
	tagKey            = 1<<3 | 2
	tagCreateRevision = 2 << 3
	tagModRevision    = 3 << 3
	tagVersion        = 4 << 3
	tagValue          = 5<<3 | 2
	tagLease          = 6 << 3
)

// decodeKeyValue decodes buf into kv. kv.Key and kv.Value alias buf, so
// buf must not change while kv is in use.
func decodeKeyValue(buf []byte, kv *mvccpb.KeyValue) error {
	*kv = mvccpb.KeyValue{}
	for i := 0; i < len(buf); {
		tag := buf[i]
		i++
		switch tag {
		case tagKey, tagValue:
			n, w := binary.Uvarint(buf[i:])
			if w <= 0 || n > uint64(len(buf)-i-w) {
				return slowDecodeKeyValue(buf, kv)
			}
			i += w
			field := buf[i : i+int(n) : i+int(n)]
			i += int(n)
			if tag == tagKey {
				kv.Key = field
			} else {
				kv.Value = field
			}
		case tagCreateRevision, tagModRevision, tagVersion, tagLease:
			v, w := binary.Uvarint(buf[i:])
			if w <= 0 {
				return slowDecodeKeyValue(buf, kv)
			}
			i += w
			switch tag {
			case tagCreateRevision:
				kv.CreateRevision = int64(v)
			case tagModRevision:
				kv.ModRevision = int64(v)
			case tagVersion:
				kv.Version = int64(v)
			default:
				kv.Lease = int64(v)
			}
		default:
			return slowDecodeKeyValue(buf, kv)
		}
	}
	return nil
}

func slowDecodeKeyValue(buf []byte, kv *mvccpb.KeyValue) error {
	*kv = mvccpb.KeyValue{}
	if err := kv.Unmarshal(buf); err != nil {
		return fmt.Errorf("decode stored KeyValue: %w", err)
	}
	return nil
}

// keyOfKeyValue returns the key of an encoded KeyValue without decoding
// the rest; etcd's encoder always writes the key first, and leaves it out
// when it is empty. ok is false if the buffer starts with a malformed key
// field.
func keyOfKeyValue(buf []byte) (key []byte, ok bool) {
	if len(buf) == 0 || buf[0] != tagKey {
		return nil, true // no key field first: empty key
	}
	n, w := binary.Uvarint(buf[1:])
	if w <= 0 || n > uint64(len(buf)-1-w) {
		return nil, false
	}
	return buf[1+w : 1+w+int(n)], true
}

// arena hands out copies of stored bytes for the KeyValues of one response,
// carving them from a few large allocations instead of one per field.
// expect is how many more copies the caller thinks it will ask for; a new
// chunk is sized for that many copies like the current one (at most
// arenaChunk), so that a single-key read allocates just what it needs.
type arena struct {
	buf    []byte
	expect int
}

const arenaChunk = 4096

// copy returns a copy of b that stays valid after the backend view that b
// came from is released.
func (a *arena) copy(b []byte) []byte {
	n := max(a.expect, 1)
	a.expect = n - 1
	if len(b) > cap(a.buf)-len(a.buf) {
		if len(b) > arenaChunk/4 {
			return append([]byte(nil), b...)
		}
		a.buf = make([]byte, 0, max(len(b), min(len(b)*n, arenaChunk)))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// maxRecordScratch is the largest encoding buffer a writer keeps between
// records: tombstones (encodeKeyValue, which the batch copies) encode
// without allocating, and one large record does not pin its size.
const maxRecordScratch = 64 << 10

// marshalKeyValue encodes kv in one allocation and returns the encoding
// and a KeyValue whose Key and Value point into it: the encoding holds
// both verbatim, so the caller may reuse the slices it passed in, and a
// put of a 1.5 MiB value allocates 1.5 MiB: no copy of the value for the
// pending map and the watch events beside the encoding, and none in the
// memory engine, which keeps the encoding itself (Batch.PutOwned). So
// neither is ever modified. (RocksDB copies the encoding into its batch;
// the events then hold it, a few bytes more than key and value.)
func marshalKeyValue(kv mvccpb.KeyValue) (*mvccpb.KeyValue, []byte) {
	kv.XXX_unrecognized = nil
	data := make([]byte, kv.Size())
	if _, err := kv.MarshalToSizedBuffer(data); err != nil {
		// MarshalToSizedBuffer fails only if the buffer is too small,
		// and it was sized by Size().
		panic(fmt.Sprintf("kvstore: marshal KeyValue: %v", err))
	}
	out := kv
	// KeyValue encodes Key (field 1, tag and length first) before the
	// rest, and Value (field 5) last but for Lease (field 6).
	keyStart := 0
	if len(kv.Key) > 0 {
		keyStart = 1 + uvarintLen(uint64(len(kv.Key)))
	}
	out.Key = data[keyStart : keyStart+len(kv.Key) : keyStart+len(kv.Key)]
	valueEnd := len(data)
	if kv.Lease != 0 {
		valueEnd -= 1 + uvarintLen(uint64(kv.Lease))
	}
	out.Value = data[valueEnd-len(kv.Value) : valueEnd : valueEnd]
	if len(kv.Value) == 0 {
		out.Value = nil
	}
	return &out, data
}

// encodeKeyValue encodes kv into scratch, grown as needed.
func encodeKeyValue(kv *mvccpb.KeyValue, scratch []byte) []byte {
	size := kv.Size()
	if cap(scratch) < size {
		scratch = make([]byte, size)
	}
	data := scratch[:size]
	if _, err := kv.MarshalToSizedBuffer(data); err != nil {
		// MarshalToSizedBuffer fails only if the buffer is too small,
		// and it was sized by Size().
		panic(fmt.Sprintf("kvstore: marshal KeyValue: %v", err))
	}
	return data
}
