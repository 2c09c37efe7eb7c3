package framework

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Port allocation that concurrently running test processes respect.
//
// A port taken from the kernel with 127.0.0.1:0 is free only at that
// moment: once a member is killed its port is free again, and another test
// package running at the same time may be handed it and start its own
// server there while this test's clients still reconnect to it. So the
// framework picks ports itself, from a range the kernel never hands out
// for port 0 or outgoing connections (below ip_local_port_range), and holds
// each one it uses for the lifetime of its cluster (or test) with an
// open-file-description lock on the port's byte in one shared lock file
// (portLockFile). OFD locks conflict between any two open files, in one
// process or in two, and vanish with the process, so a crashed test
// binary leaves nothing behind.

const (
	// portRangeLow is the lowest port the framework hands out.
	portRangeLow = 10000
	// defaultEphemeralLow is Linux's default start of the ephemeral range,
	// used when /proc cannot be read.
	defaultEphemeralLow = 32768
	// portLockName names the shared lock file under os.TempDir.
	portLockName = "metastore-e2e-ports.lock"
	// portAttempts bounds the candidates tried for one port.
	portAttempts = 2000
)

// PortLease holds ports for as long as it is not released: no other
// process using the framework picks them meanwhile.
type PortLease struct {
	mu    sync.Mutex // guards f
	f     *os.File   // the lock file; its OFD locks are the lease
	ports []int
}

// ReservePorts reserves n distinct free loopback ports, held until t ends.
func ReservePorts(t testing.TB, n int) []int {
	t.Helper()
	l, err := reservePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	return l.ports
}

// reservePorts returns a lease on n distinct ports that are free now and
// locked against every other framework user until Release.
func reservePorts(n int) (*PortLease, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), portLockName), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open the port lock file: %w", err)
	}
	lease := &PortLease{f: f}
	// The probe listeners stay open until every port is chosen, so one
	// lease never holds a port twice.
	var probes []net.Listener
	defer func() {
		for _, l := range probes {
			l.Close()
		}
	}()
	high := ephemeralLow()
	for len(lease.ports) < n {
		port, probe, err := lease.claimOne(high)
		if err != nil {
			lease.Release()
			return nil, err
		}
		probes = append(probes, probe)
		lease.ports = append(lease.ports, port)
	}
	return lease, nil
}

// claimOne locks a random port in [portRangeLow, high) that no other
// lease holds and that nothing is bound to, and returns it with a
// listener bound to it.
func (l *PortLease) claimOne(high int) (int, net.Listener, error) {
	for range portAttempts {
		port := portRangeLow + rand.IntN(high-portRangeLow)
		locked, err := l.lock(port)
		if err != nil {
			return 0, nil, err
		}
		if !locked {
			continue // another lease holds it
		}
		probe, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			// In use by something outside the framework, or by this
			// lease already (the lock does not conflict with itself).
			if !l.holds(port) {
				l.unlock(port)
			}
			continue
		}
		return port, probe, nil
	}
	return 0, nil, fmt.Errorf("no free loopback port in [%d, %d) after %d tries", portRangeLow, high, portAttempts)
}

func (l *PortLease) holds(port int) bool {
	for _, p := range l.ports {
		if p == port {
			return true
		}
	}
	return false
}

// lock takes the port's byte of the lock file; false if another open file
// holds it.
func (l *PortLease) lock(port int) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	err := unix.FcntlFlock(l.f.Fd(), unix.F_OFD_SETLK, &lk)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock port %d in %s: %w", port, l.f.Name(), err)
	}
	return true, nil
}

func (l *PortLease) unlock(port int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: int64(port), Len: 1}
	_ = unix.FcntlFlock(l.f.Fd(), unix.F_OFD_SETLK, &lk)
}

// Ports lists the leased ports.
func (l *PortLease) Ports() []int { return l.ports }

// Release frees the ports for other framework users; it is idempotent.
func (l *PortLease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close() // closing the file drops its OFD locks
		l.f = nil
	}
}

// ephemeralLow is the first port of the kernel's ephemeral range (ports
// it assigns to port-0 binds and outgoing connections).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return defaultEphemeralLow
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= portRangeLow+1000 {
		return defaultEphemeralLow
	}
	return low
}
