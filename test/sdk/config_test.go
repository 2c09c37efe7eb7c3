package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/config"
	"github.com/metastore-io/metastore/test/framework"
)

// limits is the configuration type of the tests.
type limits struct {
	MaxConns int
	Mode     string
}

func validLimits(l limits) error {
	if l.MaxConns <= 0 {
		return fmt.Errorf("MaxConns %d must be positive", l.MaxConns)
	}
	return nil
}

// TestConfig runs the config store and manager against both servers.
func TestConfig(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("GetSetCompareAndSet", func(t *testing.T) { t.Parallel(); testConfigGetSetCAS(t, e) })
		t.Run("WatchInOrder", func(t *testing.T) { t.Parallel(); testConfigWatchInOrder(t, e) })
		t.Run("ManagerKeepsLastGood", func(t *testing.T) { t.Parallel(); testManagerKeepsLastGood(t, e) })
	})
}

func testConfigGetSetCAS(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	store := config.NewStore[limits](e.newClient(t), keyPrefix(t)+"/", nil)
	if _, err := store.Get(ctx, "db"); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Get of a missing entry = %v, want ErrNotFound", err)
	}
	v1, err := store.CompareAndSet(ctx, "db", 0, limits{MaxConns: 10})
	if err != nil || v1.Version != 1 {
		t.Fatalf("create with CompareAndSet(0) = %+v, %v; want version 1", v1, err)
	}
	cur, err := store.CompareAndSet(ctx, "db", 0, limits{MaxConns: 11})
	if !errors.Is(err, config.ErrVersionMismatch) || cur.Version != 1 || cur.Value.MaxConns != 10 {
		t.Fatalf("CompareAndSet(0) on an existing entry = %+v, %v; want mismatch reporting version 1", cur, err)
	}
	v2, err := store.Set(ctx, "db", limits{MaxConns: 20, Mode: "rw"})
	if err != nil || v2.Version != 2 || v2.Revision <= v1.Revision {
		t.Fatalf("Set = %+v, %v; want version 2 at a later revision", v2, err)
	}
	if _, err := store.CompareAndSet(ctx, "db", 1, limits{MaxConns: 30}); !errors.Is(err, config.ErrVersionMismatch) {
		t.Fatalf("CompareAndSet with a stale version = %v, want ErrVersionMismatch", err)
	}
	v3, err := store.CompareAndSet(ctx, "db", 2, limits{MaxConns: 30})
	if err != nil || v3.Version != 3 {
		t.Fatalf("CompareAndSet with the current version = %+v, %v", v3, err)
	}
	got, err := store.Get(ctx, "db")
	if err != nil || got != v3 {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, v3)
	}
	if err := store.Delete(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "db"); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
}

// nextUpdate receives one update or fails at the deadline.
func nextUpdate[T any](ctx context.Context, t *testing.T, updates <-chan config.Update[T]) config.Update[T] {
	t.Helper()
	select {
	case u, ok := <-updates:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return u
	case <-ctx.Done():
		t.Fatalf("waiting for a config update: %v", ctx.Err())
	}
	panic("unreachable")
}

// testConfigWatchInOrder: Watch starts with the current value, then
// delivers every write in order, undecodable bytes as an error, and
// deletes.
func testConfigWatchInOrder(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	store := config.NewStore[limits](cli, keyPrefix(t)+"/", nil)
	if _, err := store.Set(ctx, "svc", limits{MaxConns: 1}); err != nil {
		t.Fatal(err)
	}
	updates := store.Watch(ctx, "svc")
	if u := nextUpdate(ctx, t, updates); u.Value.Value.MaxConns != 1 || u.Version != 1 {
		t.Fatalf("first update = %+v, want the current value", u)
	}
	const writes = 20
	go func() {
		for i := 2; i <= writes; i++ {
			if _, err := store.Set(ctx, "svc", limits{MaxConns: i}); err != nil {
				return // the receiving side times out and reports
			}
		}
		cli.Put(ctx, store.Key("svc"), "not json")
		store.Delete(ctx, "svc")
	}()
	last := int64(0)
	for i := 2; i <= writes; i++ {
		u := nextUpdate(ctx, t, updates)
		if u.Err != nil || u.Value.Value.MaxConns != i || u.Version != int64(i) || u.Revision <= last {
			t.Fatalf("update %d = %+v, want MaxConns %d version %d after revision %d", i, u, i, i, last)
		}
		last = u.Revision
	}
	if u := nextUpdate(ctx, t, updates); u.Err == nil || u.Revision <= last {
		t.Fatalf("update for undecodable bytes = %+v, want an error", u)
	}
	if u := nextUpdate(ctx, t, updates); !u.Deleted {
		t.Fatalf("update for the delete = %+v, want Deleted", u)
	}
}

// warnings is a slog handler that forwards every record's message, so a
// test can wait for the Manager to reject a value.
type warnings chan string

