package framework

import (
	"fmt"
	"net"
	"sync"
)

// PeerNetwork is the set of TCP proxies the tests own, one in front of
// each member's peer port: a member listens on a private port and
// advertises its proxy's address as its peer URL, so every connection
// between members crosses a proxy, whichever side opened it.
//
// Raft traffic between two members flows over connections either one may
// have opened (etcd's rafthttp reads a peer's messages on a connection it
// dialled itself), so cutting a member off means cutting every connection
// it is at either end of. The proxy knows the destination (it is that
// member's proxy); the source it learns from the kernel: the member
// process that owns the connecting socket (connOwner, Linux /proc). A
// connection whose owner cannot be found (the member just died) counts as
// coming from nobody.
//
// Isolate closes every connection to or from the member and refuses new
// ones; Stall instead holds them open while forwarding nothing (a black
// hole: nothing fails until a timeout). Heal lets traffic flow again.
type PeerNetwork struct {
	// pids maps the running members' process IDs to their names.
	pids func() map[int]string

	mu      sync.Mutex
	proxies []*peerProxy
	cut     map[string]cutMode // member name -> how it is cut off
	conns   map[*proxiedConn]struct{}
	wakeups chan struct{} // closed and replaced whenever cut changes
	closed  bool
	wg      sync.WaitGroup
}

type cutMode int

const (
	cutRefuse cutMode = iota + 1
	cutStall
)

type peerProxy struct {
	member   string
	listener net.Listener
	target   string
	port     int
}

type proxiedConn struct {
	from, to       string // member names; from is "" when unknown
	client, server net.Conn
}

func newPeerNetwork(pids func() map[int]string) *PeerNetwork {
	return &PeerNetwork{pids: pids, cut: map[string]cutMode{}, conns: map[*proxiedConn]struct{}{}, wakeups: make(chan struct{})}
}

// addProxy starts a proxy for member on listenAddr forwarding to target
// (host:port) and returns its address.
func (n *PeerNetwork) addProxy(member, listenAddr, target string) (string, error) {
	l, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return "", fmt.Errorf("peer proxy for %s: listen on %s: %w", member, listenAddr, err)
	}
	p := &peerProxy{member: member, listener: l, target: target, port: l.Addr().(*net.TCPAddr).Port}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	n.wg.Add(1)
	go n.accept(p)
	return l.Addr().String(), nil
}

// Isolate cuts member off: its connections are closed, new ones refused.
func (n *PeerNetwork) Isolate(member string) { n.setCut(member, cutRefuse) }

// Stall holds member's connections open but forwards nothing, either way.
func (n *PeerNetwork) Stall(member string) { n.setCut(member, cutStall) }

// Heal lets member's traffic flow again.
func (n *PeerNetwork) Heal(member string) { n.setCut(member, 0) }

// HealAll lets every member's traffic flow again.
func (n *PeerNetwork) HealAll() {
	n.mu.Lock()
	members := make([]string, 0, len(n.cut))
	for m := range n.cut {
		members = append(members, m)
	}
	n.mu.Unlock()
	for _, m := range members {
		n.Heal(m)
	}
}

func (n *PeerNetwork) setCut(member string, mode cutMode) {
	n.mu.Lock()
	if mode == 0 {
		delete(n.cut, member)
	} else {
		n.cut[member] = mode
	}
	close(n.wakeups)
	n.wakeups = make(chan struct{})
	var drop []*proxiedConn
	for c := range n.conns {
		if n.modeLocked(c.from, c.to) == cutRefuse {
			drop = append(drop, c)
			delete(n.conns, c)
		}
	}
	n.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

// modeLocked is how a connection between from and to is treated: 0 to
// forward, else the stricter cut of its two ends.
func (n *PeerNetwork) modeLocked(from, to string) cutMode {
	return max(n.cut[from], n.cut[to])
}

// close stops every proxy and closes every connection.
func (n *PeerNetwork) close() {
	n.mu.Lock()
	n.closed = true
	proxies := n.proxies
	conns := make([]*proxiedConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	clear(n.conns)
	close(n.wakeups) // release pipes waiting out a stall
	n.wakeups = make(chan struct{})
	n.mu.Unlock()
	for _, p := range proxies {
		p.listener.Close()
	}
	for _, c := range conns {
		c.close()
	}
	n.wg.Wait()
}

func (n *PeerNetwork) accept(p *peerProxy) {
	defer n.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		from := ""
		if addr, ok := client.RemoteAddr().(*net.TCPAddr); ok {
			from = connOwner(addr.Port, p.port, n.pids())
		}
		n.mu.Lock()
		refuse := n.closed || n.modeLocked(from, p.member) == cutRefuse
		n.mu.Unlock()
		if refuse {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close() // the member is down: so is its proxied port
			continue
		}
		c := &proxiedConn{from: from, to: p.member, client: client, server: server}
		n.mu.Lock()
		if n.closed || n.modeLocked(from, p.member) == cutRefuse {
			n.mu.Unlock()
			c.close()
			continue
		}
		n.conns[c] = struct{}{}
		n.mu.Unlock()
		n.wg.Add(2)
		go n.pipe(c, c.server, c.client)
		go n.pipe(c, c.client, c.server)
	}
}

// pipe copies src to dst, holding bytes back while the connection stalls.
func (n *PeerNetwork) pipe(c *proxiedConn, dst, src net.Conn) {
	defer n.wg.Done()
	defer n.forget(c)
	buf := make([]byte, 32<<10)
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			if !n.waitForwarding(c) {
				return
			}
			if _, werr := dst.Write(buf[:nr]); werr != nil {
				return
			}
		}
		if err != nil {
			return // either side closing ends the proxied connection
		}
	}
}

// waitForwarding blocks while c stalls; false once c must be dropped.
func (n *PeerNetwork) waitForwarding(c *proxiedConn) bool {
	for {
		n.mu.Lock()
		mode, closed, wake := n.modeLocked(c.from, c.to), n.closed, n.wakeups
		n.mu.Unlock()
		switch {
		case closed || mode == cutRefuse:
			return false
		case mode == 0:
			return true
		}
		<-wake
	}
}

func (n *PeerNetwork) forget(c *proxiedConn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.close()
}

func (c *proxiedConn) close() {
	c.client.Close()
	c.server.Close()
}
