// Package sdnotify tells systemd that the member is ready, as etcd does
// (etcdmain's "notifying init daemon"): a unit of Type=notify, which
// etcd's own units are, waits for READY=1 on $NOTIFY_SOCKET before it
// considers the service started, and would otherwise time out and kill
// a member that is serving.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// SocketEnv is the variable through which systemd passes the socket.
const SocketEnv = "NOTIFY_SOCKET"

// Ready sends READY=1 to the socket named by $NOTIFY_SOCKET. It reports
// sent=false, and no error, when the variable is unset: the process was
// not started by systemd with Type=notify.
func Ready() (sent bool, err error) {
	path := os.Getenv(SocketEnv)
	if path == "" {
		return false, nil
	}
	addr := &net.UnixAddr{Name: path, Net: "unixgram"}
	if path[0] == '@' {
		addr.Name = "\x00" + path[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return false, fmt.Errorf("notify systemd on %s: %w", path, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("READY=1")); err != nil {
		return false, fmt.Errorf("notify systemd on %s: %w", path, err)
	}
	return true, nil
}
