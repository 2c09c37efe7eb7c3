package etcdcompat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/protoadapt"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
)

// loopbackBufferBytes sizes each direction of the in-memory connection the
// coordination services use to reach the member's own KV, Lease and Watch.
// bufconn allocates both directions up front and keeps them for the
// member's life; a writer that fills one waits for the reader, so the size
// only bounds how much is in flight: HTTP/2's initial window (64 KiB) is
// what gRPC sends before the peer answers anyway. (It was 1 MiB: 2 MiB of
// every member's live heap, twice that resident under GOGC=100.)
const loopbackBufferBytes = 64 << 10

// loopbackEndpoint is the endpoint the in-process client believes it dials;
// the dialer ignores it and connects to the in-memory listener.
const loopbackEndpoint = "metastore-loopback:0"

// coordination hosts etcd's v3lock and v3election services. Like etcd's
// own, they are clients of the member's KV, Lease and Watch services: they
// run pkg/concurrency (etcd's concurrency package, rewritten) on a clientv3
// client connected to this very gRPC server through an in-memory listener,
// so no port, address or TLS setting is involved and every request they
// make takes the same path as a remote client's.
//
// Use: newCoordination, register on the gRPC server, then serve once every
// service is registered, and close before stopping the gRPC server (the
// client's own streams would otherwise hold a graceful stop open).
type coordination struct {
	listener *bufconn.Listener
	client   *clientv3.Client
	log      *slog.Logger
}

func newCoordination(logger *slog.Logger) (*coordination, error) {
	listener := bufconn.Listen(loopbackBufferBytes)
	client, err := clientv3.New(clientv3.Config{
		Endpoints: []string{loopbackEndpoint},
		// clientv3 logs with zap; its retry chatter is not ours to show.
		Logger: zap.NewNop(),
		// One attempt per call, as etcd's in-process client (v3client,
		// which calls the server directly) makes: clientv3 would retry a
		// call the member gave up on after its request timeout, without
		// quorum for ever, and hide the member's error. The services and
		// the HTTP lock service retry where waiting is their job.
		MaxUnaryRetries: 1,
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return listener.DialContext(ctx)
			}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
			// The caller's token names the user of the service's
			// requests (v3lock_auth.go).
			grpc.WithChainUnaryInterceptor(forwardCredentialsUnary),
			grpc.WithChainStreamInterceptor(forwardCredentialsStream),
		},
	})
	if err != nil {
		listener.Close()
		return nil, fmt.Errorf("coordination services: in-process client: %w", err)
	}
	return &coordination{listener: listener, client: client, log: logger}, nil
}

// register adds the Lock and Election services to gs.
func (c *coordination) register(gs *grpc.Server) {
	v3lockpb.RegisterLockServer(gs, NewLockServer(c.client))
	v3electionpb.RegisterElectionServer(gs, NewElectionServer(c.client))
}

// serve starts serving gs on the in-memory listener. gRPC forbids
// registering services after Serve, so call it last.
func (c *coordination) serve(gs *grpc.Server) {
	go func() {
		if err := gs.Serve(c.listener); err != nil {
			c.log.Debug("coordination loopback stopped", "error", err)
		}
	}()
}

// close ends the in-process client; in-flight Lock and Campaign calls fail.
func (c *coordination) close() {
	if err := c.client.Close(); err != nil {
		c.log.Debug("close coordination client", "error", err)
	}
}

// lockService is etcd's v3lock service on pkg/concurrency.
type lockService struct {
	client *clientv3.Client
}

// NewLockServer returns etcd's Lock service (Lock, Unlock) implemented on
// pkg/concurrency over client, as etcd's v3lock.NewLockServer is on its
// own concurrency package.
func NewLockServer(client *clientv3.Client) v3lockpb.LockServer {
	return &lockService{client: client}
}

// Lock waits for the named mutex under the caller's lease. The lease
// belongs to the caller, who keeps it alive: the session borrows it, so
// this server never renews or revokes it.
func (s *lockService) Lock(ctx context.Context, req *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	session, err := callerSession(ctx, s.client, req.Lease)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(session, string(req.Name))
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return &v3lockpb.LockResponse{Header: m.Header(), Key: []byte(m.Key())}, nil
}

