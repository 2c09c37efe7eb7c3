package etcdcompat

import (
	"context"
	"errors"
	"net/http"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
)

// ErrMissingLeaderKey is returned by Proclaim and Resign without a leader
// key; the text is etcd's.
var ErrMissingLeaderKey = errors.New(`"leader" field must be provided`)

// noLease is the lease of the sessions Leader and Observe use: they only
// read, and etcd uses the same placeholder.
const noLease = -1

// electionService is etcd's v3election service on pkg/concurrency.
type electionService struct {
	client *clientv3.Client
}

// NewElectionServer returns etcd's Election service (Campaign, Proclaim,
// Leader, Observe, Resign) implemented on pkg/concurrency over client, as
// etcd's v3election.NewElectionServer is on its own concurrency package.
func NewElectionServer(client *clientv3.Client) v3electionpb.ElectionServer {
	return &electionService{client: client}
}

// Campaign waits until the caller's lease leads the election.
func (s *electionService) Campaign(ctx context.Context, req *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	session, err := callerSession(ctx, s.client, req.Lease)
	if err != nil {
		return nil, err
	}
	e := concurrency.NewElection(session, string(req.Name))
	if err := e.Campaign(ctx, string(req.Value)); err != nil {
		return nil, err
	}
	return &v3electionpb.CampaignResponse{
		Header: e.Header(),
		Leader: &v3electionpb.LeaderKey{
			Name:  req.Name,
			Key:   []byte(e.Key()),
			Rev:   e.Rev(),
			Lease: int64(session.Lease()),
		},
	}, nil
}

// Proclaim sets the value of a leadership won by Campaign.
func (s *electionService) Proclaim(ctx context.Context, req *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	if req.Leader == nil {
		return nil, ErrMissingLeaderKey
	}
	e, err := s.resume(ctx, req.Leader)
	if err != nil {
		return nil, err
	}
	if err := e.Proclaim(ctx, string(req.Value)); err != nil {
		return nil, err
	}
	return &v3electionpb.ProclaimResponse{Header: e.Header()}, nil
}

// Resign gives up a leadership won by Campaign.
func (s *electionService) Resign(ctx context.Context, req *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	if req.Leader == nil {
		return nil, ErrMissingLeaderKey
	}
	e, err := s.resume(ctx, req.Leader)
	if err != nil {
		return nil, err
	}
	if err := e.Resign(ctx); err != nil {
		return nil, err
	}
	return &v3electionpb.ResignResponse{Header: e.Header()}, nil
}

// resume rebuilds the Election a LeaderKey describes. Campaign's prefix is
// Name + "/", and ResumeElection takes the prefix as given, so, exactly as
// in etcd, the resumed election works on the leader key and revision only.
func (s *electionService) resume(ctx context.Context, leader *v3electionpb.LeaderKey) (*concurrency.Election, error) {
	session, err := callerSession(ctx, s.client, leader.Lease)
	if err != nil {
		return nil, err
	}
	return concurrency.ResumeElection(session, string(leader.Name), string(leader.Key), leader.Rev), nil
}

// Leader returns the current leader, or etcd's "election: no leader".
func (s *electionService) Leader(ctx context.Context, req *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	session, err := callerSession(ctx, s.client, noLease)
	if err != nil {
		return nil, err
	}
	resp, err := concurrency.NewElection(session, string(req.Name)).Leader(ctx)
	if err != nil {
		return nil, err
	}
	return &v3electionpb.LeaderResponse{Header: resp.Header, Kv: resp.Kvs[0]}, nil
}

// Observe streams the leader and every change, until the caller leaves or
// the underlying watch fails.
func (s *electionService) Observe(req *v3electionpb.LeaderRequest, stream v3electionpb.Election_ObserveServer) error {
	ctx := stream.Context()
	session, err := callerSession(ctx, s.client, noLease)
	if err != nil {
		return err
	}
	observed := concurrency.NewElection(session, string(req.Name)).Observe(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-observed:
			if !ok {
				// Observe closes on ctx's end or a failed watch: report
				// the former as such, the latter as a clean end, as etcd.
				return ctx.Err()
			}
			if err := stream.Send(&v3electionpb.LeaderResponse{Header: resp.Header, Kv: resp.Kvs[0]}); err != nil {
				return err
			}
		}
	}
}

// registerElectionGateway adds etcd's JSON routes of the Election service,
// POST /v3/election/{campaign,proclaim,leader,observe,resign}, forwarding
// to conn. Observe streams newline-delimited results, as etcd's does.
func registerElectionGateway(_ context.Context, mux *gw.ServeMux, conn *grpc.ClientConn) error {
	client := v3electionpb.NewElectionClient(conn)
	return errors.Join(
		gatewayRoute(mux, "/v3/election/campaign", v3electionpb.CampaignMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3electionpb.CampaignRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Campaign(ctx, in, opts...)
			}),
		gatewayRoute(mux, "/v3/election/proclaim", v3electionpb.ProclaimMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3electionpb.ProclaimRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Proclaim(ctx, in, opts...)
			}),
		gatewayRoute(mux, "/v3/election/leader", v3electionpb.LeaderMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3electionpb.LeaderRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Leader(ctx, in, opts...)
			}),
		gatewayRoute(mux, "/v3/election/resign", v3electionpb.ResignMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3electionpb.ResignRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Resign(ctx, in, opts...)
			}),
		mux.HandlePath(http.MethodPost, "/v3/election/observe", func(w http.ResponseWriter, req *http.Request, _ map[string]string) {
			observeGateway(mux, client, w, req)
		}),
	)
}

// observeGateway serves the Observe stream over HTTP the way generated
// grpc-gateway code serves server streams.
func observeGateway(mux *gw.ServeMux, client v3electionpb.ElectionClient, w http.ResponseWriter, req *http.Request) {
	const path = "/v3/election/observe"
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	inbound, outbound := gw.MarshalerForRequest(mux, req)
	ctx, err := gw.AnnotateContext(ctx, mux, req, v3electionpb.ObserveMethod, gw.WithHTTPPathPattern(path))
	if err != nil {
		gw.HTTPError(ctx, mux, outbound, w, req, err)
		return
	}
	in := new(v3electionpb.LeaderRequest)
	if err := gatewayDecode(inbound, req)(in); err != nil {
		gw.HTTPError(ctx, mux, outbound, w, req, err)
		return
	}
	stream, err := client.Observe(ctx, in)
	var md gw.ServerMetadata
	if err == nil {
		md.HeaderMD, err = stream.Header()
	}
	ctx = gw.NewServerMetadataContext(ctx, md)
	if err != nil {
		gw.HTTPError(ctx, mux, outbound, w, req, err)
		return
	}
	gw.ForwardResponseStream(ctx, mux, outbound, w, req, func() (proto.Message, error) {
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		return protoadapt.MessageV2Of(resp), nil
	}, mux.GetForwardResponseOptions()...)
}
