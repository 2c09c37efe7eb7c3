package corruption

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// fakeMember is a member whose store hashes to hash at every revision.
type fakeMember struct {
	id, cluster    uint64
	hash           uint32
	rev, compacted int64
	peers          map[uint64][]string

	mu     sync.Mutex
	raised []uint64
}

func (m *fakeMember) ID() uint64        { return m.id }
func (m *fakeMember) ClusterID() uint64 { return m.cluster }
func (m *fakeMember) CompactRev() int64 { return m.compacted }
func (m *fakeMember) PeerURLs() map[uint64][]string {
	return m.peers
}
func (m *fakeMember) LinearizableRead(context.Context) error { return nil }
func (m *fakeMember) HashKV(rev int64) (kvstore.HashKVResult, error) {
	if rev > m.rev {
		return kvstore.HashKVResult{}, kvstore.ErrFutureRev
	}
	if rev == 0 {
		rev = m.rev
	}
	return kvstore.HashKVResult{Hash: m.hash, Revision: m.rev, CompactRevision: m.compacted, HashRevision: rev}, nil
}
func (m *fakeMember) RaiseCorrupt(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.raised = append(m.raised, id)
}
func (m *fakeMember) alarms() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.raised)
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// cluster is three members, each answering /members/hashkv over HTTP;
// hashes gives each its hash.
func cluster(t *testing.T, hashes ...uint32) []*fakeMember {
	t.Helper()
	var ms []*fakeMember
	urls := map[uint64][]string{}
	for i, h := range hashes {
		m := &fakeMember{id: uint64(i + 1), cluster: 42, hash: h, rev: 10, compacted: 5}
		c := New(m, &http.Client{}, 5*time.Second, discard)
		mux := http.NewServeMux()
		mux.HandleFunc(PeerHashKVPath, c.ServeHashKV)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		urls[m.id] = []string{srv.URL}
		ms = append(ms, m)
	}
	for _, m := range ms {
		m.peers = map[uint64][]string{}
		for id, u := range urls {
			if id != m.id {
				m.peers[id] = u
			}
		}
	}
	return ms
}

func TestCompactHashCheckAlarmsTheMinority(t *testing.T) {
	ms := cluster(t, 7, 7, 9)
	New(ms[0], &http.Client{}, 5*time.Second, discard).CompactHashCheck()
	if got := ms[0].alarms(); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("alarms raised %v, want [3] (the member whose hash differs)", got)
	}
}

func TestCompactHashCheckWithoutMajorityAlarmsMemberZero(t *testing.T) {
	ms := cluster(t, 7, 8, 9)
	New(ms[0], &http.Client{}, 5*time.Second, discard).CompactHashCheck()
	if got := ms[0].alarms(); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("alarms raised %v, want [0] (nobody to blame)", got)
	}
}

func TestChecksPassOnAgreeingMembers(t *testing.T) {
	ms := cluster(t, 7, 7, 7)
	c := New(ms[0], &http.Client{}, 5*time.Second, discard)
	c.CompactHashCheck()
	if err := c.PeriodicCheck(); err != nil {
		t.Fatal(err)
	}
	if err := c.InitialCheck(); err != nil {
		t.Fatal(err)
	}
	if got := ms[0].alarms(); len(got) != 0 {
		t.Fatalf("alarms raised %v on agreeing members", got)
	}
}

func TestInitialCheckRefusesADifferentHash(t *testing.T) {
	ms := cluster(t, 7, 9, 7)
	if err := New(ms[0], &http.Client{}, 5*time.Second, discard).InitialCheck(); err == nil {
		t.Fatal("a member whose peer hashes differently at the same compacted revision passed the initial check")
	}
}

func TestPeriodicCheckAlarmsTheFollowerThatDiffers(t *testing.T) {
	ms := cluster(t, 7, 7, 9)
	if err := New(ms[0], &http.Client{}, 5*time.Second, discard).PeriodicCheck(); err != nil {
		t.Fatal(err)
	}
	if got := ms[0].alarms(); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("alarms raised %v, want [3]", got)
	}
}

// A peer of another cluster is refused: it answers 412.
func TestServeHashKVRefusesAnotherCluster(t *testing.T) {
	ms := cluster(t, 7, 7, 7)
	stranger := &fakeMember{id: 9, cluster: 43}
	c := New(stranger, &http.Client{}, 5*time.Second, discard)
	if _, err := c.fetchPeerHash(context.Background(), ms[1].peers[1][0], 0); err == nil {
		t.Fatal("a member of another cluster got a hash")
	}
}
