//go:build !linux

package lockservice

import (
	"errors"
	"net"
	"time"
)

// setUserTimeout is Linux-only; elsewhere TCP keep-alive and write
// failures are what notice a vanished client.
func setUserTimeout(*net.TCPConn, time.Duration) error {
	return errors.New("TCP_USER_TIMEOUT is not supported on this system")
}

func userTimeout(*net.TCPConn) (time.Duration, error) {
	return 0, errors.New("TCP_USER_TIMEOUT is not supported on this system")
}
