package rafthttp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/coreos/go-semver/semver"
)

// The headers etcd's peers put on every stream, pipeline and snapshot
// request, and on their answers.
const (
	HeaderFrom              = "X-Server-From"         // sender's member ID, hex
	HeaderServerVersion     = "X-Server-Version"      // sender's etcd version
	HeaderMinClusterVersion = "X-Min-Cluster-Version" // lowest cluster version the sender joins
	HeaderClusterID         = "X-Etcd-Cluster-ID"     // hex
	HeaderPeerURLs          = "X-PeerURLs"            // sender's peer URLs, comma-separated
	HeaderRaftTo            = "X-Raft-To"             // stream requests: the member asked for
)

// The versions a MetaStore member announces to its peers: it speaks the
// peer protocol of etcd 3.6 (pkg/etcdcompat reports the same server
// version to clients; a test there keeps the two equal) and, as etcd 3.6,
// joins clusters from version 3.0 on.
const (
	ServerVersion     = "3.6.16"
	MinClusterVersion = "3.0.0"
)

// The refusals a peer answers 412 Precondition Failed with; the body is
// the error's text, which the sender matches.
var (
	ErrIncompatibleVersion = errors.New("incompatible version")
	ErrClusterIDMismatch   = errors.New("cluster ID mismatch")
)

// ErrMemberRemoved is what a 403 answer means: the receiver removed the
// sender from the cluster.
var ErrMemberRemoved = errors.New("the member has been permanently removed from the cluster")

// Local is what a member says of itself in its requests and checks in a
// peer's.
type Local struct {
	ID, ClusterID uint64
	// ServerVersion and MinClusterVersion are etcd versions (3.6.16 and
	// 3.0.0 for etcd 3.6).
	ServerVersion, MinClusterVersion string
	PeerURLs                         []string
}

// SetRequestHeaders puts the sender's headers on a request, as etcd's
// createPostRequest and stream dialer do.
func (l Local) SetRequestHeaders(h http.Header) {
	h.Set(HeaderFrom, FormatID(l.ID))
	h.Set(HeaderServerVersion, l.ServerVersion)
	h.Set(HeaderMinClusterVersion, l.MinClusterVersion)
	h.Set(HeaderClusterID, FormatID(l.ClusterID))
	if len(l.PeerURLs) > 0 {
		h.Set(HeaderPeerURLs, strings.Join(l.PeerURLs, ","))
	}
}

// RefusalError is why Check refused a request: Reason is one of the
// 412 refusals (its text is the answer's body), Detail says why for the
// log.
type RefusalError struct {
	Reason error
	Detail string
}

func (e *RefusalError) Error() string { return e.Reason.Error() }
func (e *RefusalError) Unwrap() error { return e.Reason }

// Check is etcd's checkClusterCompatibilityFromHeader: the sender's
// version must be at least this member's minimum cluster version, and
// its minimum cluster version no higher than this member's version
// (major.minor; a missing header counts as 2.0.0), and it must name this
// member's cluster. Unlike etcd, a malformed version is refused, not a
// panic.
func (l Local) Check(h http.Header) error {
	from := h.Get(HeaderFrom)
	remote, err := majorMinor(h.Get(HeaderServerVersion))
	if err != nil {
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("remote[%s] server version: %v", from, err)}
	}
	remoteMin, err := majorMinor(h.Get(HeaderMinClusterVersion))
	if err != nil {
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("remote[%s] minimum cluster version: %v", from, err)}
	}
	localServer, err := majorMinor(l.ServerVersion)
	if err != nil {
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("local server version: %v", err)}
	}
	localMin, err := majorMinor(l.MinClusterVersion)
	if err != nil {
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("local minimum cluster version: %v", err)}
	}
	switch {
	case remote.LessThan(localMin):
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("remote version is too low: remote[%s]=%s, local=%s", from, h.Get(HeaderServerVersion), l.ServerVersion)}
	case localServer.LessThan(remoteMin):
		return &RefusalError{ErrIncompatibleVersion, fmt.Sprintf("local version is too low: remote[%s]=%s, local=%s", from, h.Get(HeaderServerVersion), l.ServerVersion)}
	}
	if got := h.Get(HeaderClusterID); got != FormatID(l.ClusterID) {
		return &RefusalError{ErrClusterIDMismatch, fmt.Sprintf("remote[%s] cluster ID %q, local %s", from, got, FormatID(l.ClusterID))}
	}
	return nil
}

// CheckAnswer is etcd's checkPostResponse: what a peer's answer to a
// pipeline or snapshot POST means. body is the answer's body.
func CheckAnswer(status int, body []byte) error {
	switch status {
	case http.StatusNoContent:
		return nil
	case http.StatusForbidden:
		return ErrMemberRemoved
	case http.StatusPreconditionFailed:
		switch text := strings.TrimSuffix(string(body), "\n"); text {
		case ErrIncompatibleVersion.Error():
			return ErrIncompatibleVersion
		case ErrClusterIDMismatch.Error():
			return ErrClusterIDMismatch
		default:
			return fmt.Errorf("unhandled error %q when precondition failed", text)
		}
	default:
		return fmt.Errorf("unexpected http status %s", http.StatusText(status))
	}
}

// FormatID writes a member or cluster ID as etcd does (types.ID): hex,
// no leading zeros.
func FormatID(id uint64) string { return strconv.FormatUint(id, 16) }

// ParseID reads an ID FormatID wrote.
func ParseID(s string) (uint64, error) { return strconv.ParseUint(s, 16, 64) }

// majorMinor reads a version header's major and minor; "" is 2.0.0, as
// etcd reads a missing header.
func majorMinor(s string) (semver.Version, error) {
	if s == "" {
		s = "2.0.0"
	}
	v, err := semver.NewVersion(s)
	if err != nil {
		return semver.Version{}, err
	}
	return semver.Version{Major: v.Major, Minor: v.Minor}, nil
}
