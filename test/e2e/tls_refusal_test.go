package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// refusalTimeout bounds one client's attempt against a refusing server.
const refusalTimeout = 3 * time.Second

// probeHTTPS opens a TLS connection with cfg and asks for /health over
// HTTP/1.1: the error is the first step that failed (handshake, write,
// read), nil when the server answered.
func probeHTTPS(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, refusalTimeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("GET /health HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// tryClientv3 does one Get with a clientv3 client using cfg.
func tryClientv3(ctx context.Context, endpoint string, cfg *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: cfg, DialTimeout: refusalTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, refusalTimeout)
	defer cancel()
	_, err = cli.Get(ctx, "k")
	return err
}

// TestTLSClientRefusals checks who a member with client mutual TLS, a CRL
// and --tls-min-version=TLS1.3 turns away, and how: the TLS alerts a
// client sees are the ones etcd's listener sends, and the member logs
// each refusal as etcd does ("rejected connection on client endpoint").
func TestTLSClientRefusals(t *testing.T) {
	ctx := testContext(t, testTimeout)
	tc := &framework.TLSConfig{Client: true}
	tc.PKI = mustPKI(t)
	c := framework.NewCluster(t, framework.ClusterConfig{TLS: tc, ExtraFlags: []string{
		"--client-crl-file=" + tc.PKI.CRLFile, "--tls-min-version=TLS1.3",
	}})
	m := c.Member(0)
	addr := m.Endpoint()
	pki := tc.PKI
	withCert := func(pair *framework.CertPair) *tls.Config {
		cfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pair)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := probeHTTPS(ctx, addr, withCert(pki.Client)); err != nil {
		t.Fatalf("the good client is refused: %v", err)
	}
	if err := tryClientv3(ctx, m.ClientURL(), withCert(pki.Client)); err != nil {
		t.Fatalf("the good client is refused over gRPC: %v", err)
	}

	expired, err := pki.CA.Issue("expired", framework.CertSpec{CommonName: "expired",
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tls12 := withCert(pki.Client)
	tls12.MaxVersion = tls.VersionTLS12
	// One group, so that its parallel subtests end before the log is read.
	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			cfg  *tls.Config
			want string // in the probe's error
		}{
			{"no client certificate", withCert(nil), "remote error: tls: certificate required"},
			{"certificate of another CA", withCert(pki.Foreign), "remote error: tls: unknown certificate authority"},
			{"revoked certificate", withCert(pki.Revoked), "read: unexpected EOF"},
			{"expired certificate", withCert(expired), "remote error: tls: expired certificate"},
			{"TLS 1.2 client", tls12, "remote error: tls: protocol version not supported"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				err := probeHTTPS(ctx, addr, tt.cfg)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("probe: %v, want an error with %q", err, tt.want)
				}
				if err := tryClientv3(ctx, m.ClientURL(), tt.cfg); err == nil {
					t.Fatal("clientv3 Get succeeded")
				}
			})
		}
	})
	waitForLog(ctx, t, m, "rejected connection on client endpoint")
	waitForLog(ctx, t, m, "certificate serial")
	waitForLog(ctx, t, m, "certificate has expired or is not yet valid")

	t.Run("plaintext client", func(t *testing.T) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(refusalTimeout))
		if _, err := conn.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		// The listener fails the handshake and closes: no HTTP answer
		// (etcd's TLS listener, not net/http's 400 "Client sent an HTTP
		// request to an HTTPS server").
		buf := make([]byte, 1024)
		n, err := conn.Read(buf)
		if n != 0 || err == nil {
			t.Fatalf("plaintext client read %q, %v; want the connection closed", buf[:n], err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("plaintext client was not disconnected: %v", err)
		}
		res, err := framework.NewEtcdctl(framework.EtcdctlPath(c.RepoRoot()), []string{addr}).Run(ctx, "--dial-timeout=2s", "--command-timeout=3s", "get", "k")
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 {
			t.Fatalf("plaintext etcdctl succeeded: %s", res.Stdout)
		}
		waitForLog(ctx, t, m, "first record does not look like a TLS handshake")
	})
}

func mustPKI(t *testing.T) *framework.PKI {
	t.Helper()
	pki, err := framework.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

// TestTLSSideBySideURLs lists an https and an http client URL: each is
// served, the first with TLS and client certificates, the second in
// plaintext, as etcd serves both.
func TestTLSSideBySideURLs(t *testing.T) {
	ctx := testContext(t, testTimeout)
	tc := &framework.TLSConfig{Client: true, PlainClientURL: true}
	c := framework.NewCluster(t, framework.ClusterConfig{TLS: tc})
	plain := c.Member(0).PlainClientURL()
	if err := tryClientv3(ctx, plain, nil); err != nil {
		t.Fatalf("plaintext URL: %v", err)
	}
	cfg, err := tc.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if err := tryClientv3(ctx, c.Member(0).ClientURL(), cfg); err != nil {
		t.Fatalf("TLS URL: %v", err)
	}
	if err := tryClientv3(ctx, c.Member(0).ClientURL(), nil); err == nil {
		t.Fatal("plaintext client served on the TLS URL")
	}
}
