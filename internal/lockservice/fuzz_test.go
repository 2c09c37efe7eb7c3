package lockservice

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// FuzzDecodeLockRequest: any body either decodes into a request whose
// fields name one key in one queue, or is refused; nothing panics.
func FuzzDecodeLockRequest(f *testing.F) {
	f.Add([]byte(`{"Type":"pull","ResourceID":"sha256:ab","NodeID":"n/1"}`))
	f.Add([]byte(`{"type":"a:b","resourceid":"c%2Fd","nodeid":"\u0000"}`))
	f.Add([]byte(`{"Type":1}`))
	f.Add([]byte(``))
	s := &Service{cfg: Config{Prefix: DefaultPrefix}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", lockapi.PathLock, bytes.NewReader(body))
		var req lockapi.LockRequest
		if err := decodeBody(r, &req); err != nil {
			return
		}
		if req.Validate() != nil {
			return
		}
		q := s.queueOf(req.Type, req.ResourceID)
		key := q.nodeKey(req.NodeID)
		if got := nodeOf(key); got != req.NodeID {
			t.Fatalf("node %q came back as %q", req.NodeID, got)
		}
		if !q.contends(key) {
			t.Fatalf("key %q is not in its own queue %+v", key, q)
		}
	})
}

// FuzzQueueNames: the queue of a name gives the name back (so two names
// never share a queue), no key of one name's queue counts for another
// name, the encoding is the older one for names without ':', and the
// older layout's queue of a name holds every key of its queue.
func FuzzQueueNames(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c", "n")
	f.Add("pull", "sha256:ab", "pull", "sha256:ab", "node-1")
	f.Add("a%3Ab", "c", "a:b", "c", "x")
	f.Add("a/b", "c", "a", "b/c", "n:1/2")
	f.Add("t", "r", "t", "r", "%zz")
	s := &Service{cfg: Config{Prefix: DefaultPrefix}}
	f.Fuzz(func(t *testing.T, typ1, res1, typ2, res2, node string) {
		for _, field := range []string{typ1, res1, typ2, res2, node} {
			if field == "" {
				return // refused by Validate
			}
		}
		q1, q2 := s.queueOf(typ1, res1), s.queueOf(typ2, res2)
		for _, c := range []struct {
			q        resourceQueue
			typ, res string
		}{{q1, typ1, res1}, {q2, typ2, res2}} {
			if gotTyp, gotRes := nameOf(t, c.q.prefix); gotTyp != c.typ || gotRes != c.res {
				t.Fatalf("queue %q of (%q, %q) decodes as (%q, %q)", c.q.prefix, c.typ, c.res, gotTyp, gotRes)
			}
			old := DefaultPrefix + url.PathEscape(c.typ) + ":" + url.PathEscape(c.res) + "/"
			if !strings.Contains(c.typ+c.res, ":") && c.q.prefix != old {
				t.Fatalf("(%q, %q) without ':' moved from %q to %q", c.typ, c.res, old, c.q.prefix)
			}
			if !strings.HasPrefix(c.q.nodeKey(node), old) {
				t.Fatalf("key %q of (%q, %q) is out of the older members' range %q", c.q.nodeKey(node), c.typ, c.res, old)
			}
		}
		if typ1 == typ2 && res1 == res2 {
			return
		}
		if q1.contends(q2.nodeKey(node)) || q2.contends(q1.nodeKey(node)) {
			t.Fatalf("(%q, %q) and (%q, %q) share key %q or %q", typ1, res1, typ2, res2, q1.nodeKey(node), q2.nodeKey(node))
		}
	})
}

// nameOf decodes a queue prefix: its last element is Type and ResourceID,
// escaped, around the one unescaped ':'.
func nameOf(t *testing.T, prefix string) (string, string) {
	t.Helper()
	elems := strings.Split(strings.TrimSuffix(prefix, "/"), "/")
	typ, res, ok := strings.Cut(elems[len(elems)-1], ":")
	if !ok || strings.Contains(res, ":") {
		t.Fatalf("queue %q: its last element has not exactly one ':'", prefix)
	}
	typ, err1 := url.PathUnescape(typ)
	res, err2 := url.PathUnescape(res)
	if err1 != nil || err2 != nil {
		t.Fatalf("queue %q does not unescape: %v %v", prefix, err1, err2)
	}
	return typ, res
}
