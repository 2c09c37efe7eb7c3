package framework

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLSEnvVar set to 1 runs every cluster the suite starts with client and
// peer mutual TLS (TLSConfig{Client: true, Peer: true}) unless the test
// chose its own TLS: `E2E_TLS=1 go test ./test/e2e/` runs the suite over TLS.
const TLSEnvVar = "E2E_TLS"

// TLSConfig starts a cluster with TLS, the way kubeadm starts etcd.
type TLSConfig struct {
	// PKI holds the certificates; nil generates one in the test's
	// temporary directory.
	PKI *PKI
	// Client serves https client URLs with --cert-file, --key-file,
	// --trusted-ca-file and --client-cert-auth (the member certificate).
	Client bool
	// Peer serves https peer URLs with the peer equivalents and
	// --peer-client-cert-auth.
	Peer bool
	// PlainClientURL also lists a plaintext http:// URL in
	// --listen-client-urls, beside the https one (Member.PlainClientURL).
	PlainClientURL bool
	// ClientCert is what the framework's clients and etcdctl present;
	// nil is PKI.Client.
	ClientCert *CertPair
}

// tlsFromEnv returns the TLS the suite's environment asks for, nil for none.
func tlsFromEnv() *TLSConfig {
	if os.Getenv(TLSEnvVar) == "1" {
		return &TLSConfig{Client: true, Peer: true}
	}
	return nil
}

// prepare fills the PKI and the client certificate.
func (tc *TLSConfig) prepare(t testing.TB) {
	t.Helper()
	if tc.PKI == nil {
		pki, err := NewPKI(t.TempDir())
		if err != nil {
			t.Fatalf("generate certificates: %v", err)
		}
		tc.PKI = pki
	}
	if tc.ClientCert == nil {
		tc.ClientCert = tc.PKI.Client
	}
}

func (tc *TLSConfig) clientScheme() string {
	if tc != nil && tc.Client {
		return "https"
	}
	return "http"
}

func (tc *TLSConfig) peerScheme() string {
	if tc != nil && tc.Peer {
		return "https"
	}
	return "http"
}

// serverFlags are the member's TLS flags, kubeadm's set.
func (tc *TLSConfig) serverFlags() []string {
	if tc == nil {
		return nil
	}
	var flags []string
	p := tc.PKI
	if tc.Client {
		flags = append(flags, "--cert-file="+p.Member.CertFile, "--key-file="+p.Member.KeyFile,
			"--trusted-ca-file="+p.CA.CertFile, "--client-cert-auth")
	}
	if tc.Peer {
		flags = append(flags, "--peer-cert-file="+p.Member.CertFile, "--peer-key-file="+p.Member.KeyFile,
			"--peer-trusted-ca-file="+p.CA.CertFile, "--peer-client-cert-auth")
	}
	return flags
}

// ClientTLS is the client configuration of the framework's clients:
// the CA bundle and TLSConfig.ClientCert. Nil without client TLS.
func (tc *TLSConfig) ClientTLS() (*tls.Config, error) {
	if tc == nil || !tc.Client {
		return nil, nil
	}
	return ClientTLSConfig(tc.PKI.CA.CertFile, tc.ClientCert)
}

// ClientTLSConfig trusts caFile and presents pair (nil: no certificate).
func ClientTLSConfig(caFile string, pair *CertPair) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pair != nil {
		cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
		if err != nil {
			return nil, err
		}
		// Always presented, as etcdctl does, even when the server asks
		// for certificates of other CAs (tls.Config.Certificates would
		// then send none).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}

// etcdctlFlags are the --cacert/--cert/--key flags for etcdctl.
func (tc *TLSConfig) etcdctlFlags() []string {
	if tc == nil || !tc.Client {
		return nil
	}
	return []string{"--cacert=" + tc.PKI.CA.CertFile, "--cert=" + tc.ClientCert.CertFile, "--key=" + tc.ClientCert.KeyFile}
}

// HTTPClient is an HTTP client for the member's client URL (/health,
// /metrics, the JSON gateway): over TLS with the framework's client
// certificate when the cluster has client TLS.
func (m *Member) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	cfg, err := m.cfg.TLS.ClientTLS()
	if err != nil {
		t.Fatalf("HTTP client for member %s: %v", m.name, err)
	}
	if cfg == nil {
		return http.DefaultClient
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// GRPCCredentials are the transport credentials of a raw gRPC connection
// to the member (tests that use the generated stubs without clientv3):
// TLS with the framework's client certificate, or insecure.
func (m *Member) GRPCCredentials(t testing.TB) credentials.TransportCredentials {
	t.Helper()
	cfg, err := m.cfg.TLS.ClientTLS()
	if err != nil {
		t.Fatalf("gRPC credentials for member %s: %v", m.name, err)
	}
	if cfg == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(cfg)
}
