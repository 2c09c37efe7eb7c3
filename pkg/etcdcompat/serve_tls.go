package etcdcompat

import (
	"context"
	"crypto/tls"
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
)

// ServeTLS accepts clients on a TLS listener (an https:// client URL)
// until Stop. l must hand out *tls.Conn values whose handshake is done
// (tlsutil.NewListener), so the listener's refusal rules, handshake
// timeout and CRL check apply to every protocol served here.
//
// As etcd does on its secure port, one HTTP server takes every
// connection: requests over HTTP/2 with a gRPC content type go to the
// gRPC server (which sees the client's certificate as its peer's TLS
// info), everything else (JSON gateway, /health, /metrics, ... over
// HTTP/1.1 or HTTP/2) to the HTTP handlers. Telling them apart by the
// first bytes, as Serve does in plaintext, would send an HTTP/2 request
// for /metrics (what a Go or curl client negotiates through ALPN) to
// gRPC.
//
// gatewayTLS is how the JSON gateway dials this listener: etcd presents
// the server's own certificate and skips verifying the server's.
func (s *ClientServer) ServeTLS(l net.Listener, gatewayTLS *tls.Config) error {
	gwmux, closeGW, err := s.gateway(l.Addr().String(), credentials.NewTLS(gatewayTLS))
	if err != nil {
		return err
	}
	other := s.httpMux(gwmux)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.Contains(r.Header.Get("Content-Type"), "application/grpc") {
			s.grpc.ServeHTTP(w, r)
			return
		}
		other.ServeHTTP(w, r)
	})
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Minute,
		Protocols:         new(http.Protocols),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: math.MaxInt32},
	}
	httpSrv.Protocols.SetHTTP1(true)
	httpSrv.Protocols.SetHTTP2(true)
	s.mu.Lock()
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(ctx)
		closeGW()
		l.Close()
	})
	s.mu.Unlock()
	err = httpSrv.Serve(l)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
