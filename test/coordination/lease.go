package coordination

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// probeTTL is the probe lease's TTL, in seconds.
	probeTTL = 5
	// probeCheckTimeout bounds the look at the lease after the fault is
	// healed: a leader election and one round trip, on a loaded box.
	probeCheckTimeout = 15 * time.Second
)

// withLeaseProbe runs inject (a fault on the leader) while a plain lease
// of probeTTL is kept alive with clientv3's KeepAlive through follower,
// then records whether the lease still exists: renewals through a
// follower must carry it over a frozen or cut-off leader, since the
// others elect a new leader, which gives every lease a whole TTL.
func withLeaseProbe(ctx context.Context, e *Env, fault string, follower *framework.Member, inject func() error) error {
	cli := e.Client(follower)
	grantCtx, cancel := context.WithTimeout(ctx, RequestTimeout)
	grant, err := cli.Grant(grantCtx, probeTTL)
	cancel()
	if err != nil {
		// Not the fault's doing: it is not injected yet.
		return fmt.Errorf("lease probe: grant through %s: %w", follower.Name(), err)
	}
	kaCtx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	responses, err := cli.KeepAlive(kaCtx, grant.ID)
	if err != nil {
		return fmt.Errorf("lease probe: keep-alive through %s: %w", follower.Name(), err)
	}
	var closedEarly atomic.Bool
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range responses {
		}
		closedEarly.Store(kaCtx.Err() == nil)
	}()

	injectErr := inject()
	probe := LeaseProbe{Fault: fault, Member: follower.Name()}
	probe.Survived, probe.Detail = leaseAlive(ctx, e, cli, grant.ID)
	probe.At = time.Now()
	stopKeepAlive()
	<-drained
	if closedEarly.Load() {
		probe.Survived = false
		probe.Detail += "; the client's keep-alive gave up during the fault"
	}
	e.Hist.AddProbe(probe)
	revokeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTimeout)
	defer cancel()
	_, _ = cli.Revoke(revokeCtx, grant.ID) // an expired probe is already gone
	e.T.Logf("lease probe through %s across %s: survived=%v (%s)", follower.Name(), fault, probe.Survived, probe.Detail)
	return injectErr
}

// leaseAlive asks, once a leader is agreed, how long the lease has left.
func leaseAlive(ctx context.Context, e *Env, cli *clientv3.Client, id clientv3.LeaseID) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, probeCheckTimeout)
	defer cancel()
	if _, _, err := e.Leader(ctx); err != nil {
		return false, fmt.Sprintf("could not look: %v", err)
	}
	for {
		ttl, err := cli.TimeToLive(ctx, id)
		switch {
		case err == nil && ttl.TTL > 0:
			return true, fmt.Sprintf("%d s left", ttl.TTL)
		case err == nil:
			return false, "the lease expired"
		case ctx.Err() != nil:
			return false, fmt.Sprintf("could not look: %v", err)
		}
		pause(ctx, 100*time.Millisecond)
	}
}
