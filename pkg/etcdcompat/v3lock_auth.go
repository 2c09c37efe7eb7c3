package etcdcompat

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The Lock and Election services run their requests through an
// in-process client against this very server, as etcd's v3lock and
// v3election do through its v3client. etcd's v3client hands the caller's
// context to the server, so the caller's token names the user of every
// request the service makes; over a real client connection the token has
// to be forwarded from the incoming call to the outgoing ones.

// credentialKeys are the metadata that carry a token (clientv3's "token",
// the JSON gateway's "authorization").
var credentialKeys = []string{"token", "authorization"}

// forwardCredentials copies the caller's token from ctx's incoming
// metadata to its outgoing metadata.
func forwardCredentials(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	for _, k := range credentialKeys {
		if v := md.Get(k); len(v) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v[0])
		}
	}
	return ctx
}

func forwardCredentialsUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(forwardCredentials(ctx), method, req, reply, cc, opts...)
}

func forwardCredentialsStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(forwardCredentials(ctx), desc, cc, method, opts...)
}
