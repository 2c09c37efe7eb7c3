package transport

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/host/tlsutil"
	"github.com/metastore-io/metastore/test/framework"

	"github.com/metastore-io/metastore/test/raftkit"
)

// peerTLS returns a tweak giving a member peer mutual TLS with pair.
func peerTLS(t *testing.T, pki *framework.PKI, pair *framework.CertPair) func(*Config) {
	t.Helper()
	m, err := tlsutil.New(tlsutil.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile,
		TrustedCAFile: pki.CA.CertFile, ClientCertAuth: true, AllowedCNs: []string{"member"}})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.TLS = m }
}

// Raft messages and forwarded calls travel between members over peer
// mutual TLS (https peer URLs).
func TestTLSPeersExchangeMessagesAndForwards(t *testing.T) {
	pki, err := framework.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := startMember(t, 1, 0xc1, peerTLS(t, pki, pki.Member))
	b := startMember(t, 2, 0xc1, peerTLS(t, pki, pki.Member))
	if a.url[:8] != "https://" {
		t.Fatalf("member URL %s is not https", a.url)
	}
	connect(t, a, b)
	const total = 1000
	var batch []raftpb.Message
	for i := range total {
		batch = append(batch, appMsg(1, 2, uint64(i), []byte(fmt.Sprintf("entry-%d", i))))
	}
	a.tr.Send(batch)
	b.raft.waitUntil(t, "every message", func(f *fakeRaft) bool { return len(f.steps) >= total })
	mustRegister(t, b.tr, "echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	resp, err := a.tr.Forward(raftkit.Context(t), 2, "echo", []byte("over tls"))
	if err != nil || !bytes.Equal(resp, []byte("over tls")) {
		t.Fatalf("forward over TLS: %q, %v", resp, err)
	}
}

// A peer presenting a certificate with a CN outside the allowed list is
// refused at the handshake: no stream becomes active, and the refusal is
// logged on the listening side with etcd's message.
func TestTLSPeerWithDisallowedCNRefused(t *testing.T) {
	pki, err := framework.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := startMember(t, 1, 0xc1, peerTLS(t, pki, pki.Member))
	intruder := startMember(t, 2, 0xc1, peerTLS(t, pki, pki.Intruder))
	mustAddPeer(t, intruder.tr, a.id, a.url)
	mustAddPeer(t, a.tr, intruder.id, intruder.url)
	a.logs.waitFor(t, "rejected connection on peer endpoint", "client certificate authentication failed")
	if st, ok := intruder.tr.PeerStatus(a.id); !ok || st.Active {
		t.Fatalf("the intruder's stream to a is active: %+v", st)
	}
}
