package lease

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Bucket is the store's auxiliary bucket holding one record per lease.
const Bucket byte = 'l'

// AuxWriter buffers writes into the store batch of the entry being applied,
// so a lease change commits atomically with the entry that made it.
type AuxWriter interface {
	PutAux(bucket byte, key, value []byte)
	DeleteAux(bucket byte, key []byte)
}

// AuxReader reads the committed auxiliary buckets.
type AuxReader interface {
	AscendAux(bucket byte, fn func(key, value []byte) bool) error
}

// Record is the persisted form of a lease: etcd's leasepb.Lease message,
// byte for byte (field 1 ID, 2 TTL, 3 RemainingTTL, all varint, zero fields
// omitted as proto3 does).
type Record struct {
	ID           int64
	TTL          int64
	RemainingTTL int64
}

// Protobuf field numbers of leasepb.Lease.
const (
	fieldID           protowire.Number = 1
	fieldTTL          protowire.Number = 2
	fieldRemainingTTL protowire.Number = 3
)

// recordKey is the record's key inside Bucket: the lease ID as 8 big-endian
// bytes, so an AscendAux walks leases in unsigned ID order.
func recordKey(dst []byte, id int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(id))
}

// AppendRecord appends r's protobuf encoding to dst.
func AppendRecord(dst []byte, r Record) []byte {
	for _, f := range [...]struct {
		num protowire.Number
		v   int64
	}{{fieldID, r.ID}, {fieldTTL, r.TTL}, {fieldRemainingTTL, r.RemainingTTL}} {
		if f.v == 0 {
			continue
		}
		dst = protowire.AppendTag(dst, f.num, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(f.v))
	}
	return dst
}

var errMalformedRecord = errors.New("lease: malformed record")

// DecodeRecord parses a record written by AppendRecord (or by etcd's
// leasepb.Lease.Marshal). Unknown fields are skipped, as protobuf requires;
// a known field with the wrong wire type, or truncated input, is an error.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Record{}, fmt.Errorf("%w: bad tag: %w", errMalformedRecord, protowire.ParseError(n))
		}
		b = b[n:]
		var dst *int64
		switch num {
		case fieldID:
			dst = &r.ID
		case fieldTTL:
			dst = &r.TTL
		case fieldRemainingTTL:
			dst = &r.RemainingTTL
		}
		if dst == nil {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Record{}, fmt.Errorf("%w: bad field %d: %w", errMalformedRecord, num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		if typ != protowire.VarintType {
			return Record{}, fmt.Errorf("%w: field %d has wire type %d, want varint", errMalformedRecord, num, typ)
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return Record{}, fmt.Errorf("%w: bad field %d: %w", errMalformedRecord, num, protowire.ParseError(n))
		}
		*dst = int64(v)
		b = b[n:]
	}
	return r, nil
}

// decodeKeyedRecord decodes one entry of Bucket and checks that its key
// names the lease its value describes.
func decodeKeyedRecord(key, value []byte) (Record, error) {
	if len(key) != 8 {
		return Record{}, fmt.Errorf("%w: key %x is not 8 bytes", errMalformedRecord, key)
	}
	r, err := DecodeRecord(value)
	if err != nil {
		return Record{}, fmt.Errorf("lease %016x: %w", binary.BigEndian.Uint64(key), err)
	}
	if uint64(r.ID) != binary.BigEndian.Uint64(key) {
		return Record{}, fmt.Errorf("%w: key %x holds lease %016x", errMalformedRecord, key, uint64(r.ID))
	}
	if r.ID == 0 {
		return Record{}, fmt.Errorf("%w: lease ID 0", errMalformedRecord)
	}
	return r, nil
}
