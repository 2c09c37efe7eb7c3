package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mustOK(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	mustOK(t, err)
	cert, err := x509.ParseCertificate(der)
	mustOK(t, err)
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mustOK(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	mustOK(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestCommonNameIdentity serves gRPC over mutual TLS in process and checks
// who AuthInfoFromCtx says each request is from: the client certificate's
// CN without a token, the token's user with one, nobody without
// --client-cert-auth, and nobody for a request the JSON gateway forwards.
func TestCommonNameIdentity(t *testing.T) {
	aux := newMemAux()
	certAuth := newTestStore(t, aux, Options{ClientCertAuth: true})
	enableWithRoot(t, certAuth, aux)
	noCertAuth := newTestStore(t, aux, Options{})

	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	serverCert := ca.issue(t, "server", x509.ExtKeyUsageServerAuth)
	seen := make(chan context.Context, 1)
	gs := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			seen <- ctx
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	mustOK(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	clientCert := ca.issue(t, "alice", x509.ExtKeyUsageClientAuth)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{Certificates: []tls.Certificate{clientCert}, RootCAs: pool, ServerName: "127.0.0.1"})))
	mustOK(t, err)
	t.Cleanup(func() { conn.Close() })
	call := func(md ...string) context.Context {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		return <-seen
	}

	ai, err := certAuth.AuthInfoFromCtx(call())
	if err != nil || ai == nil || ai.Username != "alice" || ai.Revision != certAuth.Revision() {
		t.Fatalf("CN identity: %+v %v", ai, err)
	}
	if ai, err := noCertAuth.AuthInfoFromCtx(call()); ai != nil || err != nil {
		t.Fatalf("without --client-cert-auth: %+v %v", ai, err)
	}
	if ai, err := certAuth.AuthInfoFromCtx(call("grpcgateway-accept", "application/json")); ai != nil || err != nil {
		t.Fatalf("gateway request: %+v %v", ai, err)
	}
	prefix, _ := certAuth.GenTokenPrefix()
	tok, err := certAuth.ApplyAuthenticate("root", prefix, 3)
	mustOK(t, err)
	if ai, err := certAuth.AuthInfoFromCtx(call("token", tok)); err != nil || ai.Username != "root" {
		t.Fatalf("token wins over CN: %+v %v", ai, err)
	}
	if _, err := certAuth.AuthInfoFromCtx(call("token", "bogus.1")); err != ErrInvalidAuthToken {
		t.Fatalf("bad token with a certificate: %v", err)
	}
}
