package lockservice

import (
	"fmt"
	"net/http"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// busy answers a NoWait request that cannot have the lock at once: 409
// busy with the position of the place it would have to wait in.
//
// NoWait never changes a place the node already has (Claim leaves an
// existing key as it is), whether it is queued there or holds the lock
// with it: the request that owns the place keeps it and is not told
// "superseded". The answer then also carries the place's token, and the
// position is 0 when the node is the holder. This is etcd's TryLock seen
// from another session (ErrLocked, the holder's key untouched) rather
// than a plain /lock's take-over: a probe must not move or end the place
// it asks about. A fresh place made for the probe goes with the request's
// lease when the handler returns.
func (c *contender) busy(w http.ResponseWriter) {
	ev := lockapi.Event{Status: lockapi.StatusBusy, Position: c.place.Ahead,
		Error: fmt.Sprintf("%s is held by another node", c.name)}
	if c.place.Existed {
		ev.Token = c.place.Rev
		ev.Error = fmt.Sprintf("node %q is already queued for %s on another request, %d ahead; NoWait leaves that place as it is",
			c.node, c.name, c.place.Ahead)
		if c.place.Ahead == 0 {
			ev.Error = fmt.Sprintf("node %q already holds %s on another request; NoWait leaves it held there", c.node, c.name)
		}
	}
	c.s.metrics.failed.WithLabelValues("409").Inc()
	writeJSON(w, http.StatusConflict, ev)
}
