package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// rotationTimeout bounds how long a replaced file may take to apply to
// new connections (it applies to the next one; the margin is for a
// loaded machine).
const rotationTimeout = 10 * time.Second

// TestTLSRotation replaces the server's certificate and key, its CRL and
// its trusted CA bundle on disk while it runs: each takes effect for new
// connections without a restart. etcd re-reads the leaf and the CRL on
// each handshake too, but loads the CA bundle only at start (etcd issue
// 11555), so the CA part runs against MetaStore only.
func TestTLSRotation(t *testing.T) {
	ctx := testContext(t, testTimeout)
	pki := mustPKI(t)
	dir := t.TempDir()
	live := func(name string) string { return filepath.Join(dir, name) }
	for dst, src := range map[string]string{
		"server.crt": pki.Member.CertFile, "server.key": pki.Member.KeyFile,
		"ca.crt": pki.CA.CertFile, "crl": pki.EmptyCRLFile,
	} {
		if err := framework.ReplaceFile(live(dst), src); err != nil {
			t.Fatal(err)
		}
	}
	// Later flags override the framework's: the server reads the copies.
	c := framework.NewCluster(t, framework.ClusterConfig{
		TLS: &framework.TLSConfig{Client: true, PKI: pki},
		ExtraFlags: []string{
			"--cert-file=" + live("server.crt"), "--key-file=" + live("server.key"),
			"--trusted-ca-file=" + live("ca.crt"), "--client-crl-file=" + live("crl"),
		},
	})
	addr := c.Member(0).Endpoint()
	clientWith := func(pair *framework.CertPair) *tls.Config {
		cfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pair)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	t.Run("leaf", func(t *testing.T) {
		if got := serverSerial(ctx, t, addr, clientWith(pki.Client)); got.Cmp(pki.Member.Cert.SerialNumber) != 0 {
			t.Fatalf("server presents serial %x, want the member certificate's %x", got, pki.Member.Cert.SerialNumber)
		}
		next, err := pki.CA.Issue("member-next", framework.MemberSpec("member"))
		if err != nil {
			t.Fatal(err)
		}
		if err := framework.ReplaceFile(live("server.key"), next.KeyFile); err != nil {
			t.Fatal(err)
		}
		if err := framework.ReplaceFile(live("server.crt"), next.CertFile); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the new certificate served", func() error {
			if got := serverSerial(ctx, t, addr, clientWith(pki.Client)); got.Cmp(next.Cert.SerialNumber) != 0 {
				return fmt.Errorf("serial %x", got)
			}
			return nil
		})
	})

	t.Run("CRL", func(t *testing.T) {
		if err := probeHTTPS(ctx, addr, clientWith(pki.Revoked)); err != nil {
			t.Fatalf("certificate not yet revoked refused: %v", err)
		}
		if err := framework.ReplaceFile(live("crl"), pki.CRLFile); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the revoked certificate refused", func() error {
			if err := probeHTTPS(ctx, addr, clientWith(pki.Revoked)); err == nil {
				return fmt.Errorf("still accepted")
			}
			return nil
		})
		if err := probeHTTPS(ctx, addr, clientWith(pki.Client)); err != nil {
			t.Fatalf("good client refused after the CRL changed: %v", err)
		}
	})

	t.Run("CA bundle", func(t *testing.T) {
		if c.Target() == framework.TargetEtcd {
			t.Skip("etcd loads --trusted-ca-file once at start (etcd issue 11555); MetaStore reloads it")
		}
		otherClient, err := pki.OtherCA.Issue("other-client", framework.CertSpec{CommonName: "other-client"})
		if err != nil {
			t.Fatal(err)
		}
		if err := probeHTTPS(ctx, addr, clientWith(otherClient)); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
			t.Fatalf("client of a CA not yet trusted: %v, want refused as of an unknown authority", err)
		}
		if err := framework.ReplaceFile(live("ca.crt"), pki.CA.CertFile, pki.OtherCA.CertFile); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the added CA trusted", func() error { return probeHTTPS(ctx, addr, clientWith(otherClient)) })
		if err := framework.ReplaceFile(live("ca.crt"), pki.CA.CertFile); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the removed CA distrusted", func() error {
			if probeHTTPS(ctx, addr, clientWith(otherClient)) == nil {
				return fmt.Errorf("still accepted")
			}
			return nil
		})
	})
}

// serverSerial is the serial number of the certificate the server
// presents on a new connection.
func serverSerial(ctx context.Context, t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, refusalTimeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
}

// waitFor polls check until it passes or rotationTimeout passes.
func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, rotationTimeout, err)
		case <-tick.C:
		}
	}
}
