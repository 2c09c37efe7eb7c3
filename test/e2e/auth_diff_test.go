package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

// The differential test of authorisation: the same random users, roles
// and permissions, then the same random requests (ranges, puts, deletes,
// txns nested two deep, lease time-to-live and revoke, watch creations,
// permission changes) as random users, sent to a real etcd 3.6 and to
// MetaStore side by side; every decision — success, or the gRPC code and
// message of the refusal — must be the same. METASTORE_AUTHDIFF_SEED
// replays one seed, METASTORE_AUTHDIFF_OPS sets the request count.
const authDiffOps = 300

// authDiffKeys is the key space: few keys, so ranges, prefixes and
// permissions overlap often.
var authDiffKeys = []string{"a", "a/", "a/b", "a/c", "ab", "b", "b/", "b/x", "c", "z"}

// authDiffSide is one server under test with a client per user.
type authDiffSide struct {
	name    string
	clients map[string]*clientv3.Client // by user; "" is anonymous
}

func TestAuthDifferential(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*testTimeout)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("METASTORE_AUTHDIFF_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	ops := authDiffOps
	if s := os.Getenv("METASTORE_AUTHDIFF_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (METASTORE_AUTHDIFF_SEED=%d replays it)", seed, seed)
	users := []string{"u1", "u2", "u3"}
	sides := []*authDiffSide{}
	var roots []*clientv3.Client // set-up clients, anonymous once auth is on
	var clusters []*framework.Cluster
	for _, target := range []framework.Target{framework.TargetEtcd, framework.TargetMetaStore} {
		c := framework.NewCluster(t, anonymousCapable(framework.ClusterConfig{Target: target}))
		clusters = append(clusters, c)
		roots = append(roots, c.NewClient(t))
		sides = append(sides, &authDiffSide{name: string(target), clients: map[string]*clientv3.Client{}})
	}
	// The same set-up on both, from the same stream.
	setup := rand.New(rand.NewPCG(seed, 1))
	plan := authDiffSetup(setup, users)
	for i, root := range roots {
		for _, step := range plan {
			if err := step(ctx, root); err != nil {
				t.Fatalf("%s: set-up: %v", sides[i].name, err)
			}
		}
	}
	for i, side := range sides {
		c := clusters[i]
		eps := c.ClientURLs()
		side.clients["root"] = clientAs(t, c, eps, "root", authRootPassword)
		side.clients[""] = clientAs(t, c, eps, "", "")
		for _, u := range users {
			side.clients[u] = clientAs(t, c, eps, u, authUserPassword)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	tally := map[string]int{} // outcome kind -> count, to show the stream's mix
	for i := range ops {
		user := []string{"", "root", "u1", "u2", "u3", "u1", "u2", "u3"}[rng.IntN(8)]
		op := authDiffRequest(rng, users)
		var got [2]string
		for s, side := range sides {
			got[s] = op.run(ctx, side.clients[user], side.clients["root"])
		}
		if got[0] != got[1] {
			t.Fatalf("request %d (%s as %q): etcd %s, MetaStore %s", i, op.desc, user, got[0], got[1])
		}
		kind, _, _ := strings.Cut(got[0], " ")
		tally[kind]++
	}
	t.Logf("outcomes: %v", tally)
	if tally["PermissionDenied"] == 0 || tally["ok"] == 0 {
		t.Fatalf("the stream drew no refusal or no success (%v): it would not compare decisions", tally)
	}
}

// authDiffStep is one set-up request, made as root before auth is on.
type authDiffStep func(ctx context.Context, root *clientv3.Client) error

// authDiffSetup draws roles with random permissions, users with random
// roles and a little data, then enables auth.
func authDiffSetup(rng *rand.Rand, users []string) []authDiffStep {
	var steps []authDiffStep
	roles := []string{"r1", "r2", "r3", "r4"}
	for _, r := range roles {
		steps = append(steps, func(ctx context.Context, c *clientv3.Client) error { _, err := c.RoleAdd(ctx, r); return err })
		for range rng.IntN(4) {
			p := authDiffPerm(rng)
			steps = append(steps, func(ctx context.Context, c *clientv3.Client) error {
				_, err := c.RoleGrantPermission(ctx, r, string(p.Key), string(p.RangeEnd), clientv3.PermissionType(p.PermType))
				return err
			})
		}
	}
	for _, u := range users {
		steps = append(steps, func(ctx context.Context, c *clientv3.Client) error {
			_, err := c.UserAdd(ctx, u, authUserPassword)
			return err
		})
		for _, r := range roles {
			if rng.IntN(3) == 0 {
				steps = append(steps, func(ctx context.Context, c *clientv3.Client) error { _, err := c.UserGrantRole(ctx, u, r); return err })
			}
		}
	}
	for _, k := range authDiffKeys {
		steps = append(steps, func(ctx context.Context, c *clientv3.Client) error { _, err := c.Put(ctx, k, "v"); return err })
	}
	// A lease with two keys, granted with the same ID on both servers.
	steps = append(steps, func(ctx context.Context, c *clientv3.Client) error {
		_, err := pb.NewLeaseClient(c.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 77, TTL: 3600})
		if err != nil {
			return err
		}
		for _, k := range []string{"a/b", "b/x"} {
			if _, err := c.Put(ctx, k, "leased", clientv3.WithLease(77)); err != nil {
				return err
			}
		}
		if _, err := c.UserAdd(ctx, "root", authRootPassword); err != nil {
			return err
		}
		if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
			return err
		}
		_, err = c.AuthEnable(ctx)
		return err
	})
	return steps
}

