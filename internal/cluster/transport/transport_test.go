package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
	"github.com/metastore-io/metastore/internal/format/raftsnap"

	"github.com/metastore-io/metastore/test/raftkit"
)

func appMsg(from, to, index uint64, data []byte) raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgApp, From: from, To: to, Term: 1, Index: index,
		Entries: []raftpb.Entry{{Term: 1, Index: index + 1, Data: data}}}
}

func TestStreamDeliversMessagesInOrder(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	connect(t, a, b)

	const total, chunk = 5000, 500
	for sent := 0; sent < total; sent += chunk {
		var batch []raftpb.Message
		for i := sent; i < sent+chunk; i++ {
			batch = append(batch, appMsg(1, 2, uint64(i), []byte(fmt.Sprintf("entry-%d", i))))
		}
		a.tr.Send(batch)
		// Send must have copied the Entries arrays: raft may reuse them.
		for i := range batch {
			batch[i].Entries[0] = raftpb.Entry{Data: []byte("scribbled")}
		}
		n := sent + chunk
		b.raft.waitUntil(t, fmt.Sprintf("%d messages", n), func(f *fakeRaft) bool { return len(f.steps) >= n })
	}
	got := b.raft.stepped()
	if len(got) != total {
		t.Fatalf("received %d messages, want %d", len(got), total)
	}
	for i := range got {
		if got[i].Index != uint64(i) || string(got[i].Entries[0].Data) != fmt.Sprintf("entry-%d", i) {
			t.Fatalf("message %d: index %d data %q", i, got[i].Index, got[i].Entries[0].Data)
		}
	}
	if st, _ := a.tr.PeerStatus(2); st.Dropped != 0 {
		t.Fatalf("%d messages dropped on an idle loopback link", st.Dropped)
	}
	if got := a.tr.ActivePeers(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("active peers %v", got)
	}
}

func TestSendToUnreachablePeerDropsAndReports(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	// Nothing listens on the proxy's target once the proxy is cut.
	px := newProxy(t, "127.0.0.1:1")
	px.setCut(true)
	mustAddPeer(t, a.tr, 2, px.url())

	a.tr.Send([]raftpb.Message{appMsg(1, 2, 1, nil), appMsg(1, 2, 2, nil), {Type: raftpb.MsgHeartbeat, From: 1, To: 2}})
	a.raft.waitUntil(t, "peer 2 reported unreachable", func(f *fakeRaft) bool { return f.unreachable[2] > 0 })
	a.raft.mu.Lock()
	reports := a.raft.unreachable[2]
	a.raft.mu.Unlock()
	if reports != 1 {
		t.Fatalf("one Send reported peer 2 unreachable %d times, want once", reports)
	}
	if st, _ := a.tr.PeerStatus(2); st.Dropped != 3 || st.Active {
		t.Fatalf("status %+v, want 3 dropped and inactive", st)
	}

	// A snapshot that cannot be sent is reported failed, so raft resumes
	// probing the follower.
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{
		Metadata: raftpb.SnapshotMetadata{Index: 7, Term: 1}}}})
	a.raft.waitUntil(t, "snapshot failure report", func(f *fakeRaft) bool { return len(f.snapReports) > 0 })
	if r := a.raft.snapshotReports()[0]; r.to != 2 || r.status != raft.SnapshotFailure {
		t.Fatalf("snapshot report %+v", r)
	}
	// Messages for members that are not peers are ignored.
	a.tr.Send([]raftpb.Message{appMsg(1, 9, 1, nil)})
}

