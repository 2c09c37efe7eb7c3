package statemachine

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/etcdsnap"
)

// TestAlarmKeyIsWhatEtcdSnapshotsConvert: internal/etcdsnap converts an
// etcd snapshot's alarms into this bucket's records, so it must spell
// the key as the alarm store does.
func TestAlarmKeyIsWhatEtcdSnapshotsConvert(t *testing.T) {
	for _, k := range []alarmKey{{member: 0x8e9e05c52164694d, alarm: pb.AlarmType_NOSPACE}, {member: 1, alarm: pb.AlarmType_CORRUPT}} {
		if got, want := etcdsnap.AlarmRecordKey(k.member, k.alarm), alarmStoreKey(k); !bytes.Equal(got, want) {
			t.Errorf("etcdsnap key %x, alarm store key %x", got, want)
		}
	}
}
