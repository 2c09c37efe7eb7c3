package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestClientURLsHTTPAndHTTPSOnOnePort lists an http and an https client
// URL on the same port, as etcd's e2e "ServerTLSAndNonTLS" cluster does:
// the member binds the port once and serves plaintext and TLS on it,
// each with gRPC and HTTP. A plaintext and a TLS clientv3 both write and
// read (each sees the other's write); /health answers over plain HTTP,
// over HTTPS with HTTP/1.1 and with HTTP/2; the member advertises both
// URLs; and it logs etcd's lines: "ready to serve client requests" once
// for the listener, then "serving client traffic insecurely; ..." and
// "serving client traffic securely", both grpc+http on the one address.
// --client-cert-auth applies to the https URL only, as in etcd.
func TestClientURLsHTTPAndHTTPSOnOnePort(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	pki, err := framework.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 2)
	plain := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	secure := fmt.Sprintf("https://127.0.0.1:%d", p[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", p[1])
	m := startRaw(t, dir, []string{
		"--name=m1", "--data-dir=" + dir + "/m1.data",
		"--listen-client-urls=" + plain + "," + secure, "--advertise-client-urls=" + plain + "," + secure,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=m1=" + peer,
		"--cert-file=" + pki.Member.CertFile, "--key-file=" + pki.Member.KeyFile,
		"--trusted-ca-file=" + pki.CA.CertFile, "--client-cert-auth",
	})
	tlsCfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pki.Client)
	if err != nil {
		t.Fatal(err)
	}
	plainCli, tlsCli := newTestClient(t, plain), newTestClientTLS(t, secure, tlsCfg.Clone())
	m.pollUntil(ctx, func(ctx context.Context) error {
		_, err := plainCli.Put(ctx, "from-plain", "p")
		return err
	})
	m.pollUntil(ctx, func(ctx context.Context) error {
		_, err := tlsCli.Put(ctx, "from-tls", "s")
		return err
	})
	for _, c := range []struct {
		name string
		cli  *clientv3.Client
	}{{"plaintext", plainCli}, {"TLS", tlsCli}} {
		resp, err := c.cli.Get(ctx, "from-", clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("%s get: %v", c.name, err)
		}
		if got := keysOf(resp.Kvs); !equalStrings(got, []string{"from-plain", "from-tls"}) {
			t.Errorf("%s client read %v, want both clients' keys", c.name, got)
		}
	}

	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), ForceAttemptHTTP2: true}}
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
		proto  string
	}{{"plain HTTP", http.DefaultClient, plain, "HTTP/1.1"}, {"HTTPS HTTP/1.1", h1, secure, "HTTP/1.1"}, {"HTTPS HTTP/2", h2, secure, "HTTP/2.0"}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			t.Errorf("%s /health: %v", c.name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Proto != c.proto {
			t.Errorf("%s /health: %d over %s, want 200 over %s", c.name, resp.StatusCode, resp.Proto, c.proto)
		}
	}
	// No certificate on the https URL: refused (--client-cert-auth).
	noCert, err := framework.ClientTLSConfig(pki.CA.CertFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}}
	if resp, err := anon.Get(secure + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("https /health without a client certificate answered %d, want the handshake refused", resp.StatusCode)
	}

	members, err := plainCli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 1 || !slices.Equal(members.Members[0].ClientURLs, []string{plain, secure}) {
		t.Errorf("members %v, want one advertising %s and %s", members.Members, plain, secure)
	}
	wantMixedServing(ctx, t, m, strings.TrimPrefix(plain, "http://"))
}

// wantMixedServing waits for etcd's serving lines of one listener that
// serves both kinds: one "ready to serve client requests", then the
// insecure and the secure line, grpc+http, on addr.
func wantMixedServing(ctx context.Context, t *testing.T, m *rawMember, addr string) {
	t.Helper()
	fields := map[string]string{"traffic": `"grpc+http"`, "address": `"` + addr + `"`}
	waitLogLine(ctx, m, "serving client traffic insecurely; this is strongly discouraged!", fields)
	waitLogLine(ctx, m, "serving client traffic securely", fields)
	if n := countLogLines(m, "ready to serve client requests"); n != 1 {
		t.Errorf("%d \"ready to serve client requests\" lines, want 1 (one listener)", n)
	}
}
