package lockservice

import (
	"context"
	"fmt"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// serveUnlock releases the lock if NodeID holds it: its key exists and is
// the oldest in the queue (and has the given Token, if any). The delete is
// guarded by the key's create revision, so an unlock racing an expiry
// never deletes a newer key of the same node.
func (s *Service) serveUnlock(w http.ResponseWriter, r *http.Request) {
	var req lockapi.UnlockRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	ctx := withCredentials(r.Context(), r)
	q := s.queueOf(req.Type, req.ResourceID)
	name := req.Type + ":" + req.ResourceID
	token, msg, err := s.release(ctx, q, req)
	if err != nil {
		s.fail(w, statusOf(err), fmt.Errorf("release %s: %w", name, err))
		return
	}
	if msg != "" {
		s.notHolder(w, fmt.Sprintf("%s on %s", msg, name))
		return
	}
	if *req.Success {
		s.metrics.outcomes.WithLabelValues("success").Inc()
		s.log.Debug("lock released", "lock", name, "node", req.NodeID, "token", token, "success", true)
	} else {
		s.metrics.outcomes.WithLabelValues("failure").Inc()
		s.log.Info("lock released after a failed operation", "lock", name, "node", req.NodeID, "token", token, "err", req.Err)
	}
	writeJSON(w, http.StatusOK, lockapi.UnlockResponse{Released: true, Token: token})
}

// release deletes key if it holds the lock: it exists, is the oldest in
// the queue and, when the request names a token, was created at it. With a
// token this is one guarded transaction (every key of the queue created at
// or after the token); without, the token is read first. msg says why
// nothing was released. For a name with ':' the older members' keys in
// the legacy range count as well (see resourceQueue); they are read
// before the transaction, which is safe because keys created before the
// token can only go.
func (s *Service) release(ctx context.Context, q resourceQueue, req lockapi.UnlockRequest) (token int64, msg string, err error) {
	prefix, key := q.prefix, q.nodeKey(req.NodeID)
	token = req.Token
	if token == 0 {
		read, err := call(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return s.client.Get(ctx, key, clientv3.WithKeysOnly())
		})
		if err != nil {
			return 0, "", err
		}
		own := read.Kvs
		if len(own) == 0 {
			return 0, fmt.Sprintf("node %q does not hold the lock", req.NodeID), nil
		}
		token = own[0].CreateRevision
	}
	older, err := s.legacyAhead(ctx, q, token)
	if err != nil {
		return 0, "", err
	}
	if older > 0 {
		return 0, fmt.Sprintf("%d key(s) of older members are ahead of token %d", older, token), nil
	}
	resp, err := call(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", token),
			clientv3.Compare(clientv3.CreateRevision(prefix), ">", token-1).WithPrefix(),
		).Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key, clientv3.WithKeysOnly()), clientv3.OpGet(prefix, clientv3.WithFirstCreate()...)).Commit()
	})
	if err != nil {
		return 0, "", err
	}
	if resp.Succeeded {
		return token, "", nil
	}
	own := resp.Responses[0].GetResponseRange().Kvs
	head := resp.Responses[1].GetResponseRange().Kvs
	switch {
	case len(own) == 0:
		return 0, fmt.Sprintf("node %q does not hold the lock", req.NodeID), nil
	case own[0].CreateRevision != token:
		return 0, fmt.Sprintf("token %d is not node %q's (%d)", token, req.NodeID, own[0].CreateRevision), nil
	case len(head) > 0 && head[0].CreateRevision != token:
		return 0, fmt.Sprintf("node %q is queued, not holding the lock", req.NodeID), nil
	}
	return 0, "the lock was released or expired meanwhile", nil
}

func (s *Service) notHolder(w http.ResponseWriter, msg string) {
	s.metrics.failed.WithLabelValues("403").Inc()
	writeJSON(w, http.StatusForbidden, lockapi.UnlockResponse{Released: false, Error: msg})
}

// serveStatus lists a resource's holder and waiters in order.
func (s *Service) serveStatus(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	typ, resource := query.Get("Type"), query.Get("ResourceID")
	if err := (lockapi.LockRequest{Type: typ, ResourceID: resource, NodeID: "-"}).Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	q := s.queueOf(typ, resource)
	resp, err := call(s, withCredentials(r.Context(), r), func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.client.Get(ctx, q.scope().Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	})
	if err != nil {
		s.fail(w, statusOf(err), fmt.Errorf("read the queue of %s:%s: %w", typ, resource, err))
		return
	}
	out := lockapi.StatusResponse{Waiters: []lockapi.Participant{}}
	for _, kv := range resp.Kvs {
		if !q.contends(string(kv.Key)) {
			continue // the other name's queue, in the same legacy range
		}
		p := lockapi.Participant{NodeID: nodeOf(string(kv.Key)), Token: kv.CreateRevision}
		if out.Holder == nil {
			out.Holder = &p
			continue
		}
		out.Waiters = append(out.Waiters, p)
	}
	writeJSON(w, http.StatusOK, out)
}