func (w warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	w <- r.Message
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// testManagerKeepsLastGood: the Manager starts on its fallback, takes valid
// values, and keeps the last good one across invalid, undecodable and
// deleted values.
func testManagerKeepsLastGood(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	store := config.NewStore[limits](cli, keyPrefix(t)+"/", nil)
	changes := make(chan config.Value[limits], 10)
	rejected := make(warnings, 10)
	m, err := config.NewManager(ctx, config.ManagerConfig[limits]{
		Store:    store,
		Name:     "svc",
		Validate: validLimits,
		Fallback: &limits{MaxConns: 1, Mode: "fallback"},
		OnChange: func(_, cur config.Value[limits]) { changes <- cur },
		Logger:   slog.New(rejected),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Current().Mode != "fallback" || !errors.Is(m.LastError(), config.ErrNotFound) {
		t.Fatalf("Current = %+v, LastError = %v; want the fallback because the entry is missing", m.Current(), m.LastError())
	}
	awaitChange := func(want int) {
		t.Helper()
		select {
		case v := <-changes:
			if v.Value.MaxConns != want || m.Current().MaxConns != want {
				t.Fatalf("change to %+v (Current %+v), want MaxConns %d", v, m.Current(), want)
			}
		case <-ctx.Done():
			t.Fatalf("waiting for MaxConns %d: %v", want, ctx.Err())
		}
	}
	awaitRejection := func(what string) {
		t.Helper()
		select {
		case <-rejected:
		case <-ctx.Done():
			t.Fatalf("waiting for the Manager to reject %s: %v", what, ctx.Err())
		}
		if m.Current().MaxConns != 5 || m.LastError() == nil {
			t.Fatalf("after %s: Current = %+v, LastError = %v; want the last good value and an error", what, m.Current(), m.LastError())
		}
	}
	if _, err := store.Set(ctx, "svc", limits{MaxConns: 5}); err != nil {
		t.Fatal(err)
	}
	awaitChange(5)
	if m.LastError() != nil {
		t.Fatalf("LastError after a valid value = %v", m.LastError())
	}
	if _, err := store.Set(ctx, "svc", limits{MaxConns: -1}); err != nil {
		t.Fatal(err)
	}
	awaitRejection("an invalid value")
	if _, err := cli.Put(ctx, store.Key("svc"), "{broken"); err != nil {
		t.Fatal(err)
	}
	awaitRejection("undecodable bytes")
	if err := store.Delete(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	awaitRejection("a delete")
	if _, err := store.Set(ctx, "svc", limits{MaxConns: 7}); err != nil {
		t.Fatal(err)
	}
	awaitChange(7)
	if snap := m.Snapshot(); snap.Version != 1 || snap.Value.MaxConns != 7 {
		t.Fatalf("Snapshot = %+v, want version 1 of the recreated entry", snap)
	}
}

// TestConfigAcrossRestart: while the server is down the Manager keeps its
// last good value; after the restart the watch resumes without a gap and
// the Manager catches up. Its own cluster per target: it kills the member.
func TestConfigAcrossRestart(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		ctx := testContext(t, scenarioTimeout)
		store := config.NewStore[limits](e.newClient(t), "/sdk/restart/", nil)
		updates := store.Watch(ctx, "svc")
		changes := make(chan config.Value[limits], 10)
		m, err := config.NewManager(ctx, config.ManagerConfig[limits]{
			Store:    store,
			Name:     "svc",
			Validate: validLimits,
			Fallback: &limits{MaxConns: 1},
			OnChange: func(_, cur config.Value[limits]) { changes <- cur },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for i := 1; i <= 3; i++ {
			if _, err := store.Set(ctx, "svc", limits{MaxConns: i}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i <= 3; i++ {
			if u := nextUpdate(ctx, t, updates); u.Value.Value.MaxConns != i {
				t.Fatalf("update %d before the restart = %+v", i, u)
			}
			<-changes
		}

		member := e.cluster.Member(0)
		if _, err := member.Kill(); err != nil {
			t.Fatal(err)
		}
		downCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = store.Get(downCtx, "svc")
		cancel()
		if err == nil {
			t.Fatal("Get succeeded with the server down")
		}
		if got := m.Current().MaxConns; got != 3 {
			t.Fatalf("Current with the server down = %d, want the last good 3", got)
		}
		if err := member.Restart(ctx); err != nil {
			t.Fatal(err)
		}

		for i := 4; i <= 6; i++ {
			if _, err := store.Set(ctx, "svc", limits{MaxConns: i}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 4; i <= 6; i++ {
			if u := nextUpdate(ctx, t, updates); u.Value.Value.MaxConns != i || u.Resynced {
				t.Fatalf("update %d after the restart = %+v, want MaxConns %d, no gap", i, u, i)
			}
		}
		for m.Current().MaxConns != 6 {
			select {
			case <-changes:
			case <-ctx.Done():
				t.Fatalf("Manager stuck at %+v after the restart", m.Current())
			}
		}
	})
}