// authDiffPerm draws a permission: a key, a range, a prefix or from a key.
func authDiffPerm(rng *rand.Rand) clientv3.Permission {
	key := authDiffKeys[rng.IntN(len(authDiffKeys))]
	p := clientv3.Permission{PermType: authpb.Permission_Type(rng.IntN(3)), Key: []byte(key)}
	switch rng.IntN(4) {
	case 1:
		p.RangeEnd = []byte(clientv3.GetPrefixRangeEnd(key))
	case 2:
		p.RangeEnd = []byte{0}
	case 3:
		end := authDiffKeys[rng.IntN(len(authDiffKeys))]
		if end > key {
			p.RangeEnd = []byte(end)
		}
	}
	return p
}

// authDiffRange draws [key, end) in the forms clients use.
func authDiffRange(rng *rand.Rand) (key, end []byte) {
	k := authDiffKeys[rng.IntN(len(authDiffKeys))]
	switch rng.IntN(4) {
	case 0:
		return []byte(k), nil
	case 1:
		return []byte(k), []byte(clientv3.GetPrefixRangeEnd(k))
	case 2:
		return []byte(k), []byte{0}
	default:
		return []byte(k), []byte(authDiffKeys[rng.IntN(len(authDiffKeys))])
	}
}

// authDiffOp is one request and how to turn its outcome into text.
type authDiffOp struct {
	desc string
	run  func(ctx context.Context, cli, root *clientv3.Client) string
}

// outcome is "ok" or the refusal's gRPC code and message.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return fmt.Sprintf("%s %q", ee.Code(), ee.Error())
	}
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s %q", st.Code(), st.Message())
	}
	return fmt.Sprintf("%v", err)
}

func authDiffRequestOp(rng *rand.Rand, depth int) *pb.RequestOp {
	key, end := authDiffRange(rng)
	switch n := rng.IntN(4); {
	case n == 0:
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key, RangeEnd: end}}}
	case n == 1:
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: []byte("t"), PrevKv: rng.IntN(3) == 0}}}
	case n == 2 || depth >= 2:
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: key, RangeEnd: end, PrevKv: rng.IntN(3) == 0}}}
	default:
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: authDiffTxn(rng, depth+1)}}
	}
}

// authDiffTxn draws a txn whose keys are distinct enough for etcd to
// accept it (a duplicate key is refused before any permission check on
// both, which is compared too).
func authDiffTxn(rng *rand.Rand, depth int) *pb.TxnRequest {
	r := &pb.TxnRequest{}
	for range rng.IntN(3) {
		key, end := authDiffRange(rng)
		r.Compare = append(r.Compare, &pb.Compare{Key: key, RangeEnd: end, Target: pb.Compare_VERSION, Result: pb.Compare_GREATER})
	}
	for range rng.IntN(3) {
		r.Success = append(r.Success, authDiffRequestOp(rng, depth))
	}
	for range rng.IntN(3) {
		r.Failure = append(r.Failure, authDiffRequestOp(rng, depth))
	}
	return r
}

