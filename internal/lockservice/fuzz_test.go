package lockservice

import (
	"bytes"
	"net/http/httptest"
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
		prefix := s.queuePrefix(req.Type, req.ResourceID)
		if strings.Count(prefix[len(DefaultPrefix):], "/") != 1 {
			t.Fatalf("queue prefix %q of %q:%q has a path separator inside", prefix, req.Type, req.ResourceID)
		}
		key := nodeKey(prefix, req.NodeID)
		if got := nodeOf(prefix, key); got != req.NodeID {
			t.Fatalf("node %q came back as %q", req.NodeID, got)
		}
	})
}
