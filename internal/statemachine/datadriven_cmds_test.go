package statemachine

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/lease"
)

var discardLog = slog.New(slog.DiscardHandler)

// entryFor builds the committed entry a request command stands for. Every
// request carries a header with its request ID (the entry's index, set by
// the caller) and, with user=NAME, the user and the auth revision it was
// checked at (authrev=N, default the current one), as a proposer stamps
// them.
func (e *env) entryFor(t *testing.T, d *datadriven.TestData) (raftpb.Entry, error) {
	if cc, ok, err := e.confChangeFor(t, d); ok || err != nil {
		data, merr := cc.Marshal()
		return raftpb.Entry{Type: raftpb.EntryConfChange, Data: data}, errors.Join(err, merr)
	}
	if d.Cmd == "empty" {
		return raftpb.Entry{Type: raftpb.EntryNormal}, nil
	}
	req, err := e.requestFor(t, d)
	if err != nil {
		return raftpb.Entry{}, err
	}
	req.Header = &pb.RequestHeader{ID: e.index + 1}
	if d.HasArg("user") {
		req.Header.Username = strArg(t, d, "user", "")
		req.Header.AuthRevision = uint64(intArg(t, d, "authrev", int64(e.auth.Revision())))
	}
	data, err := req.Marshal()
	return raftpb.Entry{Type: raftpb.EntryNormal, Data: data}, err
}

// requestFor builds the InternalRaftRequest of a command.
func (e *env) requestFor(t *testing.T, d *datadriven.TestData) (*pb.InternalRaftRequest, error) {
	key := func() []byte { return []byte(strArg(t, d, "k", "")) }
	end := func() []byte { return rangeEnd(strArg(t, d, "end", "")) }
	switch d.Cmd {
	case "put":
		return &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: key(), Value: []byte(strArg(t, d, "v", "")),
			Lease: intArg(t, d, "lease", 0), PrevKv: d.HasArg("prev")}}, nil
	case "delete":
		return &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: key(), RangeEnd: end()}}, nil
	case "txn":
		r, err := parseTxn(d.Input)
		return &pb.InternalRaftRequest{Txn: r}, err
	case "compact":
		return &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: intArg(t, d, "rev", 0)}}, nil
	case "lease-grant":
		return &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: intArg(t, d, "id", 0), TTL: intArg(t, d, "ttl", 0)}}, nil
	case "lease-revoke":
		return &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: intArg(t, d, "id", 0)}}, nil
	case "lease-checkpoint":
		return &pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: []*pb.LeaseCheckpoint{
			{ID: intArg(t, d, "id", 0), Remaining_TTL: intArg(t, d, "remaining", 0)}}}}, nil
	case "alarm":
		action := pb.AlarmRequest_AlarmAction(pb.AlarmRequest_AlarmAction_value[strings.ToUpper(strArg(t, d, "action", "get"))])
		alarm := pb.AlarmType(pb.AlarmType_value[strings.ToUpper(strArg(t, d, "type", "none"))])
		return &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{Action: action, MemberID: uint64(intArg(t, d, "member", 0)), Alarm: alarm}}, nil
	case "attr-set":
		return &pb.InternalRaftRequest{ClusterMemberAttrSet: &membershippb.ClusterMemberAttrSetRequest{
			Member_ID:        uint64(intArg(t, d, "member", 0)),
			MemberAttributes: &membershippb.Attributes{Name: strArg(t, d, "name", ""), ClientUrls: listArg(d, "client")}}}, nil
	case "version-set":
		return &pb.InternalRaftRequest{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: strArg(t, d, "ver", "")}}, nil
	case "downgrade-set":
		return &pb.InternalRaftRequest{DowngradeInfoSet: &membershippb.DowngradeInfoSetRequest{
			Enabled: d.HasArg("enabled"), Ver: strArg(t, d, "ver", "")}}, nil
	}
	return e.authRequestFor(t, d)
}

// authRequestFor builds the Auth service's requests. Users are added
// without a password (no bcrypt in apply tests).
func (e *env) authRequestFor(t *testing.T, d *datadriven.TestData) (*pb.InternalRaftRequest, error) {
	name := func() string { return strArg(t, d, "name", "") }
	switch d.Cmd {
	case "auth-enable":
		return &pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{}}, nil
	case "auth-disable":
		return &pb.InternalRaftRequest{AuthDisable: &pb.AuthDisableRequest{}}, nil
	case "auth-status":
		return &pb.InternalRaftRequest{AuthStatus: &pb.AuthStatusRequest{}}, nil
	case "user-add":
		return &pb.InternalRaftRequest{AuthUserAdd: &pb.AuthUserAddRequest{Name: name(), Options: &authpb.UserAddOptions{NoPassword: true}}}, nil
	case "user-get":
		return &pb.InternalRaftRequest{AuthUserGet: &pb.AuthUserGetRequest{Name: name()}}, nil
	case "role-add":
		return &pb.InternalRaftRequest{AuthRoleAdd: &pb.AuthRoleAddRequest{Name: name()}}, nil
	case "user-grant":
		return &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: name(), Role: strArg(t, d, "role", "")}}, nil
	case "role-grant":
		perm := authpb.Permission_Type(authpb.Permission_Type_value[strings.ToUpper(strArg(t, d, "perm", "readwrite"))])
		return &pb.InternalRaftRequest{AuthRoleGrantPermission: &pb.AuthRoleGrantPermissionRequest{Name: name(),
			Perm: &authpb.Permission{PermType: perm, Key: []byte(strArg(t, d, "k", "")), RangeEnd: rangeEnd(strArg(t, d, "end", ""))}}}, nil
	}
	return nil, fmt.Errorf("unknown command %q", d.Cmd)
}

