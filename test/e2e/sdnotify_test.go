package e2e

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// TestNotifiesSystemdWhenReady: started with $NOTIFY_SOCKET, as systemd
// starts a unit of Type=notify (etcd's units are), the member sends
// READY=1 once it serves clients.
func TestNotifiesSystemdWhenReady(t *testing.T) {
	// Not parallel: the variable is set for the whole test process, and
	// so inherited by the member started here only.
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	c := framework.NewCluster(t, framework.ClusterConfig{}) // returns once the member is ready
	if err := conn.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification from %s: %v", c.Target(), err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Fatalf("%s notified %q, want READY=1", c.Target(), got)
	}
}
