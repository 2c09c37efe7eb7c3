package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// dumpKV lists every key as of the store's revision (rev=N: as of N).
func (e *env) dumpKV(t *testing.T, d *datadriven.TestData) string {
	resp, err := e.kv.Range(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: intArg(t, d, "rev", 0)})
	if err != nil {
		return fmtErr(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rev=%d compacted=%d\n", e.kv.Rev(), e.kv.CompactRev())
	for _, kv := range resp.Kvs {
		fmt.Fprintf(&b, "%s=%s create=%d mod=%d ver=%d", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version)
		if kv.Lease != 0 {
			fmt.Fprintf(&b, " lease=%d", kv.Lease)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// dumpLeases lists the lease table and, beside it, the stored records.
func (e *env) dumpLeases(t *testing.T) string {
	records := e.leaseRecords(t)
	var b strings.Builder
	for _, id := range e.lessor.Leases() {
		r := records[id]
		delete(records, id)
		fmt.Fprintf(&b, "lease %d ttl=%d remaining=%d keys=%s\n", id, r.TTL, r.RemainingTTL, fmtKeys(e.lessor.Keys(id)))
	}
	for _, id := range sortedKeys(records) {
		fmt.Fprintf(&b, "stored record of lease %d not in the table\n", id)
	}
	if b.Len() == 0 {
		return "no leases"
	}
	return b.String()
}

// fmtKeys lists a lease's keys sorted (the lease table keeps them in a
// set, in no order).
func fmtKeys(keys [][]byte) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = string(k)
	}
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

func (e *env) dumpMembers() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %x version=%q", e.cluster.ID(), e.cluster.Version())
	if d := e.cluster.Downgrade(); d.Enabled {
		fmt.Fprintf(&b, " downgrade=%q", d.TargetVersion)
	}
	b.WriteString("\n")
	b.WriteString(fmtMembers(e.cluster.Members()))
	// What a restart (or a snapshot's restore) reads back must be the
	// same: the member list as persisted in the entries' batches.
	reloaded := membership.New(e.cluster.LocalID(), e.cluster.ID())
	if err := reloaded.Load(e.kv); err != nil {
		return fmt.Sprintf("reload: %v", err)
	}
	if reloaded.Version() != e.cluster.Version() || reloaded.Downgrade() != e.cluster.Downgrade() {
		fmt.Fprintf(&b, "reloaded differs: version=%q downgrade=%+v\n", reloaded.Version(), reloaded.Downgrade())
	}
	return b.String()
}

func fmtMembers(ms []*membershippb.Member) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "member %x", m.ID)
		if m.MemberAttributes != nil && m.MemberAttributes.Name != "" {
			fmt.Fprintf(&b, " name=%s clients=%v", m.MemberAttributes.Name, m.MemberAttributes.ClientUrls)
		}
		if m.RaftAttributes != nil {
			fmt.Fprintf(&b, " peers=%v", m.RaftAttributes.PeerUrls)
			if m.RaftAttributes.IsLearner {
				b.WriteString(" learner")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtAlarms(active []*pb.AlarmMember) string {
	if len(active) == 0 {
		return "no alarms"
	}
	s := make([]string, len(active))
	for i, a := range active {
		s[i] = fmt.Sprintf("%x:%s", a.MemberID, a.Alarm)
	}
	return strings.Join(s, " ")
}

// dumpAuth shows whether auth is on, its revision, the users with their
// roles and the roles with their permissions.
func (e *env) dumpAuth(t *testing.T) string {
	var b strings.Builder
	fmt.Fprintf(&b, "enabled=%v rev=%d\n", e.auth.IsAuthEnabled(), e.auth.Revision())
	for _, u := range e.auth.UserList() {
		roles, err := e.auth.UserGet(u)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "user %s roles=%v\n", u, roles)
	}
	for _, r := range e.auth.RoleList() {
		perms, err := e.auth.RoleGet(r)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "role %s", r)
		for _, p := range perms {
			end := string(p.RangeEnd)
			if end == "\x00" {
				end = `\0`
			}
			fmt.Fprintf(&b, " %s[%s,%s)", p.PermType, p.Key, end)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// dumpVetoes lists the conf changes the member list refused.
func (e *env) dumpVetoes(t *testing.T) string {
	var b strings.Builder
	err := e.kv.AscendAux(kvstore.BucketConfChangeVeto, func(k, v []byte) bool {
		fmt.Fprintf(&b, "index %x: %s\n", k, v)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() == 0 {
		return "no vetoes"
	}
	return b.String()
}

func fmtErr(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}

// fmtResult shows what a proposer was answered.
func fmtResult(r Result) string {
	if r.Err != nil {
		return fmtErr(r.Err)
	}
	switch resp := r.Resp.(type) {
	case *pb.PutResponse:
		s := fmt.Sprintf("rev=%d", resp.Header.Revision)
		if resp.PrevKv != nil {
			s += fmt.Sprintf(" prev=%s", resp.PrevKv.Value)
		}
		return s
	case *pb.DeleteRangeResponse:
		return fmt.Sprintf("rev=%d deleted=%d", resp.Header.Revision, resp.Deleted)
	case *pb.TxnResponse:
		return fmtTxn(resp)
	case *pb.LeaseGrantResponse:
		return fmt.Sprintf("id=%d ttl=%d rev=%d", resp.ID, resp.TTL, resp.Header.Revision)
	case *pb.LeaseRevokeResponse:
		return fmt.Sprintf("rev=%d", resp.Header.Revision)
	case *pb.LeaseCheckpointResponse:
		return fmt.Sprintf("rev=%d", resp.Header.Revision)
	case *pb.AlarmResponse:
		return fmtAlarms(resp.Alarms)
	case []*membershippb.Member:
		return "members\n" + strings.TrimSuffix(fmtMembers(resp), "\n")
	case *pb.AuthStatusResponse:
		return fmt.Sprintf("enabled=%v rev=%d", resp.Enabled, resp.AuthRevision)
	case *pb.AuthUserGetResponse:
		return fmt.Sprintf("roles=%v", resp.Roles)
	}
	// The responses that carry nothing but their type (CompactionResponse,
	// AuthEnableResponse, ClusterVersionSetRequest, ...).
	return strings.TrimPrefix(fmt.Sprintf("%T", r.Resp), "*")
}

func fmtTxn(resp *pb.TxnResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rev=%d succeeded=%v", resp.Header.Revision, resp.Succeeded)
	for _, op := range resp.Responses {
		switch o := op.Response.(type) {
		case *pb.ResponseOp_ResponsePut:
			b.WriteString(" put")
		case *pb.ResponseOp_ResponseDeleteRange:
			fmt.Fprintf(&b, " deleted=%d", o.ResponseDeleteRange.Deleted)
		case *pb.ResponseOp_ResponseRange:
			b.WriteString(" range[")
			for i, kv := range o.ResponseRange.Kvs {
				if i > 0 {
					b.WriteString(" ")
				}
				fmt.Fprintf(&b, "%s=%s", kv.Key, kv.Value)
			}
			b.WriteString("]")
		case *pb.ResponseOp_ResponseTxn:
			b.WriteString(" txn")
		}
	}
	return b.String()
}

func fmtNotice(n Notice) string {
	switch n.Kind {
	case NoticeNoSpace:
		ids := make([]string, len(n.Held))
		for i, p := range n.Held {
			ids[i] = fmt.Sprintf("%d (%s)", p.ID, fmtResult(p.Result))
		}
		return "notice: raise NOSPACE, then answer " + strings.Join(ids, ", ")
	case NoticeClusterVersion:
		return fmt.Sprintf("notice: record the cluster version, leading in term %d", n.Term)
	}
	return fmt.Sprintf("notice of kind %d", n.Kind)
}