// Unlock deletes the key Lock returned, as etcd does: without checking
// who owns it.
func (s *lockService) Unlock(ctx context.Context, req *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	resp, err := s.client.Delete(ctx, string(req.Key))
	if err != nil {
		return nil, err
	}
	return &v3lockpb.UnlockResponse{Header: resp.Header}, nil
}

// callerSession wraps the caller's lease in a session bound to the RPC's
// context that never renews it: the lease is the caller's to keep alive.
// Like etcd's services it makes no request of its own (a renewal here
// would wait a whole request timeout without quorum before the call's own
// request waits another). Errors are returned as they come, like etcd's
// services return them.
func callerSession(ctx context.Context, client *clientv3.Client, lease int64) (*concurrency.Session, error) {
	return concurrency.NewSession(client,
		concurrency.WithBorrowedLease(clientv3.LeaseID(lease)),
		concurrency.WithContext(ctx))
}

// registerLockGateway adds etcd's JSON routes of the Lock service,
// POST /v3/lock/lock and /v3/lock/unlock, forwarding to conn.
func registerLockGateway(_ context.Context, mux *gw.ServeMux, conn *grpc.ClientConn) error {
	client := v3lockpb.NewLockClient(conn)
	return errors.Join(
		gatewayRoute(mux, "/v3/lock/lock", v3lockpb.LockMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3lockpb.LockRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Lock(ctx, in, opts...)
			}),
		gatewayRoute(mux, "/v3/lock/unlock", v3lockpb.UnlockMethod,
			func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error) {
				in := new(v3lockpb.UnlockRequest)
				if err := decode(in); err != nil {
					return nil, err
				}
				return client.Unlock(ctx, in, opts...)
			}),
	)
}

// gatewayDecoder fills a request message from the HTTP body.
type gatewayDecoder func(protoadapt.MessageV1) error

// gatewayCall decodes the request and makes the gRPC call.
type gatewayCall func(ctx context.Context, decode gatewayDecoder, opts ...grpc.CallOption) (protoadapt.MessageV1, error)

// gatewayRoute serves POST path as the unary method fullMethod, the way
// protoc-gen-grpc-gateway's generated handlers (etcd's gw packages) do:
// same marshalers, same error mapping, same header forwarding.
func gatewayRoute(mux *gw.ServeMux, path, fullMethod string, call gatewayCall) error {
	return mux.HandlePath(http.MethodPost, path, func(w http.ResponseWriter, req *http.Request, _ map[string]string) {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		inbound, outbound := gw.MarshalerForRequest(mux, req)
		ctx, err := gw.AnnotateContext(ctx, mux, req, fullMethod, gw.WithHTTPPathPattern(path))
		if err != nil {
			gw.HTTPError(ctx, mux, outbound, w, req, err)
			return
		}
		var md gw.ServerMetadata
		resp, err := call(ctx, gatewayDecode(inbound, req), grpc.Header(&md.HeaderMD), grpc.Trailer(&md.TrailerMD))
		ctx = gw.NewServerMetadataContext(ctx, md)
		if err != nil {
			gw.HTTPError(ctx, mux, outbound, w, req, err)
			return
		}
		gw.ForwardResponseMessage(ctx, mux, outbound, w, req, protoadapt.MessageV2Of(resp), mux.GetForwardResponseOptions()...)
	})
}

// gatewayDecode reads the JSON body into a request; an empty body is an
// empty request.
func gatewayDecode(inbound gw.Marshaler, req *http.Request) gatewayDecoder {
	return func(m protoadapt.MessageV1) error {
		if err := inbound.NewDecoder(req.Body).Decode(protoadapt.MessageV2Of(m)); err != nil && !errors.Is(err, io.EOF) {
			return status.Errorf(codes.InvalidArgument, "%v", err)
		}
		return nil
	}
}
