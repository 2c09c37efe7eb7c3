package lockservice

import (
	"context"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/queue"
)

// resourceQueue is where the contenders of one resource keep their keys.
//
// A name's queue is Prefix + escape(Type) + ":" + escape(ResourceID) + "/",
// where escape is url.PathEscape that also escapes ':' (as "%3A"), so the
// one unescaped ':' separates the parts and no '/' is left inside them:
// every pair of names has its own queue, and none lies under another.
//
// Members before that escape used url.PathEscape alone, which leaves ':'
// as it is, so ("a:b", "c") and ("a", "b:c") shared the queue "a:b:c/".
// For every name without ':' the two encodings agree. A name with ':'
// has its queue inside that legacy range, one level down:
//
//	<Prefix>a:b:c/a%3Ab:c/<node>   ("a:b", "c")
//	<Prefix>a:b:c/a:b%3Ac/<node>   ("a", "b:c")
//	<Prefix>a:b:c/<node>           a key of an older member, for either
//
// An older member reads the whole legacy range, so it sees the keys of
// both names and waits for them; a newer member counts the keys of its own
// queue and the older members' keys (those directly in the legacy range),
// not the other name's. A cluster in the middle of a rolling upgrade is
// therefore never wrong, only stricter on older members, which still make
// the two names wait for each other, as they always did.
type resourceQueue struct {
	prefix string // the queue: node keys are prefix + url.PathEscape(NodeID)
	legacy string // for a name with ':', the older layout's queue, which holds prefix; "" otherwise
}

// queueOf is the queue of the resource typ:resource.
func (s *Service) queueOf(typ, resource string) resourceQueue {
	exact := escapePart(typ) + ":" + escapePart(resource)
	old := url.PathEscape(typ) + ":" + url.PathEscape(resource)
	if exact == old {
		return resourceQueue{prefix: s.cfg.Prefix + exact + "/"}
	}
	legacy := s.cfg.Prefix + old + "/"
	return resourceQueue{prefix: legacy + exact + "/", legacy: legacy}
}

// escapePart escapes one part of a name: no '/' (url.PathEscape) and no
// ':' (the separator of the parts) is left in it.
func escapePart(part string) string {
	return strings.ReplaceAll(url.PathEscape(part), ":", "%3A")
}

// nodeKey is node's key in the queue. NodeID keeps url.PathEscape alone:
// the last path element needs no separator, and the key of a node stays
// the one older members gave it.
func (q resourceQueue) nodeKey(node string) string { return q.prefix + url.PathEscape(node) }

// scope selects the keys that contend for the resource (see contends)
// among those under the range to read.
func (q resourceQueue) scope() queue.Scope {
	if q.legacy == "" {
		return queue.Scope{Prefix: q.prefix}
	}
	return queue.Scope{Prefix: q.legacy, Member: q.contends}
}

// contends reports whether key contends for the resource: it is in the
// queue or, for a name with ':', an older member put it in the legacy
// range (directly in it, where the other name's queue is one level down).
func (q resourceQueue) contends(key string) bool {
	return strings.HasPrefix(key, q.prefix) || (q.legacy != "" && isChild(q.legacy, key))
}

// isChild reports whether key lies directly under prefix.
func isChild(prefix, key string) bool {
	return strings.HasPrefix(key, prefix) && !strings.Contains(key[len(prefix):], "/")
}

// nodeOf is the node whose key is key: its last path element, unescaped.
func nodeOf(key string) string {
	last := key[strings.LastIndexByte(key, '/')+1:]
	node, err := url.PathUnescape(last)
	if err != nil {
		return last
	}
	return node
}

// legacyAhead counts the older members' keys for the resource created
// before token. Keys created before a revision can only go, never come,
// so a count of zero stays true.
func (s *Service) legacyAhead(ctx context.Context, q resourceQueue, token int64) (int, error) {
	if q.legacy == "" || token <= 1 {
		return 0, nil
	}
	resp, err := call(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.client.Get(ctx, q.legacy, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(token-1))
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kv := range resp.Kvs {
		if isChild(q.legacy, string(kv.Key)) {
			n++
		}
	}
	return n, nil
}
