package membership

import (
	"fmt"
	"testing"
	"time"
)

// The expected IDs are what etcd 3.6 reports for the same flags.
func TestMemberIDMatchesEtcd(t *testing.T) {
	cases := []struct {
		peerURLs []string
		token    string
		want     string
	}{
		// etcd --name default (all defaults): member 8e9e05c52164694d.
		{[]string{"http://localhost:2380"}, "etcd-cluster", "8e9e05c52164694d"},
	}
	for _, c := range cases {
		if got := fmt.Sprintf("%x", MemberID(c.peerURLs, c.token, nil)); got != c.want {
			t.Errorf("MemberID(%v, %q) = %s, want %s", c.peerURLs, c.token, got, c.want)
		}
	}
}

func TestClusterIDMatchesEtcd(t *testing.T) {
	// etcd's default single member cluster: cluster cdf818194e3a8c32.
	id := MemberID([]string{"http://localhost:2380"}, "etcd-cluster", nil)
	if got := fmt.Sprintf("%x", ClusterID([]uint64{id})); got != "cdf818194e3a8c32" {
		t.Fatalf("ClusterID = %s, want cdf818194e3a8c32", got)
	}
}

func TestMemberIDOrderIndependentAndTimed(t *testing.T) {
	a := MemberID([]string{"http://a:1", "http://b:2"}, "t", nil)
	b := MemberID([]string{"http://b:2", "http://a:1"}, "t", nil)
	if a != b {
		t.Fatalf("peer URL order changed the ID: %x != %x", a, b)
	}
	now := time.Unix(1700000000, 0)
	if MemberID([]string{"http://a:1"}, "t", &now) == MemberID([]string{"http://a:1"}, "t", nil) {
		t.Fatal("a member added at runtime must not get the bootstrap ID")
	}
}

func TestParseInitialCluster(t *testing.T) {
	got, err := ParseInitialCluster("a=http://127.0.0.1:1,b=http://127.0.0.1:2,a=http://127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || len(got[0].PeerURLs) != 2 || got[1].Name != "b" {
		t.Fatalf("unexpected parse: %+v", got)
	}
	for _, bad := range []string{"", "a", "=http://x:1", "a=", "a=ftp://x:1", "a=http://nohostport"} {
		if _, err := ParseInitialCluster(bad); err == nil {
			t.Errorf("ParseInitialCluster(%q) accepted a malformed value", bad)
		}
	}
}
