package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestClientHTTPURLsTLS is TestClientHTTPURLs over https: with
// --listen-client-http-urls the https client URL serves gRPC only (an
// HTTP/2 request for /health meets the gRPC server and its 415) and the
// https HTTP URL serves the gateway and /health but no gRPC (a gRPC call
// finds no route there).
func TestClientHTTPURLsTLS(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	pki, err := framework.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 3)
	client := fmt.Sprintf("https://127.0.0.1:%d", p[0])
	httpURL := fmt.Sprintf("https://127.0.0.1:%d", p[2])
	peer := fmt.Sprintf("http://127.0.0.1:%d", p[1])
	args := []string{
		"--name=m1", "--data-dir=" + dir + "/m1.data",
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-client-http-urls=" + httpURL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=m1=" + peer,
		"--cert-file=" + pki.Member.CertFile, "--key-file=" + pki.Member.KeyFile,
	}
	m := startRaw(t, dir, args)
	tlsCfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pki.Client)
	if err != nil {
		t.Fatal(err)
	}
	grpcClient := func(endpoint string) *clientv3.Client { return newTestClientTLS(t, endpoint, tlsCfg.Clone()) }
	// HTTP/2 as curl and Go negotiate it through ALPN.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), ForceAttemptHTTP2: true}}
	t.Cleanup(h2.CloseIdleConnections)
	get := func(ctx context.Context, url string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		return doHTTPOn(h2, req)
	}
	cli := grpcClient(client)
	m.pollUntil(ctx, func(ctx context.Context) error {
		_, err := cli.Put(ctx, "k", "v")
		return err
	})
	m.pollUntil(ctx, func(ctx context.Context) error {
		code, body, err := get(ctx, httpURL+"/health")
		if err == nil && (code != http.StatusOK || !strings.Contains(body, `"health":"true"`)) {
			err = fmt.Errorf("/health: %d %s", code, body)
		}
		return err
	})

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, httpURL+"/v3/kv/range", strings.NewReader(`{"key":"aw=="}`))
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := doHTTPOn(h2, req); err != nil || code != http.StatusOK || !strings.Contains(body, `"count":"1"`) {
		t.Errorf("gateway range on the HTTP URL: %d %s %v", code, body, err)
	}
	if code, body, err := get(ctx, client+"/health"); err == nil && code != http.StatusUnsupportedMediaType {
		t.Errorf("HTTP/2 /health on the gRPC-only client URL: %d %s, want the gRPC server's 415", code, body)
	}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	if resp, err := h1.Get(client + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("HTTP/1.1 /health on the gRPC-only client URL answered %d, want the connection refused", resp.StatusCode)
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := grpcClient(httpURL).Get(gctx, "k"); err == nil {
		t.Errorf("gRPC on the HTTP-only URL succeeded")
	}
}
