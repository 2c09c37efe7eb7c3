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

// The peer API.
const (
	pathStream   = "/raft/stream"
	pathSnapshot = "/raft/snapshot"
	pathForward  = "/raft/forward/"
	pathProbe    = "/raft/probe"

	// Every request names the protocol, its sender, the member it is
	// meant for and the sender's cluster; every answer names the
	// answering member's cluster.
	hdrProtocol = "X-Metastore-Peer-Protocol"
	hdrFrom     = "X-Metastore-From"
	hdrTo       = "X-Metastore-To"
	hdrCluster  = "X-Metastore-Cluster"
	// hdrTimeout carries a forwarded request's remaining time in
	// microseconds (relative, so clock skew does not matter).
	hdrTimeout = "X-Metastore-Timeout-Us"
	// hdrErrorCode carries a forward handler's gRPC status code.
	hdrErrorCode = "X-Metastore-Error-Code"

	protocolVersion = "1"

	// maxRefusalBody bounds how much of a refusal's text is read.
	maxRefusalBody = 1 << 10
	// maxRefusalLogKeys bounds the memory of refusal log limiting.
	maxRefusalLogKeys = 1024
)

// peerHandler serves an authenticated request from member from; a is the
// local member (nil if not attached yet and the route does not need it).
type peerHandler func(w http.ResponseWriter, r *http.Request, from uint64, a *attachment)

func (t *Transport) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+pathStream, t.guard(t.serveStream, true))
	mux.Handle("POST "+pathSnapshot, t.guard(t.serveSnapshot, true))
	mux.Handle("POST "+pathForward+"{method}", t.guard(t.serveForward, false))
	mux.Handle("GET "+pathProbe, t.guard(func(w http.ResponseWriter, _ *http.Request, _ uint64, _ *attachment) {
		w.WriteHeader(http.StatusNoContent)
	}, false))
	// etcd members probe their peers here; answering keeps an etcd member
	// of a mixed cluster from logging this one unhealthy.
	mux.Handle("GET "+rafthttp.ProbingPath, rafthttp.ProbingHandler())
	return mux
}

// guard authenticates the request and checks the local member is ready.
func (t *Transport) guard(h peerHandler, needsRaft bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrCluster, idString(t.cfg.ClusterID))
		from, ok := t.authenticate(w, r)
		if !ok {
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

// authenticate checks who sent r: the right protocol, our cluster, meant
// for us, and a current member. It answers refused requests itself.
func (t *Transport) authenticate(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	if v := r.Header.Get(hdrProtocol); v != protocolVersion {
		http.Error(w, fmt.Sprintf("peer protocol %q, this member speaks %q", v, protocolVersion), http.StatusBadRequest)
		return 0, false
	}
	from, err1 := parseID(r.Header.Get(hdrFrom))
	cluster, err2 := parseID(r.Header.Get(hdrCluster))
	to, err3 := parseID(r.Header.Get(hdrTo))
	if err := errors.Join(err1, err2, err3); err != nil {
		http.Error(w, fmt.Sprintf("bad identity headers: %v", err), http.StatusBadRequest)
		return 0, false
	}
	refuse := func(code int, msg string) (uint64, bool) {
		t.logRefusal(from, code, msg, r.RemoteAddr)
		http.Error(w, msg, code)
		return 0, false
	}
	if cluster != t.cfg.ClusterID {
		return refuse(http.StatusPreconditionFailed, fmt.Sprintf("member %s belongs to cluster %s, expected %s",
			idString(from), idString(cluster), idString(t.cfg.ClusterID)))
	}
	if to != t.cfg.ID {
		return refuse(http.StatusConflict, fmt.Sprintf("request for member %s reached member %s", idString(to), idString(t.cfg.ID)))
	}
	t.mu.Lock()
	removed := t.removed[from]
	t.mu.Unlock()
	if removed {
		return refuse(http.StatusGone, fmt.Sprintf("member %s was removed from cluster %s", idString(from), idString(t.cfg.ClusterID)))
	}
	if t.peer(from) == nil {
		return refuse(http.StatusForbidden, fmt.Sprintf("member %s is not a known member of cluster %s", idString(from), idString(t.cfg.ClusterID)))
	}
	return from, true
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

// setIdentity adds the headers authenticate checks.
func (t *Transport) setIdentity(h http.Header, to uint64) {
	h.Set(hdrProtocol, protocolVersion)
	h.Set(hdrFrom, idString(t.cfg.ID))
	h.Set(hdrTo, idString(to))
	h.Set(hdrCluster, idString(t.cfg.ClusterID))
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
		if theirs, err := parseID(resp.Header.Get(hdrCluster)); err == nil && theirs != t.cfg.ClusterID {
			msg = fmt.Sprintf("member %s at %s belongs to cluster %s, expected %s",
				idString(id), url, idString(theirs), idString(t.cfg.ClusterID))
		}
	}
	if resp.StatusCode == http.StatusGone {
		msg = "peer says this member was removed from the cluster: " + msg
	}
	return &refusedError{status: resp.StatusCode, msg: msg}
}

// probe measures one request round trip to p.
func (t *Transport) probe(ctx context.Context, p *peer) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	url := p.currentURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+pathProbe, nil)
	if err != nil {
		return 0, fmt.Errorf("build probe request: %w", err)
	}
	t.setIdentity(req.Header, p.id)
	start := time.Now()
	resp, err := t.streams.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
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
