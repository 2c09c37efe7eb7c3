package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/test/testutil"
)

// Filling the quota raises this member's NOSPACE alarm through Raft; puts
// then fail while deletes and compactions work; the alarm survives a
// restart (memory engine: rebuilt from the snapshot and the WAL) and, once
// disarmed after the space is reclaimed, puts work again.
func TestNoSpaceAlarmSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.QuotaBackendBytes = 20_000
	s := startServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	value := bytes.Repeat([]byte("x"), 1000)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = s.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: value})
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("filling the quota: %v, want ErrNoSpace", err)
	}
	want := []*pb.AlarmMember{{MemberID: s.ID(), Alarm: pb.AlarmType_NOSPACE}}
	requireAlarms(t, s, want)
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("small"), Value: []byte("v")}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("put under NOSPACE: %v", err)
	}
	if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("lease grant under NOSPACE: %v", err)
	}
	s.Stop()

	cfg.Backend = memory.New()
	s = startServer(t, cfg)
	defer s.Stop()
	requireAlarms(t, s, want)
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: s.Rev()}); err != nil {
		t.Fatalf("compact under NOSPACE: %v", err)
	}
	resp, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: s.ID(), Alarm: pb.AlarmType_NOSPACE})
	if err != nil || len(resp.Alarms) != 1 {
		t.Fatalf("disarm: %v %v", resp, err)
	}
	requireAlarms(t, s, nil)
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("small"), Value: []byte("v")}); err != nil {
		t.Fatalf("put after disarm: %v", err)
	}
}

func requireAlarms(t *testing.T, s *Server, want []*pb.AlarmMember) {
	t.Helper()
	got := s.Alarms()
	if len(got) != len(want) {
		t.Fatalf("alarms %v, want %v", got, want)
	}
	for i := range got {
		if got[i].MemberID != want[i].MemberID || got[i].Alarm != want[i].Alarm {
			t.Fatalf("alarms %v, want %v", got, want)
		}
	}
}

// slowCompactor is a memory engine whose Compact (defragmentation) runs
// until released.
type slowCompactor struct {
	*memory.Backend
	release chan struct{}
}

func (b slowCompactor) Compact() error {
	<-b.release
	return nil
}

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer = testutil.SyncBuffer

// A defragmentation that takes a while logs that it is in progress.
func TestDefragmentLogsProgress(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	engine := slowCompactor{Backend: memory.New(), release: make(chan struct{})}
	cfg.Backend = engine
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s := startServer(t, cfg)
	defer s.Stop()
	s.defragLogEvery = 10 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- s.Defragment(context.Background()) }()
	deadline := time.After(testTimeout)
	for !strings.Contains(logs.String(), "defragment in progress") {
		select {
		case <-deadline:
			t.Fatalf("no progress line while defragmenting:\n%s", logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(engine.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "finished defragment") {
		t.Fatalf("no closing line:\n%s", logs.String())
	}
}
