package etcddir

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/metastore-io/metastore/internal/host/fileutil"
)

// writer encodes records as etcd's WAL encoder does (walpb.Record in an
// 8-byte little-endian length frame padded to 8 bytes, crc32c chained
// over the records' data), for tests.
type writer struct {
	buf []byte
	crc uint32
}

func (w *writer) record(typ int64, data []byte) {
	if typ == recCRC {
		w.frame(typ, w.crc, nil)
		return
	}
	w.crc = crc32.Update(w.crc, castagnoli, data)
	w.frame(typ, w.crc, data)
}

func (w *writer) frame(typ int64, crc uint32, data []byte) {
	var rec []byte
	rec = protowire.AppendTag(rec, 1, protowire.VarintType)
	rec = protowire.AppendVarint(rec, uint64(typ))
	rec = protowire.AppendTag(rec, 2, protowire.VarintType)
	rec = protowire.AppendVarint(rec, uint64(crc))
	if data != nil {
		rec = protowire.AppendTag(rec, 3, protowire.BytesType)
		rec = protowire.AppendBytes(rec, data)
	}
	lenField := uint64(len(rec))
	pad := (8 - len(rec)%8) % 8
	if pad != 0 {
		lenField |= uint64(0x80|pad) << 56
	}
	w.buf = binary.LittleEndian.AppendUint64(w.buf, lenField)
	w.buf = append(w.buf, rec...)
	w.buf = append(w.buf, make([]byte, pad)...)
}

