package etcdcompat

import (
	"testing"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
)

// TestPeerAndClientVersionsAgree: a member tells its peers (X-Server-Version)
// the same etcd version it reports to clients.
func TestPeerAndClientVersionsAgree(t *testing.T) {
	if rafthttp.ServerVersion != EtcdServerVersion {
		t.Fatalf("peers are told etcd %s, clients %s", rafthttp.ServerVersion, EtcdServerVersion)
	}
}
