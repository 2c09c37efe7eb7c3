package statemachine

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/format/etcddb"
)

// TestAlarmKeyIsWhatEtcdSnapshotsConvert: internal/format/etcddb converts an
// etcd snapshot's alarms into this bucket's records, so it must spell
// the key as the alarm store does.
func TestAlarmKeyIsWhatEtcdSnapshotsConvert(t *testing.T) {
	for _, k := range []alarmKey{{member: 0x8e9e05c52164694d, alarm: pb.AlarmType_NOSPACE}, {member: 1, alarm: pb.AlarmType_CORRUPT}} {
		if got, want := etcddb.AlarmRecordKey(k.member, k.alarm), alarmStoreKey(k); !bytes.Equal(got, want) {
			t.Errorf("etcddb key %x, alarm store key %x", got, want)
		}
	}
}