// TestStalledPeerDoesNotBlockSendOrOthers stalls peer 2 (the proxy its
// streams from member 1 go through stops reading, so member 1's writes
// back up) while peer 3 must keep receiving every message promptly and
// Send must keep returning.
func TestStalledPeerDoesNotBlockSendOrOthers(t *testing.T) {
	// A ConnTimeout longer than the test: the stalled connection is never
	// torn down for us, so only non-blocking queues can keep Send moving.
	slow := func(c *Config) { c.ConnTimeout = time.Hour; c.QueueSize = 64 }
	a := startMember(t, 1, 0xc1, slow)
	b := startMember(t, 2, 0xc1, slow)
	c := startMember(t, 3, 0xc1, slow)
	// Member 2 reads what member 1 sends over the streams it opens to
	// member 1's URL: through the proxy.
	px := newProxy(t, a.url)
	mustAddPeer(t, a.tr, 2, b.url)
	mustAddPeer(t, b.tr, 1, px.url())
	waitActive(t, a.tr, 2)
	connect(t, a, c)

	before := len(b.raft.stepped())
	px.setPaused(true)
	// Each round waits for the healthy peer: at that pace an unstalled
	// stream to peer 2 keeps up easily (4 KiB per round trip), so only the
	// stall can fill its queue, once the socket buffers on the way (a few
	// MiB) are full.
	msg := bytes.Repeat([]byte{7}, 4<<10)
	const maxRounds = 20_000 // 80 MiB for peer 2: far beyond every buffer on the way
	for i := 0; ; i++ {
		if st, _ := a.tr.PeerStatus(2); st.Dropped > 0 {
			break
		}
		if i == maxRounds {
			t.Fatal("no message to the stalled peer was dropped: its queue never filled")
		}
		a.tr.Send([]raftpb.Message{appMsg(1, 2, uint64(i), msg), appMsg(1, 3, uint64(i), nil)})
		c.raft.waitUntil(t, fmt.Sprintf("message %d on the healthy peer", i), func(f *fakeRaft) bool { return len(f.steps) > i })
	}
	a.raft.waitUntil(t, "stalled peer reported unreachable", func(f *fakeRaft) bool { return f.unreachable[2] > 0 })
	// A relay read already under way when the pause began may still pass
	// its buffer (32 KiB, 8 messages); an unstalled stream passes hundreds.
	if got := len(b.raft.stepped()) - before; got > 8 {
		t.Fatalf("the stalled peer stepped %d messages while its streams were paused", got)
	}
	if st3, _ := a.tr.PeerStatus(3); st3.Dropped != 0 {
		t.Fatalf("%d messages to the healthy peer dropped", st3.Dropped)
	}

	// Once the peer reads again, the stream resumes.
	px.setPaused(false)
	raftkit.WaitFor(t, "a new message through the resumed stream", func() bool {
		a.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Commit: 424242}})
		for _, m := range b.raft.stepped() {
			if m.Type == raftpb.MsgHeartbeat && m.Commit == 424242 {
				return true
			}
		}
		return false
	})
}

func TestClusterMismatchRefused(t *testing.T) {
	a := startMember(t, 1, 0xaa, nil)
	b := startMember(t, 2, 0xbb, nil)
	mustAddPeer(t, a.tr, 2, b.url)
	mustAddPeer(t, b.tr, 1, a.url)

	// Both sides say what is wrong, each from its own point of view.
	a.logs.waitFor(t, "level=ERROR", "member 2 at "+b.url+" belongs to cluster bb, expected aa")
	b.logs.waitFor(t, "level=ERROR", "member 1 belongs to cluster aa, expected bb")
	st, _ := a.tr.PeerStatus(2)
	if st.Active || !strings.Contains(st.LastError, "belongs to cluster bb, expected aa") {
		t.Fatalf("status %+v", st)
	}
	if len(b.raft.stepped()) != 0 {
		t.Fatal("a message crossed clusters")
	}
	_, err := a.tr.Forward(raftkit.Context(t), 2, "echo", nil)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "belongs to cluster bb, expected aa") {
		t.Fatalf("forward across clusters: %v", err)
	}
}

