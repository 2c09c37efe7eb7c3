package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// diskErrorCase is one fault switched on under a put load: the member
// must stop with a log line naming a file under file and the error.
type diskErrorCase struct {
	spec    string
	file    string // the part of the failed file's path the message names
	message string // the error the message names
	rocksdb bool   // only on the RocksDB engine
}

// etcdDiskErrorCase is the case run against etcd, its fsyncs failed by
// strace (stall_test.go): etcd's fatal exit names the error but no file.
var etcdDiskErrorCase = diskErrorCase{spec: "fsync-error", message: "input/output error"}

var diskErrorCases = []diskErrorCase{
	{spec: "fsync-error,only=/member/wal/", file: "/member/wal/", message: "injected fault (fsync-error): input/output error"},
	{spec: "write-error,only=/member/wal/", file: "/member/wal/", message: "injected fault (write-error): input/output error"},
	{spec: "nospace,only=/member/wal/", file: "/member/wal/", message: "injected fault (nospace): no space left on device"},
	// A full disk fails every file at once: whichever the member writes
	// first (the WAL, or on RocksDB the engine's batch in apply) is the
	// one its message names.
	{spec: "nospace", file: "/member/", message: "injected fault (nospace): no space left on device"},
	// A snapshot's file (a marker on RocksDB) is written and fsynced
	// every snapshotCount entries.
	{spec: "fsync-error,only=/member/snap/", file: "/member/snap/", message: "injected fault (fsync-error): input/output error"},
	{spec: "write-error,only=/member/snap/", file: "/member/snap/", message: "injected fault (write-error): input/output error"},
	// The engine's batch write in apply, and its WAL sync when a
	// snapshot makes it durable.
	{spec: "write-error,only=/member/rocksdb/", file: "/member/rocksdb/", message: "injected fault (write-error): input/output error", rocksdb: true},
	{spec: "fsync-error,only=/member/rocksdb/", file: "/member/rocksdb/", message: "injected fault (fsync-error): input/output error", rocksdb: true},
}

// TestDiskErrorStopsTheMember switches failing syncs and writes on at
// runtime, one kind at a time, on the WAL, the snapshot files and the
// RocksDB engine, while a client puts. Each time the member must stop on
// its own with a message naming the file and the error (never carry on
// past a failed fsync or write, PostgreSQL's "fsyncgate" lesson), and,
// restarted on a healthy disk, hold every put it acknowledged. Against
// etcd the fsync case runs, its fsyncs failed by strace: etcd stops
// too, naming the error (but no file), and holds every acknowledged put.
func TestDiskErrorStopsTheMember(t *testing.T) {
	faulter := newFsyncStaller(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, faulter.clusterConfig(framework.ClusterConfig{SnapshotCount: 100}))
	m := c.Member(0)
	cli := m.NewClient(t)
	engine := framework.EngineName()
	cases := diskErrorCases
	if faulter.target != framework.TargetMetaStore {
		cases = []diskErrorCase{etcdDiskErrorCase}
	}
	for i, dc := range cases {
		if dc.rocksdb && engine != "rocksdb" {
			continue
		}
		prefix := fmt.Sprintf("/diskerror/%d/", i)
		t.Run(dc.spec, func(t *testing.T) {
			wctx, stopWrites := context.WithCancel(ctx)
			done := make(chan *acks, 1)
			go func() { done <- writeUntil(wctx, cli, prefix) }()
			var a *acks
			stop := func() {
				if a == nil {
					stopWrites()
					a = <-done
				}
			}
			defer stop()
			logStart := logSize(t, m)
			var heal func()
			if faulter.target == framework.TargetMetaStore {
				heal = setDiskFault(ctx, t, m, dc.spec)
			} else {
				heal = faulter.failFsyncs(ctx, t, m)
			}
			select {
			case <-m.Exited():
			case <-time.After(time.Minute):
				t.Fatalf("the member kept running for a minute with %s", dc.spec)
			}
			stop()
			log := logSince(t, m, logStart)
			if line := failureLine(log, dc); line == "" {
				t.Errorf("the member stopped without a line naming a file under %s and %q; its log:\n%s", dc.file, dc.message, tail(log, 4000))
			} else {
				t.Logf("stopped after %d acknowledged puts: %s", len(a.puts), line)
			}
			heal()
			if err := m.Restart(ctx); err != nil {
				t.Fatalf("restart on a healthy disk: %v", err)
			}
			requireAcked(ctx, t, cli, prefix, a)
		})
		if t.Failed() {
			return
		}
	}
	if _, err := cli.Put(ctx, "/diskerror-after", "x"); err != nil {
		t.Fatalf("write after the last restart: %v", err)
	}
}

// failureLine is the line of log that names a file under dc.file and
// dc.message, "" if none does.
func failureLine(log []byte, dc diskErrorCase) string {
	for _, line := range bytes.Split(log, []byte("\n")) {
		if bytes.Contains(line, []byte(dc.file)) && bytes.Contains(line, []byte(dc.message)) {
			return string(line)
		}
	}
	return ""
}

func logSize(t *testing.T, m *framework.Member) int {
	t.Helper()
	st, err := os.Stat(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Size())
}

func logSince(t *testing.T, m *framework.Member, offset int) []byte {
	t.Helper()
	log, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return log[offset:]
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
