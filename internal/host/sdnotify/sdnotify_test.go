package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestReadySendsReadyToTheSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv(SocketEnv, path)
	sent, err := Ready()
	if err != nil || !sent {
		t.Fatalf("Ready() = %v, %v", sent, err)
	}
	buf := make([]byte, 64)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("systemd got %q, %v", buf[:n], err)
	}
}

func TestReadyWithoutSystemdDoesNothing(t *testing.T) {
	t.Setenv(SocketEnv, "")
	if sent, err := Ready(); sent || err != nil {
		t.Fatalf("Ready() = %v, %v without %s", sent, err, SocketEnv)
	}
}

func TestReadyToAMissingSocketFails(t *testing.T) {
	t.Setenv(SocketEnv, filepath.Join(t.TempDir(), "absent.sock"))
	if _, err := Ready(); err == nil {
		t.Fatal("no error for a socket that does not exist")
	}
}