func TestUnknownAndRemovedSendersRefused(t *testing.T) {
	removed := make(chan struct{})
	a := startMember(t, 1, 0xc1, func(c *Config) { c.OnRemoved = func() { close(removed) } })
	b := startMember(t, 2, 0xc1, nil)
	mustAddPeer(t, a.tr, 2, b.url)
	b.logs.waitFor(t, "member 1 is not a known member of cluster c1")
	raftkit.WaitFor(t, "refusal recorded", func() bool {
		st, _ := a.tr.PeerStatus(2)
		return strings.Contains(st.LastError, "404") && strings.Contains(st.LastError, "error sender not found")
	})

	mustAddPeer(t, b.tr, 1, a.url)
	waitActive(t, a.tr, 2)
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2}})
	b.raft.waitUntil(t, "heartbeat", func(f *fakeRaft) bool { return len(f.steps) == 1 })

	b.tr.RemovePeer(1)
	// The open stream is closed and reconnecting is refused for good.
	b.logs.waitFor(t, "member 1 was removed from cluster c1")
	raftkit.WaitFor(t, "removal noticed by the removed member", func() bool {
		st, _ := a.tr.PeerStatus(2)
		return !st.Active && strings.Contains(st.LastError, "removed from the cluster")
	})
	if _, ok := b.tr.PeerStatus(1); ok {
		t.Fatal("removed peer still listed")
	}
	// The removed member is told, once (a second call would close twice).
	receive(t, "OnRemoved", removed)
}

// TestUpdatePeerMovesTheStream: member 1's readers of member 2's streams
// follow member 2's URLs.
func TestUpdatePeerMovesTheStream(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	mustAddPeer(t, b.tr, 1, a.url)
	oldPath, newPath := newProxy(t, b.url), newProxy(t, b.url)
	mustAddPeer(t, a.tr, 2, oldPath.url())
	waitActive(t, a.tr, 2)

	if err := a.tr.UpdatePeer(2, []string{newPath.url()}); err != nil {
		t.Fatal(err)
	}
	raftkit.WaitFor(t, "stream over the new URL", func() bool {
		st, _ := a.tr.PeerStatus(2)
		return st.Active && newPath.acceptCount() > 0
	})
	oldPath.setCut(true)
	raftkit.WaitFor(t, "a heartbeat from member 2 over the new URL", func() bool {
		b.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Commit: 5}})
		return len(a.raft.stepped()) > 0
	})

	if err := a.tr.UpdatePeer(9, []string{b.url}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("update of an unknown peer: %v", err)
	}
	for _, bad := range [][]string{nil, {"https://x:1"}, {"ftp://x:1"}, {"http://"}} {
		if err := a.tr.AddPeer(5, bad); err == nil {
			t.Fatalf("AddPeer accepted URLs %q", bad)
		}
	}
}

// TestSnapshotStreamedWithImage checks the receiver stores the image
// before raft sees the MsgSnap, and the sender reports success.
func TestSnapshotStreamedWithImage(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	connect(t, a, b)

	meta := raftpb.SnapshotMetadata{Index: 500, Term: 3, ConfState: raftpb.ConfState{Voters: []uint64{1, 2}}}
	image := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // ~4.6 MiB
	if _, err := a.snap.Save(meta, readerImage{bytes.NewReader(image)}); err != nil {
		t.Fatal(err)
	}
	stepped := make(chan []byte, 1)
	b.raft.onStep = func(m raftpb.Message) error {
		if m.Type != raftpb.MsgSnap {
			return nil
		}
		img, err := b.snap.OpenImage(raftsnap.Ref{Term: m.Snapshot.Metadata.Term, Index: m.Snapshot.Metadata.Index})
		if err != nil {
			stepped <- nil
			return err
		}
		defer img.Close()
		got, err := io.ReadAll(img)
		if err != nil {
			got = nil
		}
		stepped <- got
		return nil
	}
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 3, Snapshot: &raftpb.Snapshot{Metadata: meta}}})
	select {
	case got := <-stepped:
		if !bytes.Equal(got, image) {
			t.Fatalf("raft stepped the MsgSnap before the image (%d bytes of %d) was stored", len(got), len(image))
		}
	case <-raftkit.Context(t).Done():
		t.Fatal("snapshot never stepped")
	}
	a.raft.waitUntil(t, "snapshot report", func(f *fakeRaft) bool { return len(f.snapReports) > 0 })
	if r := a.raft.snapshotReports()[0]; r.to != 2 || r.status != raft.SnapshotFinish {
		t.Fatalf("snapshot report %+v", r)
	}

	// A snapshot whose file is gone is reported failed.
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 3, Snapshot: &raftpb.Snapshot{
		Metadata: raftpb.SnapshotMetadata{Index: 600, Term: 3}}}})
	a.raft.waitUntil(t, "second snapshot report", func(f *fakeRaft) bool { return len(f.snapReports) > 1 })
	if r := a.raft.snapshotReports()[1]; r.status != raft.SnapshotFailure {
		t.Fatalf("missing image reported %+v", r)
	}
}

