package rafthttp

import (
	"errors"
	"net/http"
	"testing"
)

var local36 = Local{ID: 0x8e9e05c52164694d, ClusterID: 0xcdf818194e3a8c32, ServerVersion: "3.6.16", MinClusterVersion: "3.0.0",
	PeerURLs: []string{"http://10.0.0.1:2380", "http://10.0.0.1:2390"}}

func TestRequestHeadersAreEtcds(t *testing.T) {
	h := http.Header{}
	local36.SetRequestHeaders(h)
	for k, want := range map[string]string{
		"X-Server-From":         "8e9e05c52164694d",
		"X-Server-Version":      "3.6.16",
		"X-Min-Cluster-Version": "3.0.0",
		"X-Etcd-Cluster-Id":     "cdf818194e3a8c32",
		"X-Peerurls":            "http://10.0.0.1:2380,http://10.0.0.1:2390",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if err := local36.Check(h); err != nil {
		t.Errorf("a member refuses its own headers: %v", err)
	}
}

// TestCheckAsEtcd follows checkClusterCompatibilityFromHeader's rules:
// major.minor only, a missing version is 2.0.0, then the cluster ID.
func TestCheckAsEtcd(t *testing.T) {
	for _, tc := range []struct {
		name, server, minCluster, cluster string
		want                              error
	}{
		{"etcd 3.5", "3.5.21", "3.0.0", "cdf818194e3a8c32", nil},
		{"a 3.6 patch with a pre-release", "3.6.0-rc.2", "3.0.0", "cdf818194e3a8c32", nil},
		{"a 3.7 member", "3.7.0", "3.0.0", "cdf818194e3a8c32", nil},
		{"needs a newer cluster", "3.8.0", "3.7.0", "cdf818194e3a8c32", ErrIncompatibleVersion},
		{"etcd 2.3", "2.3.8", "2.2.0", "cdf818194e3a8c32", ErrIncompatibleVersion},
		{"no version headers (2.0.0)", "", "", "cdf818194e3a8c32", ErrIncompatibleVersion},
		{"malformed version", "three", "3.0.0", "cdf818194e3a8c32", ErrIncompatibleVersion},
		{"other cluster", "3.6.16", "3.0.0", "1", ErrClusterIDMismatch},
		{"no cluster", "3.6.16", "3.0.0", "", ErrClusterIDMismatch},
		{"bad version wins over bad cluster", "2.0.0", "", "1", ErrIncompatibleVersion},
	} {
		h := http.Header{}
		h.Set(HeaderFrom, "2")
		if tc.server != "" {
			h.Set(HeaderServerVersion, tc.server)
		}
		if tc.minCluster != "" {
			h.Set(HeaderMinClusterVersion, tc.minCluster)
		}
		if tc.cluster != "" {
			h.Set(HeaderClusterID, tc.cluster)
		}
		err := local36.Check(h)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		var refusal *RefusalError
		if err != nil && (!errors.As(err, &refusal) || refusal.Detail == "" || err.Error() != tc.want.Error()) {
			t.Errorf("%s: refusal %#v: its text must be the 412 body %q, with a detail", tc.name, err, tc.want)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{http.StatusNoContent, "", nil},
		{http.StatusForbidden, "", ErrMemberRemoved},
		{http.StatusPreconditionFailed, "incompatible version\n", ErrIncompatibleVersion},
		{http.StatusPreconditionFailed, "cluster ID mismatch\n", ErrClusterIDMismatch},
	} {
		if err := CheckAnswer(tc.status, []byte(tc.body)); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%d %q: %v, want %v", tc.status, tc.body, err, tc.want)
		}
	}
	for _, tc := range []struct {
		status int
		body   string
	}{{http.StatusPreconditionFailed, "something else"}, {http.StatusInternalServerError, ""}, {http.StatusOK, ""}} {
		if err := CheckAnswer(tc.status, []byte(tc.body)); err == nil {
			t.Errorf("%d %q accepted", tc.status, tc.body)
		}
	}
}

func TestIDsAreEtcdsHex(t *testing.T) {
	for _, id := range []uint64{0, 1, 0x8e9e05c52164694d, ^uint64(0)} {
		got, err := ParseID(FormatID(id))
		if err != nil || got != id {
			t.Errorf("%x: round trip %x, %v", id, got, err)
		}
	}
	if FormatID(0xa) != "a" {
		t.Errorf("FormatID(10) = %q, want etcd's \"a\"", FormatID(0xa))
	}
}