// confChangeFor builds the conf change of member-add (learner: as a
// learner), member-promote, member-remove and member-update commands; ok
// is false for other commands. The change's ID is the request ID.
func (e *env) confChangeFor(t *testing.T, d *datadriven.TestData) (cc raftpb.ConfChange, ok bool, err error) {
	id := uint64(intArg(t, d, "id", 0))
	member := func() []byte {
		m := &membershippb.Member{ID: id, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: listArg(d, "peer"), IsLearner: d.HasArg("learner")}}
		b, merr := m.Marshal()
		err = merr
		return b
	}
	cc = raftpb.ConfChange{ID: e.index + 1, NodeID: id}
	switch d.Cmd {
	case "member-add":
		cc.Type = raftpb.ConfChangeAddNode
		if d.HasArg("learner") {
			cc.Type = raftpb.ConfChangeAddLearnerNode
		}
		cc.Context = member()
	case "member-promote":
		cc.Type, cc.Context = raftpb.ConfChangeAddNode, member()
	case "member-remove":
		cc.Type = raftpb.ConfChangeRemoveNode
	case "member-update":
		cc.Type, cc.Context = raftpb.ConfChangeUpdateNode, member()
	default:
		return cc, false, nil
	}
	return cc, true, err
}

// parseTxn reads a txn's body, one line each:
//
//	cmp value|version|mod|create KEY =|!=|<|> VALUE
//	then|else put KEY VALUE | delete KEY | range KEY
func parseTxn(input string) (*pb.TxnRequest, error) {
	r := &pb.TxnRequest{}
	for line := range strings.Lines(input) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "cmp":
			c, err := parseCompare(f[1:])
			if err != nil {
				return nil, err
			}
			r.Compare = append(r.Compare, c)
		case "then", "else":
			op, err := parseOp(f[1:])
			if err != nil {
				return nil, err
			}
			if f[0] == "then" {
				r.Success = append(r.Success, op)
			} else {
				r.Failure = append(r.Failure, op)
			}
		default:
			return nil, fmt.Errorf("txn: unknown line %q", line)
		}
	}
	return r, nil
}

func parseCompare(f []string) (*pb.Compare, error) {
	if len(f) != 4 {
		return nil, fmt.Errorf("txn: cmp wants 4 fields, got %v", f)
	}
	results := map[string]pb.Compare_CompareResult{"=": pb.Compare_EQUAL, "!=": pb.Compare_NOT_EQUAL, "<": pb.Compare_LESS, ">": pb.Compare_GREATER}
	c := &pb.Compare{Key: []byte(f[1]), Result: results[f[2]]}
	if f[0] == "value" {
		c.Target, c.TargetUnion = pb.Compare_VALUE, &pb.Compare_Value{Value: []byte(f[3])}
		return c, nil
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("txn: cmp %s: %w", f[0], err)
	}
	switch f[0] {
	case "version":
		c.Target, c.TargetUnion = pb.Compare_VERSION, &pb.Compare_Version{Version: n}
	case "mod":
		c.Target, c.TargetUnion = pb.Compare_MOD, &pb.Compare_ModRevision{ModRevision: n}
	case "create":
		c.Target, c.TargetUnion = pb.Compare_CREATE, &pb.Compare_CreateRevision{CreateRevision: n}
	default:
		return nil, fmt.Errorf("txn: unknown cmp target %q", f[0])
	}
	return c, nil
}

func parseOp(f []string) (*pb.RequestOp, error) {
	switch {
	case len(f) == 3 && f[0] == "put":
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(f[1]), Value: []byte(f[2])}}}, nil
	case len(f) == 2 && f[0] == "delete":
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(f[1])}}}, nil
	case len(f) == 2 && f[0] == "range":
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(f[1])}}}, nil
	}
	return nil, fmt.Errorf("txn: unknown op %v", f)
}

// rangeEnd spells a range end: "" none, "\0" every key from the start.
func rangeEnd(s string) []byte {
	switch s {
	case "":
		return nil
	case `\0`:
		return []byte{0}
	}
	return []byte(s)
}

func strArg(t *testing.T, d *datadriven.TestData, key, def string) string {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	return s
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	var n int64
	d.ScanArgs(t, key, &n)
	return n
}

func listArg(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

// leaseRecords reads the lease bucket: what a restart would recover.
func (e *env) leaseRecords(t *testing.T) map[int64]lease.Record {
	out := map[int64]lease.Record{}
	err := e.kv.AscendAux(lease.Bucket, func(_, v []byte) bool {
		r, err := lease.DecodeRecord(v)
		if err != nil {
			t.Fatalf("decode lease record: %v", err)
		}
		out[r.ID] = r
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys[K int64 | uint64, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