func TestStopIsIdempotentAndFinal(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	connect(t, a, b)
	b.tr.Stop()
	b.tr.Stop()
	raftkit.WaitFor(t, "a to notice b stopped", func() bool {
		st, _ := a.tr.PeerStatus(2)
		return !st.Active
	})
	b.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1}})
	if err := b.tr.AddPeer(3, []string{"http://127.0.0.1:1"}); !errors.Is(err, ErrStopped) {
		t.Fatalf("AddPeer after Stop: %v", err)
	}
	if got := b.tr.ActivePeers(); len(got) != 0 {
		t.Fatalf("active peers after Stop: %v", got)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, cfg := range []Config{
		{ClusterID: 1},
		{ID: 1},
		{ID: 1, ClusterID: 1, BackoffMin: time.Second, BackoffMax: time.Millisecond},
		{ID: 1, ClusterID: 1, MaxFrameSize: 10},
	} {
		if _, err := New(cfg); err == nil {
			t.Fatalf("New accepted %+v", cfg)
		}
	}
}

func TestRaftTrafficRefusedUntilAttached(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, func(c *Config) { c.Raft, c.Snapshots = nil, nil })
	mustAddPeer(t, a.tr, 2, b.url)
	mustAddPeer(t, b.tr, 1, a.url)
	raftkit.WaitFor(t, "a 503 while member 2 is not attached", func() bool {
		st, _ := a.tr.PeerStatus(2)
		return strings.Contains(st.LastError, "503")
	})
	a.logs.waitFor(t, "level=INFO", "cannot open stream Message from peer", "raft is not running yet")

	b.tr.Attach(attachedRaft{b.raft, b.snap})
	waitActive(t, a.tr, 2)
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2}})
	b.raft.waitUntil(t, "heartbeat after attach", func(f *fakeRaft) bool { return len(f.steps) == 1 })
}

// attachedRaft is a fake raft with its snapshot store, as a raftnode.Local.
type attachedRaft struct {
	*fakeRaft
	snap *raftsnap.Store
}

func (a attachedRaft) Snapshots() *raftsnap.Store { return a.snap }

