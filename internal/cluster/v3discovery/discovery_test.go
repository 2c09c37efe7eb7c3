package v3discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/embed"
)

// startRegistry starts an in-process one-member MetaStore as the
// registry and returns a client of it.
func startRegistry(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	anyPort := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{anyPort}, []url.URL{anyPort}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{anyPort}, []url.URL{anyPort}
	m, err := embed.StartMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	select {
	case <-m.ReadyNotify():
	case err := <-m.Err():
		t.Fatalf("registry stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("registry not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testConfig(cli *clientv3.Client, token string) Config {
	return Config{
		Client:         clientv3.Config{Endpoints: cli.Endpoints(), Logger: zap.NewNop()},
		Token:          token,
		RequestTimeout: 5 * time.Second,
		Logger:         slog.New(slog.DiscardHandler),
	}
}

func TestJoinClusterOrdersByRegistrationAndRefusesAFullCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cli := startRegistry(t)
	const token = "tok"
	if _, err := cli.Put(ctx, "/_etcd/registry/tok/_config/size", "2"); err != nil {
		t.Fatal(err)
	}
	// A malformed registration is skipped, as etcd skips it.
	if _, err := cli.Put(ctx, "/_etcd/registry/tok/members/bad", "no-equals-sign"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		cluster string
		err     error
	}
	first := make(chan result, 1)
	go func() {
		c, err := JoinCluster(ctx, testConfig(cli, token), 0xa, "a=http://10.0.0.1:2380")
		first <- result{c, err}
	}()
	// The first member waits for the second: wait for its registration.
	for {
		resp, err := cli.Get(ctx, "/_etcd/registry/tok/members/a")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			break
		}
		select {
		case r := <-first:
			t.Fatalf("the first member returned before the second registered: %+v", r)
		case <-ctx.Done():
			t.Fatal("the first member never registered")
		case <-time.After(10 * time.Millisecond): // poll; the deadline is ctx's
		}
	}
	second, err := JoinCluster(ctx, testConfig(cli, token), 0xb, "b=http://10.0.0.2:2380")
	if err != nil {
		t.Fatal(err)
	}
	const want = "a=http://10.0.0.1:2380,b=http://10.0.0.2:2380"
	if second != want {
		t.Errorf("second member's cluster %q, want %q", second, want)
	}
	if r := <-first; r.err != nil || r.cluster != want {
		t.Errorf("first member's cluster %q (%v), want %q", r.cluster, r.err, want)
	}
	// A registered member asking again gets the same answer (a restart
	// during bootstrap); a third is refused.
	if again, err := JoinCluster(ctx, testConfig(cli, token), 0xa, "a=http://10.0.0.1:2380"); err != nil || again != want {
		t.Errorf("first member again: %q %v", again, err)
	}
	if _, err := JoinCluster(ctx, testConfig(cli, token), 0xc, "c=http://10.0.0.3:2380"); !errors.Is(err, ErrFullCluster) {
		t.Errorf("third member: %v, want %v", err, ErrFullCluster)
	}
}

func TestJoinClusterSizeErrorsAreFinal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cli := startRegistry(t)
	if _, err := JoinCluster(ctx, testConfig(cli, "none"), 1, "a=http://10.0.0.1:2380"); !errors.Is(err, ErrSizeNotFound) {
		t.Errorf("no size: %v, want %v", err, ErrSizeNotFound)
	}
	for _, size := range []string{"0", "-1", "three"} {
		token := fmt.Sprintf("bad%s", size)
		if _, err := cli.Put(ctx, "/_etcd/registry/"+token+"/_config/size", size); err != nil {
			t.Fatal(err)
		}
		if _, err := JoinCluster(ctx, testConfig(cli, token), 1, "a=http://10.0.0.1:2380"); !errors.Is(err, ErrBadSizeKey) {
			t.Errorf("size %q: %v, want %v", size, err, ErrBadSizeKey)
		}
	}
}

func TestJoinClusterRetriesUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	cfg := Config{
		// Nothing listens on port 1: every attempt fails and is retried.
		Client:         clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, Logger: zap.NewNop()},
		Token:          "t",
		RequestTimeout: 200 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
	}
	if _, err := JoinCluster(ctx, cfg, 1, "a=http://10.0.0.1:2380"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unreachable registry: %v, want the context's deadline", err)
	}
}
