package lockservice

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

// testColonNames: a ':' inside Type or ResourceID does not make two names
// one lock: ("a:b", "c") and ("a", "b:c") are independent, and each
// status lists only its own holder.
func testColonNames(t *testing.T, ctx context.Context, s *service) {
	first := s.lock(ctx, "colon:a", "b", "n1")
	second, err := s.client.Lock(ctx, lockclient.Request{Type: "colon", ResourceID: "a:b", NodeID: "n2", NoWait: true})
	if err != nil {
		t.Fatalf("colon:a/b is held; colon/a:b, another name, was refused: %v", err)
	}
	for _, c := range []struct{ typ, resource, holder string }{{"colon:a", "b", "n1"}, {"colon", "a:b", "n2"}} {
		st := s.status(ctx, c.typ, c.resource)
		if st.Holder == nil || st.Holder.NodeID != c.holder || len(st.Waiters) != 0 {
			t.Errorf("status of (%q, %q): %+v, want holder %s alone", c.typ, c.resource, st, c.holder)
		}
	}
	unlock(t, ctx, second)
	unlock(t, ctx, first)
}

// testNoWaitKeepsQueuedPlace: a NoWait request by a node that is already
// queued answers 409 with that place's position and leaves the place to
// the request that owns it, which later gets the lock.
func testNoWaitKeepsQueuedPlace(t *testing.T, ctx context.Context, s *service) {
	holder := s.lock(ctx, "probe", "r", "h")
	queued := s.rawLock(ctx, "probe", "r", "w")
	if ev := queued.expect(t, lockapi.StatusQueued); ev.Position != 1 {
		t.Fatalf("queued at %d, want 1", ev.Position)
	}
	_, err := s.client.Lock(ctx, lockclient.Request{Type: "probe", ResourceID: "r", NodeID: "w", NoWait: true})
	var status *lockclient.StatusError
	if !asStatus(err, &status) || status.Code != 409 || status.Position != 1 {
		t.Fatalf("NoWait by the queued node: %v, want 409 at position 1", err)
	}
	if st := s.status(ctx, "probe", "r"); len(st.Waiters) != 1 || st.Waiters[0].NodeID != "w" {
		t.Fatalf("after the NoWait probe: %+v, want w still queued", st)
	}
	unlock(t, ctx, holder)
	if ev := queued.next(t); ev.Status != lockapi.StatusAcquired {
		t.Fatalf("the queued request got %+v, want acquired", ev)
	}
	code, body := s.post(ctx, lockapi.PathUnlock, `{"Type":"probe","ResourceID":"r","NodeID":"w","Success":true}`)
	if code != 200 {
		t.Fatalf("unlock: %d %s", code, body)
	}
	queued.expect(t, lockapi.StatusReleased)
}

// testNoWaitByHolder: a NoWait request by the node that holds the lock
// answers 409 at position 0 with the holder's token and changes nothing:
// the holding request keeps the lock (it is not superseded) and releases
// it with that token.
func testNoWaitByHolder(t *testing.T, ctx context.Context, s *service) {
	holder := s.rawLock(ctx, "probe-held", "r", "h")
	ev := holder.expect(t, lockapi.StatusAcquired)
	// A NoWait answer is one transaction; 10 s is far above it on a loaded
	// box and bounds the read should the service answer with a stream.
	probeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, body := s.post(probeCtx, lockapi.PathLock, `{"Type":"probe-held","ResourceID":"r","NodeID":"h","NoWait":true}`)
	if code != 409 || !strings.Contains(body, `"busy"`) || !strings.Contains(body, fmt.Sprintf(`"token":%d`, ev.Token)) {
		t.Fatalf("NoWait by the holder: %d %s, want 409 busy with token %d", code, body, ev.Token)
	}
	code, body = s.post(ctx, lockapi.PathUnlock,
		fmt.Sprintf(`{"Type":"probe-held","ResourceID":"r","NodeID":"h","Success":true,"Token":%d}`, ev.Token))
	if code != 200 {
		t.Fatalf("unlock with the token: %d %s", code, body)
	}
	holder.expect(t, lockapi.StatusReleased) // not superseded
}

// TestLockServiceLegacyQueueKeys: during a rolling upgrade, members from
// before the ':' escape keep a name with ':' in Type or ResourceID in the
// queue /metastore/lockservice/<Type>:<ResourceID>/ with ':' unescaped.
// A key there (put here by hand, as such a member puts it) holds both
// names that map to it for the new members too, and the keys the new
// members create lie inside that range, so the old members see them.
// Among new members, the two names stay independent.
func TestLockServiceLegacyQueueKeys(t *testing.T) {
	requireMetaStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cluster := framework.NewCluster(t, framework.ClusterConfig{})
	s := newService(t, cluster, cluster.Member(0))
	cli := cluster.Member(0).NewClient(t)
	const legacy = "/metastore/lockservice/mixed:a:b/"
	grant, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, legacy+"old", "old", clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	for _, name := range [][2]string{{"mixed:a", "b"}, {"mixed", "a:b"}} {
		_, err := s.client.Lock(ctx, lockclient.Request{Type: name[0], ResourceID: name[1], NodeID: "new", NoWait: true})
		var status *lockclient.StatusError
		if !asStatus(err, &status) || status.Code != 409 || status.Position != 1 {
			t.Fatalf("(%q, %q) while an old member's key holds it: %v, want 409 at position 1", name[0], name[1], err)
		}
		if st := s.status(ctx, name[0], name[1]); st.Holder == nil || st.Holder.NodeID != "old" {
			t.Fatalf("status of (%q, %q): %+v, want the old member's holder", name[0], name[1], st)
		}
	}
	w := s.enqueue(ctx, "mixed:a", "b", "w")
	if _, err := cli.Revoke(ctx, grant.ID); err != nil {
		t.Fatal(err)
	}
	held := w.acquired(t, ctx)
	// What an old member reads for either name: the whole legacy range,
	// whose first key is the new holder's.
	first, err := cli.Get(ctx, legacy, clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Kvs) != 1 || first.Kvs[0].CreateRevision != held.Token() {
		t.Fatalf("an old member's view of %s: %v, want the new holder's key (token %d) first", legacy, first.Kvs, held.Token())
	}
	other, err := s.client.Lock(ctx, lockclient.Request{Type: "mixed", ResourceID: "a:b", NodeID: "n2", NoWait: true})
	if err != nil {
		t.Fatalf("(mixed, a:b) while (mixed:a, b) is held by a new member: %v, want it free", err)
	}
	unlock(t, ctx, other)
	unlock(t, ctx, held)
}
