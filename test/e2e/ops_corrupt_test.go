package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"

	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/test/framework"
)

// corruptValue overwrites, in a stopped member's storage, the value of
// every stored revision of key: bit rot that passes the engine's own
// checksums, which only a comparison with the peers can find. etcd keeps
// its revisions in the "key" bucket of member/snap/db (bbolt); MetaStore's
// RocksDB engine under member/rocksdb, as 'r' + main + sub. Both store the
// mvccpb.KeyValue protobuf as the value.
func corruptValue(t *testing.T, target framework.Target, dataDir, key string) {
	t.Helper()
	rewrite := func(v []byte) ([]byte, bool) {
		var kv mvccpb.KeyValue
		if err := kv.Unmarshal(v); err != nil || string(kv.Key) != key {
			return nil, false
		}
		kv.Value = []byte("corrupted")
		out, err := kv.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return out, true
	}
	n := 0
	if target == framework.TargetEtcd {
		db, err := bolt.Open(filepath.Join(dataDir, "member", "snap", "db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("key"))
			if b == nil {
				return errors.New("no key bucket")
			}
			updates := map[string][]byte{}
			if err := b.ForEach(func(k, v []byte) error {
				if nv, ok := rewrite(v); ok {
					updates[string(k)] = nv
				}
				return nil
			}); err != nil {
				return err
			}
			for k, v := range updates {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		b, err := rocksdb.Open(filepath.Join(dataDir, "member", "rocksdb"), rocksdb.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		view := b.ReadView()
		batch := b.NewBatch()
		err = view.Ascend([]byte{'r'}, []byte{'r' + 1}, func(k, v []byte) bool {
			if nv, ok := rewrite(v); ok {
				batch.Put(bytes.Clone(k), nv)
				n++
			}
			return true
		})
		view.Release()
		if err == nil {
			err = batch.Commit()
		}
		if cerr := b.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Fatalf("no revision of %q found in %s", key, dataDir)
	}
}

// TestCorruptionDetected corrupts one follower's copy of a key while it is
// stopped. Restarted with --experimental-initial-corrupt-check it refuses
// to start, its hash differing from its peers'; restarted without, the
// leader's periodic check (--corrupt-check-time) finds the difference
// and raises a CORRUPT alarm, after which the cluster refuses writes with
// "etcdserver: corrupt cluster" while reads go on. MetaStore runs on its
// RocksDB engine here, whose files the test can edit.
func TestCorruptionDetected(t *testing.T) {
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"--corrupt-check-time=1s"}
	if target == framework.TargetMetaStore {
		flags = append(flags, "--storage-engine=rocksdb")
	}
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, ExtraFlags: flags})
	ctx := testContext(t, clusterTestTimeout)
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	victim := others(c.Members(), leader)[0]
	cli := mc.of(t, leader)
	for i := range 3 {
		mustPut(ctx, t, cli, "/corrupt/k", fmt.Sprint("v", i))
	}
	mc.requireSameHashKV(ctx, t, c.Members(), 0)

	victimID := mc.memberID(ctx, t, victim)
	if _, err := victim.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	corruptValue(t, target, victim.DataDir(), "/corrupt/k")

	args := victim.Args()
	victim.SetArgs(append(args, "--experimental-initial-corrupt-check=true"))
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.Exited():
	case <-ctx.Done():
		t.Fatal("a member with corrupted data passed the initial corruption check")
	}
	waitForLog(ctx, t, victim, "found data inconsistency with peers")

	victim.SetArgs(args)
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if hasAlarm(resp.Alarms, victimID, pb.AlarmType_CORRUPT) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no CORRUPT alarm for %x; alarms: %v", victimID, resp.Alarms)
		case <-time.After(pollInterval):
		}
	}
	_, err = cli.Put(ctx, "/corrupt/after", "v")
	var ee rpctypes.EtcdError
	if !errors.As(err, &ee) || ee.Code() != codes.DataLoss || ee.Error() != "etcdserver: corrupt cluster" {
		t.Fatalf("put under a CORRUPT alarm: %v, want etcdserver: corrupt cluster", err)
	}
	if got := mustGet(ctx, t, cli, "/corrupt/k"); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v2" {
		t.Fatalf("read under a CORRUPT alarm: %v", got.Kvs)
	}
}

func hasAlarm(alarms []*pb.AlarmMember, id uint64, alarm pb.AlarmType) bool {
	for _, a := range alarms {
		if a.MemberID == id && a.Alarm == alarm {
			return true
		}
	}
	return false
}
