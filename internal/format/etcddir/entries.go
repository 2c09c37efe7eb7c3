package etcddir

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/etcddb"
)

// etcd's v2 store paths that etcd 3.5 still writes through raft: a
// member publishing its attributes, and the cluster version
// (server/etcdserver/api/membership/store.go).
var (
	memberAttributesPath = regexp.MustCompile(`^/0/members/[0-9a-f]+/attributes$`)
	clusterVersionPath   = "/0/version"
)

// TranslateEntry rewrites an entry of etcd's log into the entry MetaStore
// applies to the same effect; index, term and type stay. Two things
// differ: the member record in a conf change's context is etcd's JSON
// where MetaStore's is a membershippb.Member, and etcd 3.5 proposes a
// member's attributes and the cluster version as v2 requests, which etcd
// 3.6 turns into their v3 requests when it applies them (v2ToV3Request)
// and so does this. Any other v2 request changed only etcd's v2 store,
// which no v3 client sees: it becomes a request with its header alone,
// which MetaStore applies without effect. Requests of the v3 API are
// MetaStore's own, unchanged.
func TranslateEntry(e raftpb.Entry) (raftpb.Entry, error) {
	var err error
	switch e.Type {
	case raftpb.EntryNormal:
		if len(e.Data) > 0 {
			e.Data, err = translateRequest(e.Data)
		}
	case raftpb.EntryConfChange:
		var cc raftpb.ConfChange
		if err = cc.Unmarshal(e.Data); err == nil {
			if cc.Context, err = translateMember(cc.Context); err == nil {
				e.Data, err = cc.Marshal()
			}
		}
	case raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err = cc.Unmarshal(e.Data); err == nil {
			if cc.Context, err = translateMember(cc.Context); err == nil {
				e.Data, err = cc.Marshal()
			}
		}
	}
	if err != nil {
		return e, fmt.Errorf("entry %d: %w", e.Index, err)
	}
	return e, nil
}

// translateMember re-encodes a conf change's member record; an empty
// context (a removal) stays empty.
func translateMember(ctx []byte) ([]byte, error) {
	if len(ctx) == 0 {
		return ctx, nil
	}
	m, err := etcddb.DecodeMember(ctx)
	if err != nil {
		return nil, err
	}
	return m.Marshal()
}

// translateRequest decodes a normal entry's data as etcd does: an
// InternalRaftRequest, or else a bare v2 request (etcd 3.5's
// backward-compatible form).
func translateRequest(data []byte) ([]byte, error) {
	var req pb.InternalRaftRequest
	if err := req.Unmarshal(data); err != nil {
		var v2 pb.Request
		if err := v2.Unmarshal(data); err != nil {
			return nil, fmt.Errorf("neither a v3 nor a v2 request: %w", err)
		}
		return fromV2(&v2).Marshal()
	}
	if req.V2 != nil {
		return fromV2(req.V2).Marshal()
	}
	return data, nil
}

// fromV2 is etcd 3.6's v2ToV3Request, without its panic on the requests
// etcd 3.6 no longer accepts.
func fromV2(r *pb.Request) *pb.InternalRaftRequest {
	req := &pb.InternalRaftRequest{Header: &pb.RequestHeader{ID: r.ID}}
	if r.Method != "PUT" {
		return req
	}
	switch {
	case memberAttributesPath.MatchString(r.Path):
		id, err := strconv.ParseUint(path.Base(path.Dir(r.Path)), 16, 64)
		var attrs struct {
			Name       string   `json:"name,omitempty"`
			ClientURLs []string `json:"clientURLs,omitempty"`
		}
		if err != nil || json.Unmarshal([]byte(r.Val), &attrs) != nil {
			return req // etcd would panic; nothing a client saw depended on it
		}
		req.ClusterMemberAttrSet = &membershippb.ClusterMemberAttrSetRequest{Member_ID: id,
			MemberAttributes: &membershippb.Attributes{Name: attrs.Name, ClientUrls: attrs.ClientURLs}}
	case r.Path == clusterVersionPath:
		req.ClusterVersionSet = &membershippb.ClusterVersionSetRequest{Ver: r.Val}
	}
	return req
}