func (w *writer) metadata(t testing.TB, member, cluster uint64) {
	b, err := (&pb.Metadata{NodeID: member, ClusterID: cluster}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w.record(recMetadata, b)
}

func (w *writer) entries(t testing.TB, term uint64, from, to uint64) {
	for i := from; i <= to; i++ {
		b, err := (&raftpb.Entry{Term: term, Index: i, Data: []byte{byte(i)}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		w.record(recEntry, b)
	}
}

func (w *writer) state(t testing.TB, hs raftpb.HardState) {
	b, err := hs.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w.record(recState, b)
}

// cut ends the current segment and starts the next as etcd's cut does.
func (w *writer) cut(t testing.TB, hs raftpb.HardState) []byte {
	done := w.buf
	w.buf = nil
	w.record(recCRC, nil)
	w.metadata(t, 1, 7)
	w.state(t, hs)
	return done
}

// twoSegments is a log of entries 1..9 (term 2) in two segments, with
// entries 6..9 rewritten in term 3 in the second, the hard state last.
func twoSegments(t testing.TB) (names []string, segs [][]byte) {
	w := &writer{}
	w.record(recCRC, nil)
	w.metadata(t, 1, 7)
	w.record(recSnapshot, nil)
	w.entries(t, 2, 1, 9)
	w.state(t, raftpb.HardState{Term: 2, Vote: 1, Commit: 5})
	first := w.cut(t, raftpb.HardState{Term: 2, Vote: 1, Commit: 5})
	w.entries(t, 3, 6, 9)
	w.state(t, raftpb.HardState{Term: 3, Vote: 1, Commit: 9})
	second := append(w.buf, make([]byte, 4096)...) // preallocated space
	return []string{fileutil.HexPairName(0, 0, ".wal"), fileutil.HexPairName(1, 10, ".wal")}, [][]byte{first, second}
}

func TestReadWAL(t *testing.T) {
	dir := t.TempDir()
	names, segs := twoSegments(t)
	for i := range names {
		if err := os.WriteFile(filepath.Join(dir, names[i]), segs[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := IsWAL(dir); err != nil || !ok {
		t.Fatalf("IsWAL = %v, %v", ok, err)
	}
	log, err := ReadWAL(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	if log.MemberID != 1 || log.ClusterID != 7 || log.HardState.Commit != 9 || log.TermAt != 2 || log.TornAt != "" {
		t.Fatalf("log %+v", log)
	}
	var got []uint64
	for _, e := range log.Entries {
		got = append(got, e.Index*10+e.Term)
	}
	if want := []uint64{52, 63, 73, 83, 93}; !slices.Equal(got, want) {
		t.Fatalf("entries (index*10+term) %v, want %v", got, want)
	}
}

func TestReadWALTornTailAndDamage(t *testing.T) {
	names, segs := twoSegments(t)
	// A torn last record: the file ends inside it.
	torn := segs[1][:len(segs[1])-4096-5]
	log, err := decodeLog(names, [][]byte{segs[0], torn}, 4)
	if err != nil || log.TornAt == "" || len(log.Entries) != 5 || log.HardState.Commit != 5 {
		t.Fatalf("torn tail: %v, %+v", err, log)
	}
	// The same damage in the first segment is refused.
	first := append([]byte(nil), segs[0]...)
	first[len(first)-3] ^= 0xff
	if _, err := decodeLog(names, [][]byte{first, segs[1]}, 4); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged first segment: %v, want ErrCorrupt", err)
	}
	// A segment whose crc record does not continue the chain.
	w := &writer{crc: 12345}
	w.record(recCRC, nil)
	if _, err := decodeLog(names, [][]byte{segs[0], w.buf}, 4); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("broken crc chain: %v, want ErrCorrupt", err)
	}
}

func TestTranslateEntry(t *testing.T) {
	member := `{"id":5,"peerURLs":["http://a:2380"],"name":"m5","clientURLs":["http://a:2379"]}`
	cc, _ := (&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: 5, Context: []byte(member)}).Marshal()
	e, err := TranslateEntry(raftpb.Entry{Type: raftpb.EntryConfChange, Index: 3, Term: 2, Data: cc})
	if err != nil {
		t.Fatal(err)
	}
	var got raftpb.ConfChange
	var m membershippb.Member
	if err := got.Unmarshal(e.Data); err != nil || m.Unmarshal(got.Context) != nil {
		t.Fatalf("translated conf change does not decode: %v", err)
	}
	if e.Index != 3 || e.Term != 2 || m.ID != 5 || m.RaftAttributes.PeerUrls[0] != "http://a:2380" || m.MemberAttributes.Name != "m5" {
		t.Fatalf("translated %+v member %v", e, &m)
	}
	v2, _ := (&pb.Request{ID: 9, Method: "PUT", Path: "/0/version", Val: "3.5.0"}).Marshal()
	e, err = TranslateEntry(raftpb.Entry{Type: raftpb.EntryNormal, Index: 4, Data: v2})
	var req pb.InternalRaftRequest
	if err != nil || req.Unmarshal(e.Data) != nil || req.ClusterVersionSet == nil || req.ClusterVersionSet.Ver != "3.5.0" || req.Header.ID != 9 {
		t.Fatalf("v2 cluster version: %v %v", err, &req)
	}
	attrs, _ := (&pb.Request{ID: 10, Method: "PUT", Path: "/0/members/5/attributes", Val: `{"name":"m5","clientURLs":["http://a:2379"]}`}).Marshal()
	e, err = TranslateEntry(raftpb.Entry{Type: raftpb.EntryNormal, Index: 5, Data: attrs})
	req.Reset()
	if err != nil || req.Unmarshal(e.Data) != nil || req.ClusterMemberAttrSet == nil || req.ClusterMemberAttrSet.Member_ID != 5 || req.ClusterMemberAttrSet.MemberAttributes.Name != "m5" {
		t.Fatalf("v2 member attributes: %v %v", err, &req)
	}
	put, _ := (&pb.InternalRaftRequest{Header: &pb.RequestHeader{ID: 11}, Put: &pb.PutRequest{Key: []byte("k")}}).Marshal()
	if e, err = TranslateEntry(raftpb.Entry{Type: raftpb.EntryNormal, Index: 6, Data: put}); err != nil || string(e.Data) != string(put) {
		t.Fatalf("a v3 request must stay as it is: %v", err)
	}
}
