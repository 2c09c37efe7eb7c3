package framework

import (
	"fmt"
	"net"
)

// reserveLoopbackPorts returns n distinct free TCP ports on 127.0.0.1.
//
// All n listeners are held open until every port is chosen, so the kernel
// cannot hand the same port out twice within one call. The ports are free
// again when the server binds them, so another process may take one in the
// gap; NewCluster detects that case (the server exits with "address already
// in use") and retries with fresh ports.
func reserveLoopbackPorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
