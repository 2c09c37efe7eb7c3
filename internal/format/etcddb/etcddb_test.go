package etcddb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"go.etcd.io/etcd/api/v3/authpb"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
	"github.com/metastore-io/metastore/internal/memory"
)

// fakeLeases lets puts with any lease through.
type fakeLeases struct{}

func (fakeLeases) LeaseExists(int64) bool { return true }
func (fakeLeases) Attach(int64, []byte)   {}
func (fakeLeases) Detach(int64, []byte)   {}

// sampleStore builds a store with history, a deletion, a compaction, a
// leased key, a lease record and two members (one removed).
func sampleStore(t *testing.T) *kvstore.Store {
	t.Helper()
	kv, err := kvstore.Open(memory.New(), kvstore.Options{Leases: fakeLeases{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	put := func(k, v string, lease int64) {
		if _, err := kv.Put(&pb.PutRequest{Key: []byte(k), Value: []byte(v), Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		put(fmt.Sprintf("key/%02d", i%7), fmt.Sprintf("v%d", i), 0)
	}
	if _, err := kv.DeleteRange(&pb.DeleteRangeRequest{Key: []byte("key/03")}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Compact(10); err != nil {
		t.Fatal(err)
	}
	put("leased", "x", 0x1234)
	kv.PutAux(lease.Bucket, binary.BigEndian.AppendUint64(nil, 0x1234), lease.AppendRecord(nil, lease.Record{ID: 0x1234, TTL: 60}))
	c := membership.New(1, 99)
	c.Add(kv, &membershippb.Member{ID: 0xa1, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://127.0.0.1:2380"}},
		MemberAttributes: &membershippb.Attributes{Name: "m1", ClientUrls: []string{"http://127.0.0.1:2379"}}})
	c.Add(kv, &membershippb.Member{ID: 0xb2, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://127.0.0.1:2381"}}})
	c.Remove(kv, 0xb2)
	alarm, _ := (&pb.AlarmMember{MemberID: 0xa1, Alarm: pb.AlarmType_NOSPACE}).Marshal()
	kv.PutAux(kvstore.BucketAlarm, AlarmRecordKey(0xa1, pb.AlarmType_NOSPACE), alarm)
	kv.SetConsistentIndex(42, 3)
	if _, err := kv.Commit(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// records lists a backend's records of the given buckets as "key=value"
// in hex.
func records(t *testing.T, r kvstore.Reader, buckets ...byte) []string {
	t.Helper()
	var out []string
	if err := r.Ascend(nil, nil, func(k, v []byte) bool {
		if slices.Contains(buckets, k[0]) {
			out = append(out, fmt.Sprintf("%x=%x", k, v))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// saveFile builds the etcd file of kv and writes it as etcdctl would
// save it: the database and its digest.
func saveFile(t *testing.T, kv *kvstore.Store) string {
	t.Helper()
	dir := t.TempDir()
	view := kv.SnapshotView()
	db, err := Build(context.Background(), filepath.Join(dir, "build.db"), view)
	view.Release()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := db.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != db.Size() || int64(buf.Len()) != n || !hasDigest(n) {
		t.Fatalf("wrote %d bytes (buffer %d), announced %d; want whole pages plus a digest", n, buf.Len(), db.Size())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "build.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left the built file: %v", err)
	}
	path := filepath.Join(dir, "snapshot.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTripKeepsEveryRecord(t *testing.T) {
	kv := sampleStore(t)
	path := saveFile(t, kv)
	if err := VerifyDigest(path, false); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != kv.Rev() || st.TotalKey != 7 || st.Version != StorageVersion {
		t.Fatalf("status %+v: want revision %d, 7 keys, version %s", st, kv.Rev(), StorageVersion)
	}

	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := memory.New()
	var reported int64
	ld, err := f.LoadInto(b, func(done, total int64) { reported = done }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if ld.Revision != kv.Rev() || ld.CompactRev != 10 || ld.ScheduledCompactRev != 0 || ld.Leases != 1 || ld.Alarms != 1 || reported != ld.Keys+ld.Leases+ld.Alarms {
		t.Fatalf("loaded %+v (progress %d)", ld, reported)
	}
	view := kv.SnapshotView()
	defer view.Release()
	restored := b.ReadView()
	defer restored.Release()
	want := records(t, view, kvstore.BucketRevision, lease.Bucket, kvstore.BucketAlarm)
	if got := records(t, restored, kvstore.BucketRevision, lease.Bucket, kvstore.BucketAlarm); !slices.Equal(got, want) {
		t.Fatalf("records after the round trip:\n%v\nwant\n%v", got, want)
	}
	kv2, err := kvstore.Open(b, kvstore.Options{Leases: fakeLeases{}})
	if err != nil {
		t.Fatal(err)
	}
	defer kv2.Close()
	if kv2.Rev() != kv.Rev() || kv2.CompactRev() != kv.CompactRev() {
		t.Fatalf("restored store at %d compacted %d, want %d and %d", kv2.Rev(), kv2.CompactRev(), kv.Rev(), kv.CompactRev())
	}
	h1, err1 := kv.HashKV(0)
	h2, err2 := kv2.HashKV(0)
	if err := errors.Join(err1, err2); err != nil || h1 != h2 {
		t.Fatalf("HashKV %+v after the round trip, want %+v (%v)", h2, h1, err)
	}
}

func TestWrittenMetaIsEtcds(t *testing.T) {
	got := writtenMeta(t, sampleStore(t))
	rev10 := string(metaRevValue(10))
	want := map[string]string{
		"meta/consistent_index":      string(binary.BigEndian.AppendUint64(nil, 42)),
		"meta/term":                  string(binary.BigEndian.AppendUint64(nil, 3)),
		"meta/confState":             `{"voters":[161],"auto_leave":false}`,
		"meta/storageVersion":        "3.6.0",
		"meta/scheduledCompactRev":   rev10,
		"meta/finishedCompactRev":    rev10,
		"members/a1":                 `{"id":161,"peerURLs":["http://127.0.0.1:2380"],"name":"m1","clientURLs":["http://127.0.0.1:2379"]}`,
		"members_removed/b2":         "removed",
		"cluster/clusterVersion":     "3.6.0",
		"alarm/\x08\xa1\x01\x10\x01": "",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys, want %d: %q", len(got), len(want), got)
	}
}

// TestWrittenDowngradeIsEtcds: a store downgraded to 3.5 is written in
// etcd 3.5's schema (no storage version) with the cluster version and
// the downgrade job as etcd 3.6 records them.
func TestWrittenDowngradeIsEtcds(t *testing.T) {
	kv := sampleStore(t)
	c := membership.New(1, 99)
	c.SetVersion(kv, "3.5.0")
	c.SetDowngrade(kv, true, "3.5.0")
	if _, err := kv.Commit(); err != nil {
		t.Fatal(err)
	}
	got := writtenMeta(t, kv)
	if v, ok := got["meta/storageVersion"]; ok {
		t.Errorf("meta/storageVersion = %q, want none (etcd 3.5's schema)", v)
	}
	if got["cluster/clusterVersion"] != "3.5.0" || got["cluster/downgrade"] != `{"target-version":"3.5.0","enabled":true}` {
		t.Errorf("cluster bucket %q %q, want 3.5.0 and the enabled job", got["cluster/clusterVersion"], got["cluster/downgrade"])
	}

	// Restored, the file gives the job and the version back.
	back := membership.New(1, 99)
	if err := back.Load(loadFile(t, saveFile(t, kv))); err != nil {
		t.Fatal(err)
	}
	if back.Version() != "3.5.0" || back.Downgrade() != (membership.Downgrade{Enabled: true, TargetVersion: "3.5.0"}) {
		t.Errorf("restored version %q job %+v, want 3.5.0 and the job to 3.5.0", back.Version(), back.Downgrade())
	}
}

// loadFile loads the etcd file at path into a memory store, as a
// restore does, and opens it.
func loadFile(t *testing.T, path string) *kvstore.Store {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := memory.New()
	if _, err := f.LoadInto(b, nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	kv, err := kvstore.Open(b, kvstore.Options{Leases: fakeLeases{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

// writtenMeta saves kv as an etcd file and lists its meta, member,
// cluster and alarm keys as bucket/key -> value.
func writtenMeta(t *testing.T, kv *kvstore.Store) map[string]string {
	t.Helper()
	path := saveFile(t, kv)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	if err := f.view(func(tx *boltTx) error {
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("no bucket %s", name)
			}
		}
		for _, b := range [][]byte{bucketMeta, bucketMembers, bucketMembersRemoved, bucketCluster, bucketAlarm} {
			if err := tx.Bucket(b).ForEach(func(k, v []byte) error {
				got[string(b)+"/"+string(k)] = string(v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestDigestChecks(t *testing.T) {
	path := saveFile(t, sampleStore(t))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := slices.Clone(data)
	damaged[len(damaged)-DigestSize-1] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDigest(bad, false); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "expected sha256") {
		t.Fatalf("damaged file: %v", err)
	}
	if err := VerifyDigest(bad, true); err != nil {
		t.Fatalf("damaged file with --skip-hash-check: %v", err)
	}
	noDigest := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(noDigest, data[:len(data)-DigestSize], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDigest(noDigest, false); err == nil || !strings.Contains(err.Error(), "snapshot missing hash but --skip-hash-check=false") {
		t.Fatalf("file without digest: %v", err)
	}
	if err := VerifyDigest(noDigest, true); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data[:len(data)-DigestSize]); !bytes.Equal(sum[:], data[len(data)-DigestSize:]) {
		t.Fatal("the digest is not the sha256 of the database")
	}
	if ok, err := IsDBFile(path); err != nil || !ok {
		t.Fatalf("IsDBFile = %v, %v", ok, err)
	}
}

func TestDamagedPagesAreErrorsNotPanics(t *testing.T) {
	path := saveFile(t, sampleStore(t))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over every page but the two meta pages, one at a time.
	const page = 4096
	for off := 2 * page; off+page <= len(data)-DigestSize; off += page {
		damaged := slices.Clone(data)
		for i := off; i < off+64; i++ {
			damaged[i] = 0xff
		}
		bad := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(bad, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := Open(bad)
		if err != nil {
			continue // the integrity check found it
		}
		_, err = f.LoadInto(memory.New(), nil, slog.New(slog.DiscardHandler))
		f.Close()
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("page at %d: %v, want ErrCorrupt", off, err)
		}
	}
}

func TestBumpMarkerAndScheduledCompaction(t *testing.T) {
	// A file as etcdutl --bump-revision leaves it: an empty record at the
	// bumped revision and a scheduled, unfinished compaction there.
	kv := sampleStore(t)
	path := saveFile(t, kv)
	raw := path[:len(path)-len(".db")] + ".raw"
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(raw, data[:len(data)-DigestSize], 0o600); err != nil {
		t.Fatal(err)
	}
	bumped := kv.Rev() + 1000
	if err := update(raw, func(tx *boltTx) error {
		if err := tx.Bucket(bucketKey).Put(metaRevValue(bumped), []byte{}); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaScheduledCompact, metaRevValue(bumped))
	}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ld, err := f.LoadInto(memory.New(), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if ld.Revision != bumped || ld.ScheduledCompactRev != bumped || ld.CompactRev != 10 {
		t.Fatalf("loaded %+v, want revision and scheduled compaction %d", ld, bumped)
	}
}

// TestAuthDataRoundTrips: users, roles and the auth switch and revision
// are written to etcd's auth buckets and loaded back unchanged.
func TestAuthDataRoundTrips(t *testing.T) {
	kv := sampleStore(t)
	user, _ := (&authpb.User{Name: []byte("root"), Password: []byte("hash"), Roles: []string{"root"}}).Marshal()
	role, _ := (&authpb.Role{Name: []byte("r"), KeyPermission: []*authpb.Permission{{Key: []byte("k"), PermType: authpb.READ}}}).Marshal()
	records := map[string][]byte{
		"me": {1}, "mr": binary.BigEndian.AppendUint64(nil, 7), "uroot": user, "rr": role,
	}
	for k, v := range records {
		kv.PutAux(kvstore.BucketAuth, []byte(k), v)
	}
	if _, err := kv.Commit(); err != nil {
		t.Fatal(err)
	}
	path := saveFile(t, kv)
	data, _ := os.ReadFile(path)
	raw := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(raw, data[:len(data)-DigestSize], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := update(raw, func(tx *boltTx) error {
		for _, c := range []struct{ bucket, key, want []byte }{
			{bucketAuth, authEnabledKey, []byte{1}},
			{bucketAuth, []byte("authRevision"), records["mr"]},
			{bucketAuthUsers, []byte("root"), user},
			{bucketAuthRoles, []byte("r"), role},
		} {
			if got := tx.Bucket(c.bucket).Get(c.key); !bytes.Equal(got, c.want) {
				t.Errorf("etcd %s/%s = %x, want %x", c.bucket, c.key, got, c.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	loaded := loadFile(t, raw)
	got := map[string][]byte{}
	if err := loaded.AscendAux(kvstore.BucketAuth, func(k, v []byte) bool {
		got[string(k)] = bytes.Clone(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(records) {
		t.Fatalf("loaded auth records %q, want %q", got, records)
	}
	for k, v := range records {
		if !bytes.Equal(got[k], v) {
			t.Errorf("loaded %q = %x, want %x", k, got[k], v)
		}
	}
}
