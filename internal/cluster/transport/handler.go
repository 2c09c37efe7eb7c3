package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
)

// The peer API: etcd's rafthttp paths (rafthttp.PipelinePath and the
// others) and, for what etcd does not have, calls forwarded to a
// registered handler.
const (
	pathForward = "/raft/forward/"

	// hdrTimeout carries a forwarded request's remaining time in
	// microseconds (relative, so clock skew does not matter).
	hdrTimeout = "X-Metastore-Timeout-Us"
	// hdrErrorCode carries a forward handler's gRPC status code.
	hdrErrorCode = "X-Metastore-Error-Code"
	// hdrMember marks every request and answer of a MetaStore member:
	// until a MetaStore member applies etcd's raft entries (etcd's
	// InternalRaftRequest) and takes its snapshots, raft traffic with an
	// etcd member would make one of the two fail its apply, so traffic
	// without the mark is refused on both sides.
	hdrMember = "X-Metastore-Member"
	memberV1  = "1"
	// hdrSnapshotImage marks a snapshot POST whose state is a MetaStore
	// image (length, image, crc32c) rather than etcd's bbolt database.
	hdrSnapshotImage = "X-Metastore-Snapshot-Image"
	snapshotImageV1  = "1"

	// maxRefusalBody bounds how much of a refusal's text is read.
	maxRefusalBody = 1 << 10
	// maxRefusalLogKeys bounds the memory of refusal log limiting.
	maxRefusalLogKeys = 1024
)

// What etcd answers a sender it will not serve, by the request's kind.
const (
	refusedInvalidFrom     = "invalid from"
	refusedRemovedStream   = "removed member"
	refusedRemovedPost     = "cannot process message from removed member"
	refusedUnknownSender   = "error sender not found"
	refusedToFieldMismatch = "to field mismatch"
	// refusedEtcdPeer is answered 412 (which etcd only logs: a 403 or 410
	// would make it stop itself as removed).
	refusedEtcdPeer = "metastore: raft traffic with etcd members is not supported yet"
)

// peerHandler serves an authenticated request from member from; a is the
// local member (nil if not attached yet and the route does not need it).
type peerHandler func(w http.ResponseWriter, r *http.Request, from uint64, a *attachment)

func (t *Transport) newHandler() http.Handler {
	mux := http.NewServeMux()
	for kind := range numStreamKinds {
		mux.Handle("GET "+kind.path()+"/{from}", t.streamHandler(kind))
	}
	mux.Handle("POST "+rafthttp.PipelinePath, t.guard(t.servePipeline, true, false))
	mux.Handle("POST "+rafthttp.SnapshotPath, t.guard(t.serveSnapshot, true, true))
	mux.Handle("POST "+pathForward+"{method}", t.guard(t.serveForward, false, true))
	// etcd members probe their peers here, and so does this transport.
	mux.Handle("GET "+rafthttp.ProbingPath, rafthttp.ProbingHandler())
	return mux
}

// streamHandler authenticates a stream request as etcd's streamHandler
// does, in its order and with its answers, and serves it.
func (t *Transport) streamHandler(kind streamKind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(rafthttp.HeaderServerVersion, t.cfg.ServerVersion)
		if !t.checkCompatible(w, r) {
			return
		}
		from, err := parseID(r.PathValue("from"))
		if err != nil {
			http.Error(w, refusedInvalidFrom, http.StatusNotFound)
			return
		}
		refuse := func(code int, body, why string) {
			t.logRefusal(from, code, why, r.RemoteAddr)
			http.Error(w, body, code)
		}
		p := t.peer(from)
		switch {
		case t.isRemoved(from):
			refuse(http.StatusGone, refusedRemovedStream, fmt.Sprintf("member %s was removed from cluster %s", idString(from), idString(t.cfg.ClusterID)))
		case p == nil:
			refuse(http.StatusNotFound, refusedUnknownSender, fmt.Sprintf("member %s is not a known member of cluster %s", idString(from), idString(t.cfg.ClusterID)))
		case r.Header.Get(rafthttp.HeaderRaftTo) != idString(t.cfg.ID):
			refuse(http.StatusPreconditionFailed, refusedToFieldMismatch, fmt.Sprintf("stream for member %s reached member %s",
				r.Header.Get(rafthttp.HeaderRaftTo), idString(t.cfg.ID)))
		case t.attached() == nil:
			http.Error(w, "member is starting: raft is not running yet", http.StatusServiceUnavailable)
		default:
			t.serveStream(w, r, p, kind)
		}
	})
}

// guard authenticates a POST: a compatible sender of this cluster that
// names itself and was not removed; knownOnly also refuses senders this
// member does not know (etcd steps pipelined messages from anyone). It
// checks the local member is attached when the route needs raft.
func (t *Transport) guard(h peerHandler, needsRaft, knownOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.checkCompatible(w, r) {
			return
		}
		from, err := parseID(r.Header.Get(rafthttp.HeaderFrom))
		if err != nil {
			http.Error(w, fmt.Sprintf("bad %s header: %v", rafthttp.HeaderFrom, err), http.StatusBadRequest)
			return
		}
		if t.isRemoved(from) {
			t.logRefusal(from, http.StatusForbidden, fmt.Sprintf("member %s was removed from cluster %s", idString(from), idString(t.cfg.ClusterID)), r.RemoteAddr)
			http.Error(w, refusedRemovedPost, http.StatusForbidden)
			return
		}
		if knownOnly && t.peer(from) == nil {
			t.logRefusal(from, http.StatusNotFound, fmt.Sprintf("member %s is not a known member of cluster %s", idString(from), idString(t.cfg.ClusterID)), r.RemoteAddr)
			http.Error(w, refusedUnknownSender, http.StatusNotFound)
			return
		}
		a := t.attached()
		if needsRaft && a == nil {
			http.Error(w, "member is starting: raft is not running yet", http.StatusServiceUnavailable)
			return
		}
		h(w, r, from, a)
	})
}

