package lockservice

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLockServiceBehindClientTLS: with client mutual TLS the lock service
// is served on the same https listener as gRPC: a client with a
// certificate of the cluster's CA locks and unlocks; one without is
// refused at the handshake.
func TestLockServiceBehindClientTLS(t *testing.T) {
	requireMetaStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc := &framework.TLSConfig{Client: true}
	cluster := framework.NewCluster(t, framework.ClusterConfig{TLS: tc})
	tlsConf, err := tc.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	url := cluster.Member(0).ClientURL()
	withCert, err := lockclient.New(lockclient.Config{Endpoints: []string{url}, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}}})
	if err != nil {
		t.Fatal(err)
	}
	req := lockclient.Request{Type: "tls", ResourceID: "r", NodeID: "n"}
	l, err := withCert.Lock(ctx, req)
	if err != nil {
		t.Fatalf("lock over mutual TLS: %v", err)
	}
	unlock(t, ctx, l)

	noCertConf := tlsConf.Clone()
	noCertConf.Certificates = nil
	noCertConf.GetClientCertificate = nil
	without, err := lockclient.New(lockclient.Config{Endpoints: []string{url}, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: noCertConf}}})
	if err != nil {
		t.Fatal(err)
	}
	var netErr *lockclient.NetworkError
	if _, err := without.Lock(ctx, req); !errors.As(err, &netErr) {
		t.Fatalf("lock without a client certificate: %v, want a refused connection", err)
	}
}
