package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// connOwner names the member whose process owns the loopback TCP socket
// with local port localPort connected to remote port remotePort (the
// client end of a connection a proxy accepted), or "" if no member's
// process does. It reads the socket's inode from /proc/net/tcp{,6} and
// finds the process holding a descriptor for it under /proc/<pid>/fd:
// Linux only, like the rest of the harness (Pdeathsig).
func connOwner(localPort, remotePort int, pids map[int]string) string {
	inode := socketInode(localPort, remotePort)
	if inode == "" {
		return ""
	}
	want := "socket:[" + inode + "]"
	for pid, name := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // exited meanwhile
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
				return name
			}
		}
	}
	return ""
}

// socketInode finds the inode of the socket localPort -> remotePort in
// the kernel's TCP tables ("sl local rem st ... uid timeout inode").
func socketInode(localPort, remotePort int) string {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 10 || f[0] == "sl" {
				continue
			}
			if hexPort(f[1]) == localPort && hexPort(f[2]) == remotePort {
				return f[9]
			}
		}
	}
	return ""
}

// hexPort parses the port of an address written as HEXADDR:HEXPORT.
func hexPort(addr string) int {
	_, port, ok := strings.Cut(addr, ":")
	if !ok {
		return -1
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}
