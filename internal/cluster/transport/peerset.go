package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/membershippb"
)

// PeerSet keeps a transport's peers in line with the replicated member
// list. Its member uses it from one goroutine at a time (the apply
// goroutine, and its start before raft runs), so it needs no lock.
type PeerSet struct {
	self  uint64
	known map[uint64][]string
}

// NewPeerSet is the peer set of member self.
func NewPeerSet(self uint64) *PeerSet {
	return &PeerSet{self: self, known: map[uint64][]string{}}
}

// Seed adds peers known before the member list is (bootstrap flags, or
// the running cluster's list when joining).
func (p *PeerSet) Seed(log *slog.Logger, t *Transport, peers map[uint64][]string) {
	for id, urls := range peers {
		p.set(log, t, id, urls)
	}
}

// Sync adds new members, updates changed peer URLs and removes members
// that were removed from the cluster. A peer not (yet) in the list but not
// removed either is kept: a joining member learns the list only after it
// talked to the leader.
func (p *PeerSet) Sync(log *slog.Logger, t *Transport, members []*membershippb.Member, isRemoved func(uint64) bool) {
	for _, m := range members {
		if m.RaftAttributes != nil {
			p.set(log, t, m.ID, m.RaftAttributes.PeerUrls)
		}
	}
	for id := range p.known {
		if isRemoved(id) {
			t.RemovePeer(id)
			delete(p.known, id)
		}
	}
}

func (p *PeerSet) set(log *slog.Logger, t *Transport, id uint64, urls []string) {
	if id == p.self || len(urls) == 0 {
		return
	}
	if old, ok := p.known[id]; ok && slices.Equal(old, urls) {
		return
	}
	// AddPeer also updates the URLs of a known peer.
	if err := t.AddPeer(id, urls); err != nil {
		// Only unusable URLs (validated before they were replicated) or
		// a stopped transport get here; the member stays unreachable.
		log.Error("cannot reach peer", "peer", fmt.Sprintf("%x", id), "urls", urls, "error", err)
		return
	}
	p.known[id] = slices.Clone(urls)
}

// PeerHTTPClient asks peers outside the transport (the member list when
// joining, hashes for the corruption checks), over TLS with the member's
// peer certificates when it has them (as etcd's rafthttp round tripper),
// each connection with the files as they are. timeout 0: none.
func PeerHTTPClient(peerTLS ClientTLS, timeout time.Duration) *http.Client {
	client := &http.Client{Timeout: timeout}
	if peerTLS == nil {
		return client
	}
	client.Transport = &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cfg, err := peerTLS.ClientConfig("")
			if err != nil {
				return nil, err
			}
			if cfg.ServerName == "" {
				cfg.ServerName, _, _ = net.SplitHostPort(addr)
			}
			d := &tls.Dialer{Config: cfg}
			return d.DialContext(ctx, network, addr)
		},
	}
	return client
}
