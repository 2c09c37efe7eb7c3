package membership

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// MemberID computes the ID etcd gives a member with these peer URLs in a
// cluster started with this initial-cluster-token. addedAt is nil for the
// members of the initial cluster, and the time of the MemberAdd otherwise.
func MemberID(peerURLs []string, token string, addedAt *time.Time) uint64 {
	sorted := slices.Clone(peerURLs)
	slices.Sort(sorted)
	b := []byte(strings.Join(sorted, ""))
	b = append(b, token...)
	if addedAt != nil {
		b = append(b, fmt.Sprintf("%d", addedAt.Unix())...)
	}
	sum := sha1.Sum(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// ClusterID computes the cluster ID from the IDs of the initial members.
func ClusterID(memberIDs []uint64) uint64 {
	sorted := slices.Clone(memberIDs)
	slices.Sort(sorted)
	b := make([]byte, 8*len(sorted))
	for i, id := range sorted {
		binary.BigEndian.PutUint64(b[8*i:], id)
	}
	sum := sha1.Sum(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// InitialMember is one entry of --initial-cluster.
type InitialMember struct {
	Name     string
	PeerURLs []string
}

// ParseInitialCluster parses etcd's --initial-cluster syntax,
// "name1=http://host1:2380,name2=http://host2:2380", where a name may appear
// several times to give a member several peer URLs. Members come back in the
// order of their first appearance.
func ParseInitialCluster(s string) ([]InitialMember, error) {
	var out []InitialMember
	index := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rawURL, ok := strings.Cut(part, "=")
		if !ok || name == "" || rawURL == "" {
			return nil, fmt.Errorf("invalid --initial-cluster entry %q: want name=peerURL", part)
		}
		if err := ValidateURL(rawURL); err != nil {
			return nil, fmt.Errorf("invalid --initial-cluster entry %q: %w", part, err)
		}
		i, seen := index[name]
		if !seen {
			i = len(out)
			index[name] = i
			out = append(out, InitialMember{Name: name})
		}
		out[i].PeerURLs = append(out[i].PeerURLs, rawURL)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--initial-cluster is empty")
	}
	return out, nil
}

// ValidateURL accepts the URLs etcd accepts for peers and clients:
// http or https (or unix/unixs) with a host and port and no path.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "http", "https", "unix", "unixs":
	default:
		return fmt.Errorf("URL scheme must be http, https, unix, or unixs: %s", raw)
	}
	// A unix URL names a socket file by host and path, as etcd reads it.
	if u.Scheme == "http" || u.Scheme == "https" {
		if u.Port() == "" {
			return fmt.Errorf(`URL address does not have the form "host:port": %s`, raw)
		}
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("URL must not contain a path: %s", raw)
		}
	}
	return nil
}
