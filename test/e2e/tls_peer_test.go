package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// refusedJoinTimeout bounds how long a member whose peer certificate is
// refused may take to give up joining.
const refusedJoinTimeout = 30 * time.Second

// TestTLSPeerRefusals runs a cluster with peer mutual TLS restricted to
// --peer-cert-allowed-cn=member and tries to join a learner presenting a
// certificate of the right CA with CN "intruder", then one of an
// unrelated CA, then a member certificate listed in --peer-crl-file:
// each time the joining member cannot even read the member list, exits,
// and the running member logs why it rejected the peer.
// With the member certificate the same learner then joins, catches up
// over TLS and is promoted.
func TestTLSPeerRefusals(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	pki := mustPKI(t)
	// A member certificate (right CA, CN and SANs) revoked by --peer-crl-file.
	revoked, err := pki.CA.Issue("member-revoked", framework.MemberSpec("member"))
	if err != nil {
		t.Fatal(err)
	}
	peerCRL := filepath.Join(t.TempDir(), "peer.crl")
	if err := pki.CA.WriteCRL(peerCRL, revoked); err != nil {
		t.Fatal(err)
	}
	c := framework.NewCluster(t, framework.ClusterConfig{
		TLS:        &framework.TLSConfig{PKI: pki, Client: true, Peer: true},
		ExtraFlags: []string{"--peer-cert-allowed-cn=member", "--peer-crl-file=" + peerCRL},
	})
	etcdctl := c.Etcdctl()
	m0 := c.Member(0)
	joining, err := c.NewJoiningMember("m1")
	if err != nil {
		t.Fatal(err)
	}
	added := runEtcdctlRetrying(ctx, t, etcdctl, "member", "add", joining.Name(), "--peer-urls="+joining.PeerURL(), "--learner")
	initial := initialClusterLine.FindStringSubmatch(added)
	if initial == nil {
		t.Fatalf("member add printed no ETCD_INITIAL_CLUSTER:\n%s", added)
	}

	for _, tt := range []struct {
		name   string
		cert   *framework.CertPair
		reason string // in the running member's log
	}{
		{"CN outside --peer-cert-allowed-cn", pki.Intruder, "client certificate authentication failed"},
		{"certificate of another CA", pki.Foreign, "certificate signed by unknown authority"},
		{"revoked certificate", revoked, "certificate serial"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			joining.UsePeerCert(tt.cert)
			if err := joining.Join(initial[1]); err != nil {
				t.Fatal(err)
			}
			select {
			case <-joining.Exited():
			case <-time.After(refusedJoinTimeout):
				t.Fatalf("member with a refused peer certificate still runs after %v", refusedJoinTimeout)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			waitForLog(ctx, t, m0, "rejected connection on peer endpoint")
			waitForLog(ctx, t, m0, tt.reason)
		})
	}
	for _, m := range memberList(ctx, t, etcdctl).Members {
		if m.Name == joining.Name() {
			t.Fatalf("the refused member started: %+v", m)
		}
	}

	joining.UsePeerCert(nil)
	if err := joining.Join(initial[1]); err != nil {
		t.Fatal(err)
	}
	id := memberIDByPeerURL(ctx, t, etcdctl, joining.PeerURL())
	promoteCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		res, err := etcdctl.Run(promoteCtx, "member", "promote", strconv.FormatUint(id, 16))
		if err != nil {
			t.Fatalf("promote the learner that joined over TLS: %v", err)
		}
		if res.ExitCode == 0 {
			break
		}
		if !strings.Contains(res.Stderr, "in sync with leader") {
			t.Fatalf("promote: %s", res.Stderr)
		}
		select {
		case <-promoteCtx.Done():
			t.Fatalf("the learner never caught up over peer TLS: %s", res.Stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := joining.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, c.NewClient(t), "/tls/after-join", "v")
}
