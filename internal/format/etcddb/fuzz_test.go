package etcddb

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/lease"
)

// FuzzImportRecord feeds arbitrary bytes to the decoders of an etcd
// file's records (key bucket revisions and mvccpb.KeyValue values, lease
// records, meta revisions; bbolt's own pages are bbolt's business): none
// may panic, every refusal is an ErrCorrupt, and what is accepted
// converts back to the bytes it came from.
func FuzzImportRecord(f *testing.F) {
	kv := mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 2, ModRevision: 3, Version: 2, Lease: 7}
	val, _ := kv.Marshal()
	tomb, _ := (&mvccpb.KeyValue{Key: []byte("foo")}).Marshal()
	f.Add(byte(0), metaRevValue(3), val)
	f.Add(byte(0), append(metaRevValue(4), 't'), tomb)
	f.Add(byte(0), metaRevValue(9), []byte{})
	f.Add(byte(1), []byte{0, 0, 0, 0, 0, 0, 0, 7}, lease.AppendRecord(nil, lease.Record{ID: 7, TTL: 10}))
	f.Add(byte(2), []byte{}, metaRevValue(5))
	alarm, _ := (&pb.AlarmMember{MemberID: 9, Alarm: pb.AlarmType_NOSPACE}).Marshal()
	f.Add(byte(3), alarm, []byte{})
	f.Fuzz(func(t *testing.T, which byte, k, v []byte) {
		switch which % 4 {
		case 0:
			r, err := importKeyRecord(k, v)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("key record error %v is not ErrCorrupt", err)
				}
				return
			}
			if r.skip {
				return
			}
			back, err := toEtcdRevKey(nil, r.key)
			if err != nil || !bytes.Equal(back, k) {
				t.Fatalf("key %x converted to %x and back to %x (%v)", k, r.key, back, err)
			}
			if !bytes.Equal(r.value, v) {
				t.Fatal("the value changed")
			}
		case 1:
			r, err := importLeaseRecord(k, v)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("lease record error %v is not ErrCorrupt", err)
				}
				return
			}
			if r.key[0] != lease.Bucket || !bytes.Equal(r.key[1:], k) || !bytes.Equal(r.value, v) {
				t.Fatalf("lease %x=%x converted to %x=%x", k, v, r.key, r.value)
			}
		case 3:
			r, err := importAlarmRecord(k, v)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("alarm record error %v is not ErrCorrupt", err)
				}
				return
			}
			var m pb.AlarmMember
			if err := m.Unmarshal(r.value); err != nil || !bytes.Equal(r.key[1:], AlarmRecordKey(m.MemberID, m.Alarm)) {
				t.Fatalf("alarm %x converted to %x=%x (%v)", k, r.key, r.value, err)
			}
		default:
			rev, err := parseMetaRev("finishedCompactRev", v)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("meta error %v is not ErrCorrupt", err)
				}
				return
			}
			if rev < 0 || !bytes.Equal(metaRevValue(rev)[:8], v[:8]) {
				t.Fatalf("meta %x read as %d", v, rev)
			}
		}
	})
}
