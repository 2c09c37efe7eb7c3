package tcpproxy

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeResolver answers SRV lookups from a table keyed by
// "_service._proto.name".
type fakeResolver map[string][]*net.SRV

func (f fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	key := "_" + service + "._" + proto + "." + name
	srvs, ok := f[key]
	if !ok {
		return "", nil, errors.New("no such host " + key)
	}
	return key, srvs, nil
}

func TestDiscoverSecureFirstWithName(t *testing.T) {
	r := fakeResolver{
		"_etcd-client-ssl-east._tcp.example.com": {{Target: "m1.example.com", Port: 2379}},
		"_etcd-client-east._tcp.example.com":     {{Target: "m2.example.com", Port: 2380}},
		"_etcd-client._tcp.example.com":          {{Target: "other.example.com", Port: 1}},
	}
	d, err := Discover(context.Background(), r, "example.com", "east")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://m1.example.com:2379", "http://m2.example.com:2380"}
	if !reflect.DeepEqual(d.URLs, want) || len(d.SRVs) != 2 {
		t.Fatalf("discovered %v, want %v", d.URLs, want)
	}
}

func TestDiscoverFailsWhenNoLookupSucceeds(t *testing.T) {
	_, err := Discover(context.Background(), fakeResolver{}, "example.com", "")
	if err == nil || !strings.HasPrefix(err.Error(), "dns lookup errors: ") {
		t.Fatalf("error %v, want etcd's dns lookup errors", err)
	}
}

func TestKeepSecureKeepsReachableHTTPS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	live, dead := l.Addr().String(), deadAddr(t)
	d := Discovered{
		URLs: []string{"https://" + live, "http://" + live, "https://" + dead},
		SRVs: []*net.SRV{srvOf(t, live), srvOf(t, live), srvOf(t, dead)},
	}
	kept, err := d.KeepSecure(context.Background(), "", (&net.Dialer{}).DialContext, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "is insecure") || !strings.Contains(err.Error(), "failed to dial") {
		t.Fatalf("error %v, want the insecure and the unreachable endpoint named", err)
	}
	if !reflect.DeepEqual(kept.URLs, []string{"https://" + live}) || len(kept.SRVs) != 1 {
		t.Fatalf("kept %v, want only the reachable https endpoint", kept.URLs)
	}
	if _, err := d.KeepSecure(context.Background(), "/nonexistent/ca.pem", (&net.Dialer{}).DialContext, time.Second); err == nil {
		t.Fatal("an unreadable CA file kept endpoints")
	}
}
