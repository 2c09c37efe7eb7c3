package v3discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// registryPrefix is where etcd's v3 discovery keeps its registrations.
const registryPrefix = "/_etcd/registry"

// Errors with etcd's messages.
var (
	ErrSizeNotFound = errors.New("discovery: size key not found")
	ErrBadSizeKey   = errors.New("discovery: size key is bad")
	ErrFullCluster  = errors.New("discovery: cluster is full")
)

// Backoff bounds between attempts that failed to reach the registry.
const (
	firstBackoff = 2 * time.Second
	maxBackoff   = 256 * time.Second
)

// Config says where the registry is and which cluster to join.
type Config struct {
	// Client reaches the registry (endpoints, TLS, credentials, timeouts).
	Client clientv3.Config
	// Token names the cluster being bootstrapped inside the registry.
	Token string
	// RequestTimeout bounds each request to the registry.
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// registration is one member's entry in the registry.
type registration struct {
	key       string
	peers     string // name=peerURL[,name=peerURL]
	createRev int64
}

// JoinCluster registers the member id, whose own initial-cluster entry is
// self ("name=peerURL,..."), under cfg.Token and returns the cluster's
// initial-cluster string once every member has registered.
func JoinCluster(ctx context.Context, cfg Config, id uint64, self string) (string, error) {
	cli, err := clientv3.New(cfg.Client)
	if err != nil {
		return "", fmt.Errorf("discovery: connect to %v: %w", cfg.Client.Endpoints, err)
	}
	defer cli.Close()
	j := &joiner{cfg: cfg, cli: cli, log: cfg.Logger.With("discovery-token", cfg.Token,
		"discovery-endpoints", strings.Join(cfg.Client.Endpoints, ","))}
	j.selfKey = path.Join(registryPrefix, cfg.Token, "members", strconv.FormatUint(id, 16))

	if _, _, _, err := j.check(ctx); err != nil {
		return "", err
	}
	if err := retry(ctx, j.log, "register member itself", func() error {
		rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel()
		_, err := cli.Put(rctx, j.selfKey, self)
		return err
	}); err != nil {
		return "", err
	}
	j.log.Info("register member itself successfully", "memberKey", j.selfKey, "memberInfo", self)
	members, size, rev, err := j.check(ctx)
	if err != nil {
		return "", err
	}
	if len(members) < size {
		if members, err = j.waitPeers(ctx, members, size, rev); err != nil {
			return "", err
		}
	}
	peers := make([]string, 0, size)
	for _, m := range members[:size] {
		peers = append(peers, m.peers)
	}
	cluster := strings.Join(peers, ",")
	j.log.Info("discovery joined cluster successfully", "cluster", cluster)
	return cluster, nil
}

type joiner struct {
	cfg     Config
	cli     *clientv3.Client
	log     *slog.Logger
	selfKey string
}

func (j *joiner) membersPrefix() string {
	return path.Join(registryPrefix, j.cfg.Token, "members")
}

// check reads the size and the registrations (ordered by creation) and
// refuses a full cluster that does not count this member among its first
// size registrations.
func (j *joiner) check(ctx context.Context) (members []registration, size int, rev int64, err error) {
	err = retry(ctx, j.log, "cluster status check", func() error {
		var rerr error
		size, rerr = j.size(ctx)
		if rerr != nil {
			return rerr
		}
		members, rev, rerr = j.members(ctx)
		return rerr
	})
	if err != nil {
		return nil, 0, 0, err
	}
	for i, m := range members {
		if m.key == j.selfKey {
			break
		}
		if i >= size-1 {
			return nil, 0, 0, ErrFullCluster
		}
	}
	return members, size, rev, nil
}

// size reads the cluster size; a missing or bad size is final
// (permanent), not retried.
func (j *joiner) size(ctx context.Context) (int, error) {
	key := path.Join(registryPrefix, j.cfg.Token, "_config", "size")
	rctx, cancel := context.WithTimeout(ctx, j.cfg.RequestTimeout)
	defer cancel()
	resp, err := j.cli.Get(rctx, key)
	if err != nil {
		j.log.Warn("failed to get cluster size from discovery service", "clusterSizeKey", key, "error", err)
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, permanent{ErrSizeNotFound}
	}
	n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 0)
	if err != nil || n <= 0 {
		return 0, permanent{ErrBadSizeKey}
	}
	return int(n), nil
}

func (j *joiner) members(ctx context.Context) ([]registration, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, j.cfg.RequestTimeout)
	defer cancel()
	resp, err := j.cli.Get(rctx, j.membersPrefix(), clientv3.WithPrefix())
	if err != nil {
		j.log.Warn("failed to get cluster members from discovery service", "membersKeyPrefix", j.membersPrefix(), "error", err)
		return nil, 0, err
	}
	var members []registration
	for _, kv := range resp.Kvs {
		members = j.add(members, string(kv.Key), string(kv.Value), kv.CreateRevision)
	}
	return members, resp.Header.Revision, nil
}

// add records a registration, keeping members ordered by creation;
// malformed or duplicate ones are logged and skipped, as etcd does.
func (j *joiner) add(members []registration, key, value string, rev int64) []registration {
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	switch {
	case !strings.HasPrefix(key, j.membersPrefix()):
		j.log.Warn("invalid peer registry key", "memberKey", key, "memberInfo", value)
		return members
	case !strings.ContainsRune(value, '='):
		j.log.Warn("invalid peer info returned from discovery service", "memberKey", key, "memberInfo", value)
		return members
	case slices.ContainsFunc(members, func(m registration) bool { return m.key == key }):
		j.log.Warn("found duplicate peer from discovery service", "memberKey", key, "memberInfo", value)
		return members
	}
	j.log.Info("found peer from discovery service", "memberKey", key, "memberInfo", value)
	members = append(members, registration{key: key, peers: value, createRev: rev})
	slices.SortStableFunc(members, func(a, b registration) int { return cmp.Compare(a.createRev, b.createRev) })
	return members
}

// waitPeers watches the registrations after rev until size members are
// known.
func (j *joiner) waitPeers(ctx context.Context, members []registration, size int, rev int64) ([]registration, error) {
	j.log.Info("waiting for peers from discovery service", "clusterSize", size, "found-peers", len(members))
	for len(members) < size {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wresp := range j.cli.Watch(wctx, j.membersPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := wresp.Err(); err != nil {
				j.log.Warn("watch of the discovery service's members ended", "error", err)
				break
			}
			for _, ev := range wresp.Events {
				// Only a key's creation is a registration: etcd passes
				// every event to its add, which then rejects a rewrite as
				// a duplicate and a deletion as invalid peer info.
				if ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision == ev.Kv.ModRevision {
					members = j.add(members, string(ev.Kv.Key), string(ev.Kv.Value), ev.Kv.CreateRevision)
				}
				rev = ev.Kv.ModRevision
			}
			if len(members) >= size {
				break
			}
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(members) < size {
			// The watch ended (compacted, lost leader): read again.
			var err error
			if members, _, rev, err = j.check(ctx); err != nil {
				return nil, err
			}
		}
	}
	j.log.Info("found all needed peers from discovery service", "clusterSize", size, "found-peers", len(members))
	return members, nil
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry runs op until it succeeds, fails permanently or ctx ends, waiting
// a doubling backoff between attempts.
func retry(ctx context.Context, log *slog.Logger, step string, op func() error) error {
	backoff := firstBackoff
	for {
		err := op()
		var p permanent
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return p.error
		case ctx.Err() != nil:
			return ctx.Err()
		}
		log.Warn("retry connecting to discovery service", "reason", step, "backoff", backoff, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
