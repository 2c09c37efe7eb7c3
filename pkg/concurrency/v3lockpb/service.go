package v3lockpb

import (
	"context"

	"google.golang.org/grpc"
)

// The service's full method names, etcd's.
const (
	LockMethod   = "/v3lockpb.Lock/Lock"
	UnlockMethod = "/v3lockpb.Lock/Unlock"
)

// LockClient calls the Lock service.
type LockClient interface {
	// Lock blocks until the named lock is acquired under the request's
	// lease and returns the key that represents ownership.
	Lock(ctx context.Context, in *LockRequest, opts ...grpc.CallOption) (*LockResponse, error)
	// Unlock releases the lock represented by a key Lock returned.
	Unlock(ctx context.Context, in *UnlockRequest, opts ...grpc.CallOption) (*UnlockResponse, error)
}

type lockClient struct{ cc grpc.ClientConnInterface }

// NewLockClient returns a client of the Lock service on cc.
func NewLockClient(cc grpc.ClientConnInterface) LockClient { return &lockClient{cc: cc} }

func (c *lockClient) Lock(ctx context.Context, in *LockRequest, opts ...grpc.CallOption) (*LockResponse, error) {
	out := new(LockResponse)
	if err := c.cc.Invoke(ctx, LockMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *lockClient) Unlock(ctx context.Context, in *UnlockRequest, opts ...grpc.CallOption) (*UnlockResponse, error) {
	out := new(UnlockResponse)
	if err := c.cc.Invoke(ctx, UnlockMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// LockServer implements the Lock service.
type LockServer interface {
	Lock(context.Context, *LockRequest) (*LockResponse, error)
	Unlock(context.Context, *UnlockRequest) (*UnlockResponse, error)
}

// RegisterLockServer registers srv as the Lock service on s.
func RegisterLockServer(s grpc.ServiceRegistrar, srv LockServer) {
	s.RegisterService(serviceDesc(), srv)
}

// serviceDesc describes the service to gRPC. It is built per call rather
// than held in a package variable: registration happens once per server.
func serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "v3lockpb.Lock",
		HandlerType: (*LockServer)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Lock", Handler: lockHandler},
			{MethodName: "Unlock", Handler: unlockHandler},
		},
		Streams:  []grpc.StreamDesc{},
		Metadata: "v3lock.proto",
	}
}

func lockHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(LockRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(LockServer).Lock(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: LockMethod}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(LockServer).Lock(ctx, req.(*LockRequest))
	})
}

func unlockHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(UnlockRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(LockServer).Unlock(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: UnlockMethod}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(LockServer).Unlock(ctx, req.(*UnlockRequest))
	})
}
