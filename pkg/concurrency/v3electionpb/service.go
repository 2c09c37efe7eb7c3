package v3electionpb

import (
	"context"

	"google.golang.org/grpc"
)

// The service's full method names, etcd's.
const (
	CampaignMethod = "/v3electionpb.Election/Campaign"
	ProclaimMethod = "/v3electionpb.Election/Proclaim"
	LeaderMethod   = "/v3electionpb.Election/Leader"
	ObserveMethod  = "/v3electionpb.Election/Observe"
	ResignMethod   = "/v3electionpb.Election/Resign"
)

// ElectionClient calls the Election service.
type ElectionClient interface {
	// Campaign blocks until the request's lease leads the election.
	Campaign(ctx context.Context, in *CampaignRequest, opts ...grpc.CallOption) (*CampaignResponse, error)
	// Proclaim changes the leader's value without a new election.
	Proclaim(ctx context.Context, in *ProclaimRequest, opts ...grpc.CallOption) (*ProclaimResponse, error)
	// Leader returns the current leader.
	Leader(ctx context.Context, in *LeaderRequest, opts ...grpc.CallOption) (*LeaderResponse, error)
	// Observe streams the leader's values and every change of leader.
	Observe(ctx context.Context, in *LeaderRequest, opts ...grpc.CallOption) (Election_ObserveClient, error)
	// Resign gives leadership up.
	Resign(ctx context.Context, in *ResignRequest, opts ...grpc.CallOption) (*ResignResponse, error)
}

// Election_ObserveClient receives Observe's stream.
type Election_ObserveClient interface {
	Recv() (*LeaderResponse, error)
	grpc.ClientStream
}

// Election_ObserveServer sends Observe's stream.
type Election_ObserveServer interface {
	Send(*LeaderResponse) error
	grpc.ServerStream
}

type electionClient struct{ cc grpc.ClientConnInterface }

// NewElectionClient returns a client of the Election service on cc.
func NewElectionClient(cc grpc.ClientConnInterface) ElectionClient { return &electionClient{cc: cc} }

func (c *electionClient) Campaign(ctx context.Context, in *CampaignRequest, opts ...grpc.CallOption) (*CampaignResponse, error) {
	out := new(CampaignResponse)
	if err := c.cc.Invoke(ctx, CampaignMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *electionClient) Proclaim(ctx context.Context, in *ProclaimRequest, opts ...grpc.CallOption) (*ProclaimResponse, error) {
	out := new(ProclaimResponse)
	if err := c.cc.Invoke(ctx, ProclaimMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *electionClient) Leader(ctx context.Context, in *LeaderRequest, opts ...grpc.CallOption) (*LeaderResponse, error) {
	out := new(LeaderResponse)
	if err := c.cc.Invoke(ctx, LeaderMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *electionClient) Resign(ctx context.Context, in *ResignRequest, opts ...grpc.CallOption) (*ResignResponse, error) {
	out := new(ResignResponse)
	if err := c.cc.Invoke(ctx, ResignMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *electionClient) Observe(ctx context.Context, in *LeaderRequest, opts ...grpc.CallOption) (Election_ObserveClient, error) {
	stream, err := c.cc.NewStream(ctx, &serviceDesc().Streams[0], ObserveMethod, opts...)
	if err != nil {
		return nil, err
	}
	x := &observeClient{stream}
	if err := x.SendMsg(in); err != nil {
		return nil, err
	}
	if err := x.CloseSend(); err != nil {
		return nil, err
	}
	return x, nil
}

type observeClient struct{ grpc.ClientStream }

func (x *observeClient) Recv() (*LeaderResponse, error) {
	m := new(LeaderResponse)
	if err := x.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// ElectionServer implements the Election service.
type ElectionServer interface {
	Campaign(context.Context, *CampaignRequest) (*CampaignResponse, error)
	Proclaim(context.Context, *ProclaimRequest) (*ProclaimResponse, error)
	Leader(context.Context, *LeaderRequest) (*LeaderResponse, error)
	Observe(*LeaderRequest, Election_ObserveServer) error
	Resign(context.Context, *ResignRequest) (*ResignResponse, error)
}

// RegisterElectionServer registers srv as the Election service on s.
func RegisterElectionServer(s grpc.ServiceRegistrar, srv ElectionServer) {
	s.RegisterService(serviceDesc(), srv)
}

// serviceDesc describes the service to gRPC; built per call rather than
// held in a package variable.
func serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "v3electionpb.Election",
		HandlerType: (*ElectionServer)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Campaign", Handler: unary(CampaignMethod, ElectionServer.Campaign)},
			{MethodName: "Proclaim", Handler: unary(ProclaimMethod, ElectionServer.Proclaim)},
			{MethodName: "Leader", Handler: unary(LeaderMethod, ElectionServer.Leader)},
			{MethodName: "Resign", Handler: unary(ResignMethod, ElectionServer.Resign)},
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "Observe", Handler: observeHandler, ServerStreams: true},
		},
		Metadata: "v3election.proto",
	}
}

// unary adapts one unary method of ElectionServer to gRPC's handler shape.
func unary[Req, Resp any](fullMethod string, call func(ElectionServer, context.Context, *Req) (*Resp, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(Req)
		if err := dec(in); err != nil {
			return nil, err
		}
		if interceptor == nil {
			return call(srv.(ElectionServer), ctx, in)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return call(srv.(ElectionServer), ctx, req.(*Req))
		})
	}
}

func observeHandler(srv any, stream grpc.ServerStream) error {
	in := new(LeaderRequest)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	return srv.(ElectionServer).Observe(in, &observeServer{stream})
}

type observeServer struct{ grpc.ServerStream }

func (x *observeServer) Send(m *LeaderResponse) error { return x.SendMsg(m) }