// checkCompatible is the check etcd makes of every request: the sender's
// versions, then its cluster. A refusal is answered 412 with the reason
// the sender matches, and logged here with what the sender said.
func (t *Transport) checkCompatible(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set(rafthttp.HeaderClusterID, idString(t.cfg.ClusterID))
	w.Header().Set(hdrMember, memberV1)
	err := t.self.Check(r.Header)
	if err == nil && r.Header.Get(hdrMember) != memberV1 {
		from, _ := parseID(r.Header.Get(rafthttp.HeaderFrom))
		t.logRefusal(from, http.StatusPreconditionFailed, fmt.Sprintf("member %s is an etcd member (etcd %s): %s",
			r.Header.Get(rafthttp.HeaderFrom), r.Header.Get(rafthttp.HeaderServerVersion), refusedEtcdPeer), r.RemoteAddr)
		http.Error(w, refusedEtcdPeer, http.StatusPreconditionFailed)
		return false
	}
	if err == nil {
		return true
	}
	from, _ := parseID(r.Header.Get(rafthttp.HeaderFrom))
	why := err.Error()
	var refusal *rafthttp.RefusalError
	if errors.As(err, &refusal) {
		why = refusal.Detail
		if errors.Is(err, rafthttp.ErrClusterIDMismatch) {
			why = fmt.Sprintf("member %s belongs to cluster %s, expected %s",
				r.Header.Get(rafthttp.HeaderFrom), r.Header.Get(rafthttp.HeaderClusterID), idString(t.cfg.ClusterID))
		}
	}
	t.logRefusal(from, http.StatusPreconditionFailed, why, r.RemoteAddr)
	http.Error(w, err.Error(), http.StatusPreconditionFailed)
	return false
}

func (t *Transport) isRemoved(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removed[id]
}

// refusalLogs rate-limits refusal logs per sender and reason.
type refusalLogs struct {
	mu    sync.Mutex
	byKey map[refusalKey]*logLimiter
}

type refusalKey struct {
	from uint64
	code int
}

func (t *Transport) logRefusal(from uint64, code int, msg, remote string) {
	key := refusalKey{from: from, code: code}
	t.refusals.mu.Lock()
	l := t.refusals.byKey[key]
	if l == nil {
		if len(t.refusals.byKey) >= maxRefusalLogKeys {
			clear(t.refusals.byKey)
		}
		l = &logLimiter{every: connLogInterval}
		t.refusals.byKey[key] = l
	}
	ok, suppressed := l.allow(time.Now())
	t.refusals.mu.Unlock()
	if ok {
		t.log.Error("refused peer request: "+msg, "peer", idString(from), "remote-addr", remote, "suppressed-events", suppressed)
	}
}

// setIdentity adds the headers etcd's members put on every request, and
// the member it is meant for.
func (t *Transport) setIdentity(h http.Header, to uint64) {
	t.self.SetRequestHeaders(h)
	h.Set(rafthttp.HeaderRaftTo, idString(to))
	h.Set(hdrMember, memberV1)
}

// etcdPeerError is why an answer from an etcd member is not used.
func etcdPeerError(id uint64, url string, h http.Header) error {
	return fmt.Errorf("peer %s at %s is an etcd member (etcd %s): %s", idString(id), url, h.Get(rafthttp.HeaderServerVersion), refusedEtcdPeer)
}

// refusedError is a peer's refusal of our identity or request.
type refusedError struct {
	status int
	msg    string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("refused (%d %s): %s", e.status, http.StatusText(e.status), e.msg)
}

// refusal turns a non-success answer from peer id into an error, naming
// the peer's cluster when that is the reason.
func (t *Transport) refusal(id uint64, url string, resp *http.Response) error {
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
	msg := strings.TrimSpace(string(text))
	if resp.StatusCode == http.StatusPreconditionFailed {
		if theirs, err := parseID(resp.Header.Get(rafthttp.HeaderClusterID)); err == nil && theirs != t.cfg.ClusterID {
			msg = fmt.Sprintf("member %s at %s belongs to cluster %s, expected %s",
				idString(id), url, idString(theirs), idString(t.cfg.ClusterID))
		}
	}
	switch {
	case resp.StatusCode == http.StatusGone, resp.StatusCode == http.StatusForbidden && msg == refusedRemovedPost:
		msg = "peer says this member was removed from the cluster: " + msg
		defer t.reportRemoved(id, errors.New(msg))
	case resp.StatusCode == http.StatusNotFound && msg == refusedUnknownSender:
		msg = fmt.Sprintf("peer %s at %s does not know this member (%s)", idString(id), url, msg)
	}
	return &refusedError{status: resp.StatusCode, msg: msg}
}

// probe measures one request round trip to p, at etcd's probing path.
func (t *Transport) probe(ctx context.Context, p *peer) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	url := p.currentURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+rafthttp.ProbingPath, nil)
	if err != nil {
		return 0, fmt.Errorf("build probe request: %w", err)
	}
	start := time.Now()
	resp, err := t.calls.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxRefusalBody)); err != nil {
		return 0, fmt.Errorf("%w: read probe answer: %w", ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, t.refusal(p.id, url, resp)
	}
	return time.Since(start), nil
}

func parseID(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("missing member or cluster ID")
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("invalid member or cluster ID %q", s)
	}
	return id, nil
}
