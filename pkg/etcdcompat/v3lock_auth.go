package etcdcompat

import (
	"context"

	"google.golang.org/grpc"

	"github.com/metastore-io/metastore/internal/auth"
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
// metadata to its outgoing metadata, and the Common Name of its client
// certificate, which names the user when there is no token
// (--client-cert-auth): the loopback connection carries no certificate of
// the caller's, so the server believes the name from this metadata on
// that connection only (internal/auth's LoopbackCommonNameKey).
func forwardCredentials(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, k := range credentialKeys {
		if v := md.Get(k); len(v) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, k, v[0])
		}
	}
	if cn, ok := auth.CallerCommonName(ctx); ok {
		ctx = metadata.AppendToOutgoingContext(ctx, auth.LoopbackCommonNameKey, cn)
	}
	return ctx
}

func forwardCredentialsUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(forwardCredentials(ctx), method, req, reply, cc, opts...)
}

func forwardCredentialsStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(forwardCredentials(ctx), desc, cc, method, opts...)
}
