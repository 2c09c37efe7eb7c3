package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const (
	// opTimeout bounds one operation; longer ones count as unknown.
	opTimeout = 2 * time.Second
	// keyCount keys are shared by all clients: few enough to collide often,
	// enough for the per-key histories to stay cheap to check.
	keyCount = 8
)

// client runs random operations against one member.
type client struct {
	id   int
	conn *grpc.ClientConn
	kv   pb.KVClient
	rng  *rand.Rand
	hist *history
	// seen remembers the last value this client read or wrote per key: a
	// CAS expects it, so that swaps succeed often enough to matter.
	seen   map[string]string
	writes int
	// clusterID is the cluster's ID, read at the start: a response
	// carrying another one came from a foreign server that took a killed
	// member's port, and is no event of this cluster's history.
	clusterID uint64
	// foreign counts such responses.
	foreign int
}

func newClient(id int, endpoint string, clusterID, seed uint64, hist *history) (*client, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("client %d: dial %s: %w", id, endpoint, err)
	}
	return &client{
		id:   id,
		conn: conn,
		kv:   pb.NewKVClient(conn),
		rng:  rand.New(rand.NewPCG(seed, uint64(id))),
		hist: hist,
		seen: map[string]string{},

		clusterID: clusterID,
	}, nil
}

// fromForeign reports (and counts) a response from another cluster's
// server. Such an operation did not reach this cluster: it failed, with a
// known outcome (nothing happened here), and is left out of the history.
func (c *client) fromForeign(h *pb.ResponseHeader) bool {
	if h.GetClusterId() == c.clusterID {
		return false
	}
	c.foreign++
	return true
}

func (c *client) close() { c.conn.Close() }

// run issues operations until ctx ends. After a failure the client backs
// off for failureBackoff, as a real client would, rather than flooding a
// dead member with requests that fail at once.
func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		key := fmt.Sprintf("/lin/k%d", c.rng.IntN(keyCount))
		var ok bool
		switch r := c.rng.IntN(10); {
		case r < 5:
			ok = c.get(ctx, key)
		case r < 8:
			ok = c.put(ctx, key)
		default:
			ok = c.cas(ctx, key)
		}
		if !ok {
			sleepCtx(ctx, failureBackoff)
		}
	}
}

// failureBackoff is how long a client waits after a failed operation.
const failureBackoff = 100 * time.Millisecond

// outcome classifies a write's error: nil succeeded; an error that shows
// the request never reached a server (no connection) did not happen;
// anything else (a timeout, a leader change, a member dying mid-request)
// may or may not have taken effect.
func outcome(err error) (failed, unknown bool) {
	if err == nil {
		return false, false
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		msg := st.Message()
		if strings.Contains(msg, "connection refused") || strings.Contains(msg, "Error while dialing") {
			return true, false
		}
	}
	return true, true
}

// nextValue is a value no other write uses.
func (c *client) nextValue() string {
	c.writes++
	return fmt.Sprintf("c%d-%d", c.id, c.writes)
}

func (c *client) get(ctx context.Context, key string) bool {
	in := input{kind: opGet, key: key}
	call := c.hist.now()
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := c.kv.Range(octx, &pb.RangeRequest{Key: []byte(key)})
	cancel()
	ret := c.hist.now()
	if err != nil || c.fromForeign(resp.Header) {
		return false // a failed read changed nothing
	}
	out := output{rev: resp.Header.GetRevision()}
	if len(resp.Kvs) == 1 {
		out.value = string(resp.Kvs[0].Value)
	}
	c.seen[key] = out.value
	c.hist.add(c.id, in, out, call, ret)
	return true
}

func (c *client) put(ctx context.Context, key string) bool {
	in := input{kind: opPut, key: key, value: c.nextValue()}
	call := c.hist.now()
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := c.kv.Put(octx, &pb.PutRequest{Key: []byte(key), Value: []byte(in.value)})
	cancel()
	ret := c.hist.now()
	if err == nil && c.fromForeign(resp.Header) {
		return false
	}
	failed, unknown := outcome(err)
	if !failed {
		c.seen[key] = in.value
	}
	if !failed || unknown {
		out := output{unknown: unknown}
		if !failed {
			out.rev = resp.Header.GetRevision()
		}
		c.hist.add(c.id, in, out, call, ret)
	}
	return !failed
}

func (c *client) cas(ctx context.Context, key string) bool {
	in := input{kind: opCAS, key: key, value: c.nextValue(), old: c.seen[key]}
	cmp := &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_Value{Value: []byte(in.old)}}
	if in.old == "" {
		cmp = &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}
	}
	req := &pb.TxnRequest{
		Compare: []*pb.Compare{cmp},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(in.value)}}}},
	}
	call := c.hist.now()
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := c.kv.Txn(octx, req)
	cancel()
	ret := c.hist.now()
	if err == nil && c.fromForeign(resp.Header) {
		return false
	}
	failed, unknown := outcome(err)
	if failed && !unknown {
		return false
	}
	out := output{unknown: unknown}
	if !failed {
		out.ok, out.rev = resp.Succeeded, resp.Header.GetRevision()
		if resp.Succeeded {
			c.seen[key] = in.value
		} else {
			delete(c.seen, key) // unknown now; the next read refreshes it
		}
	}
	c.hist.add(c.id, in, out, call, ret)
	return !failed
}
