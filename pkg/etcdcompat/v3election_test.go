package etcdcompat

import (
	"context"
	"net/http"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"

	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
)

// fakeElectionServer answers with canned values derived from the request.
type fakeElectionServer struct{}

func (fakeElectionServer) Campaign(_ context.Context, r *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	return &v3electionpb.CampaignResponse{
		Header: &pb.ResponseHeader{Revision: 4},
		Leader: &v3electionpb.LeaderKey{Name: r.Name, Key: append(append([]byte{}, r.Name...), "/1"...), Rev: 4, Lease: r.Lease},
	}, nil
}

func (fakeElectionServer) Proclaim(_ context.Context, r *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	if r.Leader == nil {
		return nil, ErrMissingLeaderKey
	}
	return &v3electionpb.ProclaimResponse{Header: &pb.ResponseHeader{Revision: r.Leader.Rev + 1}}, nil
}

func (fakeElectionServer) Leader(_ context.Context, r *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	return &v3electionpb.LeaderResponse{Kv: &mvccpb.KeyValue{Key: r.Name, Value: []byte("v")}}, nil
}

func (fakeElectionServer) Resign(_ context.Context, r *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	return &v3electionpb.ResignResponse{Header: &pb.ResponseHeader{Revision: r.Leader.GetRev() + 2}}, nil
}

// Observe sends two leader values, then ends the stream.
func (fakeElectionServer) Observe(r *v3electionpb.LeaderRequest, stream v3electionpb.Election_ObserveServer) error {
	for _, v := range []string{"a", "b"} {
		if err := stream.Send(&v3electionpb.LeaderResponse{Kv: &mvccpb.KeyValue{Key: r.Name, Value: []byte(v)}}); err != nil {
			return err
		}
	}
	return nil
}

// TestElectionGateway: every route takes and returns etcd's JSON, and
// Observe streams one object per message.
func TestElectionGateway(t *testing.T) {
	gs := grpc.NewServer()
	v3electionpb.RegisterElectionServer(gs, fakeElectionServer{})
	h := gatewayFixture(t, gs, registerElectionGateway)

	for _, tc := range []struct{ path, req, want string }{
		{"/v3/election/campaign", `{"name":"ZQ==","lease":"5","value":"dg=="}`,
			`{"header":{"revision":"4"},"leader":{"name":"ZQ==","key":"ZS8x","rev":"4","lease":"5"}}`},
		{"/v3/election/proclaim", `{"leader":{"rev":"4"},"value":"dw=="}`, `{"header":{"revision":"5"}}`},
		{"/v3/election/leader", `{"name":"ZQ=="}`, `{"kv":{"key":"ZQ==","value":"dg=="}}`},
		{"/v3/election/resign", `{"leader":{"rev":"4"}}`, `{"header":{"revision":"6"}}`},
		// Server streams come back as one JSON object per message.
		{"/v3/election/observe", `{"name":"ZQ=="}`,
			`{"result":{"kv":{"key":"ZQ==","value":"YQ=="}}}{"result":{"kv":{"key":"ZQ==","value":"Yg=="}}}`},
	} {
		code, body := postJSON(t, h, tc.path, tc.req)
		if code != http.StatusOK || body != tc.want {
			t.Errorf("POST %s %s: %d %s, want 200 %s", tc.path, tc.req, code, body, tc.want)
		}
	}
	code, body := postJSON(t, h, "/v3/election/proclaim", `{}`)
	if code == http.StatusOK || !strings.Contains(body, `\"leader\"fieldmustbeprovided`) {
		t.Errorf("proclaim without a leader: %d %s", code, body)
	}
}