// TestEtcdProbeAnswered: an etcd member of a mixed cluster probes its
// peers at /raft/probing over HTTP/1.1 with none of this transport's
// headers; the member answers as etcd does instead of 404.
func TestEtcdProbeAnswered(t *testing.T) {
	m := startMember(t, 1, 0xc1, nil)
	req, err := http.NewRequestWithContext(raftkit.Context(t), http.MethodGet, m.url+"/raft/probing", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var health struct{ OK bool }
	if err := json.NewDecoder(resp.Body).Decode(&health); resp.StatusCode != http.StatusOK || err != nil || !health.OK {
		t.Fatalf("probe: %s, %+v, %v", resp.Status, health, err)
	}
}

// TestEtcdPeerRefused: until a member applies etcd's raft entries, raft
// traffic from an etcd member (etcd's headers, no MetaStore mark) is
// answered 412, which etcd logs and retries (a 403 or 410 would make it
// stop itself), and a stream answered without the mark is not read.
func TestEtcdPeerRefused(t *testing.T) {
	m := startMember(t, 1, 0xc1, nil)
	mustAddPeer(t, m.tr, 2, "http://127.0.0.1:1")
	etcd := rafthttp.Local{ID: 2, ClusterID: 0xc1, ServerVersion: "3.5.21", MinClusterVersion: "3.0.0"}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, rafthttp.StreamMessagePath + "/2"},
		{http.MethodGet, rafthttp.StreamMsgAppPath + "/2"},
		{http.MethodPost, rafthttp.PipelinePath},
		{http.MethodPost, rafthttp.SnapshotPath},
	} {
		req, err := http.NewRequestWithContext(raftkit.Context(t), c.method, m.url+c.path, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		etcd.SetRequestHeaders(req.Header)
		req.Header.Set(rafthttp.HeaderRaftTo, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusPreconditionFailed || strings.TrimSpace(string(body)) != refusedEtcdPeer {
			t.Fatalf("%s %s from an etcd member: %s %q", c.method, c.path, resp.Status, body)
		}
	}
	m.logs.waitFor(t, "level=ERROR", "member 2 is an etcd member (etcd 3.5.21)")

	// An etcd member answering this member's stream: 200 without the mark.
	etcdSide := http.NewServeMux()
	etcdSide.HandleFunc("GET /raft/stream/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(rafthttp.HeaderServerVersion, "3.6.16")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(etcdSide)
	defer srv.Close()
	defer srv.CloseClientConnections()
	if err := m.tr.UpdatePeer(2, []string{srv.URL}); err != nil {
		t.Fatal(err)
	}
	raftkit.WaitFor(t, "the etcd peer's stream refused", func() bool {
		st, _ := m.tr.PeerStatus(2)
		return strings.Contains(st.LastError, "is an etcd member (etcd 3.6.16)")
	})
}

// TestPipelineWhenThePeerCannotOpenStreams: member 2 cannot reach member
// 1 (its URL for member 1 is cut), so it opens no stream to member 1, and
// member 1 has none to write to. Member 1's own streams from member 2 show
// it a MetaStore member, so member 1 POSTs its messages to member 2 one by
// one (etcd's pipeline) instead of dropping them.
func TestPipelineWhenThePeerCannotOpenStreams(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	cut := newProxy(t, a.url)
	cut.setCut(true)
	mustAddPeer(t, a.tr, 2, b.url)
	mustAddPeer(t, b.tr, 1, cut.url())
	b.logs.waitFor(t, "established stream Message to peer")

	raftkit.WaitFor(t, "a heartbeat through the pipeline", func() bool {
		a.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Commit: 77}})
		for _, m := range b.raft.stepped() {
			if m.Type == raftpb.MsgHeartbeat && m.Commit == 77 {
				return true
			}
		}
		return false
	})
	if st, _ := a.tr.PeerStatus(2); st.Active {
		t.Fatalf("member 1 has a stream to member 2 through a cut link: %+v", st)
	}
	// The other way round still goes by stream.
	b.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Commit: 78}})
	a.raft.waitUntil(t, "a heartbeat by stream", func(f *fakeRaft) bool { return len(f.steps) > 0 })
}

// TestLocalAddr: with LocalAddr set (etcd's SetMemberLocalAddr) the
// member's connections to its peers come from that address.
func TestLocalAddr(t *testing.T) {
	a := startMember(t, 1, 0xc1, func(c *Config) { c.LocalAddr = "127.0.0.2" })
	b := startMember(t, 2, 0xc1, nil)
	connect(t, a, b)
	b.logs.waitFor(t, "established stream Message to peer", "remote-addr=127.0.0.2:")
	if _, err := New(Config{ID: 1, ClusterID: 1, LocalAddr: "peer.example"}); err == nil {
		t.Fatal("New took a LocalAddr that is not an IP address")
	}
}
