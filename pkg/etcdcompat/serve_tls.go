package etcdcompat

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ServeTLS accepts clients on a TLS listener (an https:// client URL)
// until Stop, serving what kind says. l must hand out *tls.Conn values
// whose handshake is done (tlsutil.NewListener), so the listener's
// refusal rules, handshake timeout and CRL check apply to every protocol
// served here.
//
// With ServeGRPCAndHTTP, once decrypted, a connection goes to the gRPC
// server when its first HTTP/2 request has a gRPC content type, and to
// the HTTP server otherwise (JSON gateway, /health, /metrics, ... over
// HTTP/1.1, or over HTTP/2 as Go and curl negotiate through ALPN). etcd
// routes each request through one HTTP server and
// grpc.Server.ServeHTTP instead; serving gRPC on its own transport keeps
// TLS clients as fast as plaintext ones. The gRPC server still sees the
// client's certificate (tlsAwareCreds). With ServeGRPCOnly (a
// --listen-client-urls listener beside --listen-client-http-urls) every
// connection goes to the gRPC server, and with ServeHTTPOnly to the HTTP
// server, where a gRPC request finds no route, as in etcd.
//
// gatewayTLS is how the JSON gateway dials this listener: etcd presents
// the server's own certificate and skips verifying the server's. An
// HTTP-only listener's gateway dials Config.GatewayTarget when it is set.
func (s *ClientServer) ServeTLS(l net.Listener, gatewayTLS *tls.Config, kind ListenerKind) error {
	if kind == ServeGRPCOnly {
		return s.serveGRPCOnlyTLS(l)
	}
	m := cmux.New(l)
	var grpcL net.Listener
	if kind != ServeHTTPOnly {
		// gRPC clients wait for the server's SETTINGS before their first
		// request, so the matcher sends an empty one to see the
		// request's content type; the other HTTP/2 clients then answer
		// that SETTINGS with an ACK the HTTP server must not see
		// (h2AckFilter).
		grpcL = m.MatchWithWriters(cmux.HTTP2MatchHeaderFieldSendSettings("content-type", "application/grpc"))
	}
	h2L := m.Match(cmux.HTTP2())
	if grpcL != nil {
		h2L = h2AckFilterListener{h2L}
	}
	httpL := m.Match(cmux.Any())

	target, creds := DialTarget(l.Addr()), credentials.NewTLS(gatewayTLS)
	if kind == ServeHTTPOnly && s.cfg.GatewayTarget != "" {
		target, creds = s.cfg.GatewayTarget, s.cfg.GatewayCreds
		if creds == nil {
			creds = insecure.NewCredentials()
		}
	}
	handler, closeGW, err := s.httpHandler(target, creds)
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, Protocols: new(http.Protocols)}
	// The connections are decrypted already: HTTP/2 arrives as if in
	// cleartext, with prior knowledge.
	httpSrv.Protocols.SetHTTP1(true)
	httpSrv.Protocols.SetUnencryptedHTTP2(true)
	// The requests see no *tls.Conn (cmux wraps it); keep its state in
	// the request context for the gateway's client-certificate rule, and
	// the connection for the lock service's keepalive bound.
	httpSrv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if s.cfg.ConnContext != nil {
			ctx = s.cfg.ConnContext(ctx, c)
		}
		return withTLSState(ctx, c)
	}
	closeAll := s.addCloser(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(ctx)
		closeGW()
		m.Close()
	})
	if closeAll == nil {
		return nil // stopped already
	}

	errc := make(chan error, 4)
	n := 3
	if grpcL != nil {
		n++
		go func() { errc <- s.grpc.Serve(grpcL) }()
	}
	go func() { errc <- httpSrv.Serve(h2L) }()
	go func() { errc <- httpSrv.Serve(httpL) }()
	go func() { errc <- m.Serve() }()
	if err := waitServing(errc, n, closeAll); !isServingEnd(err) {
		return err
	}
	return nil
}

// serveGRPCOnlyTLS serves gRPC alone on a TLS listener: a request of
// another protocol meets the gRPC server, which refuses it.
func (s *ClientServer) serveGRPCOnlyTLS(l net.Listener) error {
	closeAll := s.addCloser(func() { l.Close() })
	if closeAll == nil {
		return nil // stopped already
	}
	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(l) }()
	if err := waitServing(errc, 1, closeAll); !isServingEnd(err) {
		return err
	}
	return nil
}

// tlsAwareCreds are the gRPC server's transport credentials: every
// connection arrives already decrypted (or plaintext), so the handshake
// only reports what the listener negotiated. A connection over TLS gets
// credentials.TLSInfo with the client's verified certificates, as with
// gRPC's own TLS credentials (what etcd's auth reads the CN from); a
// plaintext one gets no security.
type tlsAwareCreds struct{}

func (tlsAwareCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("etcdcompat: server-only credentials")
}

func (tlsAwareCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	inner := conn
	if mc, ok := inner.(*cmux.MuxConn); ok {
		inner = mc.Conn
	}
	if tc, ok := inner.(*tls.Conn); ok {
		return conn, credentials.TLSInfo{
			State:          tc.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		}, nil
	}
	return conn, plaintextInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (tlsAwareCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c tlsAwareCreds) Clone() credentials.TransportCredentials { return c }

func (tlsAwareCreds) OverrideServerName(string) error { return nil }

// plaintextInfo is the AuthInfo of a connection without TLS.
type plaintextInfo struct{ credentials.CommonAuthInfo }

func (plaintextInfo) AuthType() string { return "insecure" }