// authDiffRequest draws one request.
func authDiffRequest(rng *rand.Rand, users []string) authDiffOp {
	key, end := authDiffRange(rng)
	switch rng.IntN(9) {
	case 0, 1:
		return authDiffOp{fmt.Sprintf("range [%q, %q)", key, end), func(ctx context.Context, cli, _ *clientv3.Client) string {
			resp, err := pb.NewKVClient(cli.ActiveConnection()).Range(ctx, &pb.RangeRequest{Key: key, RangeEnd: end, KeysOnly: true})
			if err != nil {
				return outcome(err)
			}
			return fmt.Sprintf("ok %d", resp.Count)
		}}
	case 2:
		prev := rng.IntN(2) == 0
		lease := int64(0)
		if rng.IntN(4) == 0 {
			lease = 77
		}
		return authDiffOp{fmt.Sprintf("put %q prev_kv=%v lease=%d", key, prev, lease), func(ctx context.Context, cli, _ *clientv3.Client) string {
			_, err := pb.NewKVClient(cli.ActiveConnection()).Put(ctx, &pb.PutRequest{Key: key, Value: []byte("p"), PrevKv: prev, Lease: lease})
			return outcome(err)
		}}
	case 3:
		prev := rng.IntN(2) == 0
		return authDiffOp{fmt.Sprintf("delete [%q, %q) prev_kv=%v", key, end, prev), func(ctx context.Context, cli, _ *clientv3.Client) string {
			_, err := pb.NewKVClient(cli.ActiveConnection()).DeleteRange(ctx, &pb.DeleteRangeRequest{Key: key, RangeEnd: end, PrevKv: prev})
			return outcome(err)
		}}
	case 4, 5:
		txn := authDiffTxn(rng, 0)
		return authDiffOp{"txn " + txn.String(), func(ctx context.Context, cli, _ *clientv3.Client) string {
			resp, err := pb.NewKVClient(cli.ActiveConnection()).Txn(ctx, txn)
			if err != nil {
				return outcome(err)
			}
			return fmt.Sprintf("ok succeeded=%v", resp.Succeeded)
		}}
	case 6:
		return authDiffOp{fmt.Sprintf("watch [%q, %q)", key, end), func(ctx context.Context, cli, _ *clientv3.Client) string {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(wctx)
			if err != nil {
				return outcome(err)
			}
			if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: key, RangeEnd: end}}}); err != nil {
				return outcome(err)
			}
			wr, err := stream.Recv()
			if err != nil {
				return outcome(err)
			}
			return fmt.Sprintf("created=%v canceled=%v reason=%q", wr.Created, wr.Canceled, wr.CancelReason)
		}}
	case 7:
		keys := rng.IntN(2) == 0
		return authDiffOp{fmt.Sprintf("lease time-to-live keys=%v", keys), func(ctx context.Context, cli, _ *clientv3.Client) string {
			resp, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 77, Keys: keys})
			if err != nil {
				return outcome(err)
			}
			return fmt.Sprintf("ok %d keys", len(resp.Keys))
		}}
	default:
		// A permission change by root; the requests after it are checked
		// against the new permissions on both servers.
		role := fmt.Sprintf("r%d", 1+rng.IntN(4))
		p := authpb.Permission(authDiffPerm(rng))
		grant := rng.IntN(2) == 0
		return authDiffOp{fmt.Sprintf("root: grant=%v %s %v", grant, role, p), func(ctx context.Context, _, root *clientv3.Client) string {
			var err error
			if grant {
				_, err = pb.NewAuthClient(root.ActiveConnection()).RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: role, Perm: &p})
			} else {
				_, err = pb.NewAuthClient(root.ActiveConnection()).RoleRevokePermission(ctx, &pb.AuthRoleRevokePermissionRequest{Role: role, Key: p.Key, RangeEnd: p.RangeEnd})
			}
			return outcome(err)
		}}
	}
}
