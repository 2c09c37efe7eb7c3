package lockservice

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/pkg/lockclient"
)

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
