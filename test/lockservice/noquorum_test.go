package lockservice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/test/framework"
)

const (
	// requestTimeout is the member's: 5 s + 2 election timeouts (1 s).
	requestTimeout = 7 * time.Second
	// noQuorumBound is how long the lock service may take to answer
	// without quorum: the request timeout, within which the member
	// answers its calls, plus 4 s for a loaded two-core machine.
	noQuorumBound = requestTimeout + 4*time.Second
)

// noQuorumAnswer is one lock-service request to a member without quorum:
// it must fail with 503 after the request timeout, its error carrying the
// message etcd gives for the call that could not be served.
type noQuorumAnswer struct {
	name   string
	method string
	path   string
	body   string
	msg    string
}

// check sends the request and returns what is wrong with the answer, ""
// when it is right. Twice noQuorumBound tells an answer that never comes.
func (a noQuorumAnswer) check(ctx context.Context, t *testing.T, s *service) string {
	ctx, cancel := context.WithTimeout(ctx, 2*noQuorumBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, a.method, s.baseURL+a.path, strings.NewReader(a.body))
	if err != nil {
		return err.Error()
	}
	start := time.Now()
	resp, err := s.http.Do(req)
	took := time.Since(start)
	if err != nil {
		return fmt.Sprintf("%s: no answer after %v: %v", a.name, took, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Sprintf("%s: answer %d cut after %v: %v", a.name, resp.StatusCode, time.Since(start), err)
	}
	t.Logf("no quorum: %s answered %d after %v: %s", a.name, resp.StatusCode, took.Round(time.Millisecond), strings.TrimSpace(string(body)))
	var problems []string
	var e lockapi.ErrorResponse
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || !strings.HasSuffix(e.Error, ": "+a.msg) {
		problems = append(problems, fmt.Sprintf("answered %d %s, want 503 with an error ending in %q", resp.StatusCode, body, a.msg))
	}
	if took < requestTimeout-time.Second || took > noQuorumBound {
		problems = append(problems, fmt.Sprintf("answered after %v, want the request timeout %v (at most %v)", took, requestTimeout, noQuorumBound))
	}
	if problems == nil {
		return ""
	}
	return a.name + ": " + strings.Join(problems, "; ")
}

// TestLockServiceNoQuorum leaves one member of three running: /lock,
// /status and /unlock on it answer 503 with etcd's message after the
// request timeout instead of hanging, and once the killed members are back
// the same client takes a lock again.
func TestLockServiceNoQuorum(t *testing.T) {
	requireMetaStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()
	cluster := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	survivor := cluster.Member(0)
	cli := survivor.NewClient(t)
	s := newService(t, cluster, survivor)
	held := s.lock(ctx, "noquorum", "held", "holder")
	defer held.Close()

	killed := cluster.Members()[1:]
	for _, m := range killed {
		if _, err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := survivor.WaitNoLeader(ctx, cli); err != nil {
		t.Fatal(err)
	}

	status := "/v1/lock/status?" + url.Values{"Type": {"noquorum"}, "ResourceID": {"held"}}.Encode()
	// A write that raft never takes fails with the proposal context's
	// error, a linearizable read with "request timed out".
	writes := []noQuorumAnswer{
		{name: "lock", method: http.MethodPost, path: lockapi.PathLock, msg: context.DeadlineExceeded.Error(),
			body: `{"Type":"noquorum","ResourceID":"new","NodeID":"n1"}`},
		{name: "unlock with a token", method: http.MethodPost, path: lockapi.PathUnlock, msg: context.DeadlineExceeded.Error(),
			body: fmt.Sprintf(`{"Type":"noquorum","ResourceID":"held","NodeID":"holder","Token":%d,"Success":true}`, held.Token())},
	}
	// The member serves one ReadIndex round at a time and a read arriving
	// during one waits for the next: the reads go one after the other.
	reads := []noQuorumAnswer{
		{name: "status", method: http.MethodGet, path: status, msg: rpctypes.ErrTimeout.Error()},
		{name: "unlock", method: http.MethodPost, path: lockapi.PathUnlock, msg: rpctypes.ErrTimeout.Error(),
			body: `{"Type":"noquorum","ResourceID":"held","NodeID":"holder","Success":true}`},
	}
	failures := make(chan string, len(writes))
	for _, a := range writes {
		go func() { failures <- a.check(ctx, t, s) }()
	}
	for _, a := range reads {
		if f := a.check(ctx, t, s); f != "" {
			t.Error(f)
		}
	}
	for range writes {
		if f := <-failures; f != "" {
			t.Error(f)
		}
	}

	for _, m := range killed {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The same client, a new request: served again without help.
	l := s.lock(ctx, "noquorum", "after", "n1")
	unlock(t, ctx, l)
}
